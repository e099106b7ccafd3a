"""The CLI contract: documented commands, instant --help, one-line errors with exit codes."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from eventlake.cli import cli
from tests.collect.harness import free_port

REFERENCE = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()


def all_commands(group: click.Group = cli, prefix: str = "eventlake") -> list[tuple[str, click.Command]]:
    found = []
    for name, command in sorted(group.commands.items()):
        path = f"{prefix} {name}"
        if isinstance(command, click.Group):
            found += all_commands(command, path)
        else:
            found.append((path, command))
    return found


@pytest.mark.parametrize(("path", "command"), all_commands(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_command_is_documented_with_an_example(path: str, command: click.Command) -> None:
    assert f"`{path}" in REFERENCE, f"{path} is missing from the command reference (docs/cli.md)"
    assert "Example" in (command.help or ""), f"{path} --help has no example"


def test_help_does_not_start_spark() -> None:
    code = (
        "import sys; from eventlake.cli import cli\ntry:\n    cli(['--help'])\nexcept SystemExit: pass\n"
        "print('pyspark' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("False")


def test_sync_imports_neither_the_collector_nor_the_web_console_nor_duckdb() -> None:
    """What ``eventlake sync`` imports before it starts its JVM (the alerts, the sync) does not
    bring ``up``'s parts: they cost 1.7 s of a sync's start-up."""
    code = (
        "import sys; import eventlake.cli.main, eventlake.scheduler.alerts, eventlake.sync\n"
        "print(sorted(m for m in ('duckdb', 'eventlake.console', 'eventlake.collect', "
        "'eventlake.scheduler.up') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_missing_config_is_a_one_line_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "nope.toml"), "sources", "list"])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0
    assert "eventlake init" in result.output


def test_init_and_sources(tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["init", str(tmp_path / "p")]).exit_code == 0
    config = str(tmp_path / "p" / "eventlake.toml")
    added = runner.invoke(cli, ["--config", config, "sources", "add", "web", "--write-key", "wk_web"])
    assert added.exit_code == 0 and "wk_web" in added.output
    again = runner.invoke(cli, ["--config", config, "sources", "add", "web"])
    assert again.exit_code == 2 and "already exists" in again.output
    listed = runner.invoke(cli, ["--config", config, "sources", "list", "--format", "csv"])
    assert listed.output.splitlines()[0] == "slug,id,database,table_prefix,date_partition,enabled"
    assert listed.output.splitlines()[1].startswith("web,")


def test_sync_without_sources_fails_clearly(tmp_path: Path) -> None:
    runner = CliRunner()
    runner.invoke(cli, ["init", str(tmp_path / "p")])
    result = runner.invoke(cli, ["--config", str(tmp_path / "p" / "eventlake.toml"), "sync"])
    assert result.exit_code == 2 and "no sources configured" in result.output


def _eventlake(*args: str, **environ: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eventlake", *args], capture_output=True, text=True, timeout=120,
        env=os.environ | environ,
    )  # fmt: skip


def test_an_unexpected_error_is_one_line_naming_its_traceback_file(tmp_path: Path) -> None:
    """A real failure nothing translates (today): the collector's spool folder is a file."""
    assert CliRunner().invoke(cli, ["init", str(tmp_path / "p")]).exit_code == 0
    config = tmp_path / "p" / "eventlake.toml"
    (tmp_path / "p" / ".eventlake").mkdir()
    (tmp_path / "p" / ".eventlake" / "spool").write_text("not a folder")
    result = _eventlake("--config", str(config), "serve", "--port", str(free_port()))
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    match = re.fullmatch(r"error: FileExistsError: .*'.*spool' \(full traceback: (.+)\)", line)
    assert match, line
    log = Path(match.group(1))
    assert log.parent == tmp_path / "p" / ".eventlake" / "logs"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    text = log.read_text()
    assert "`eventlake serve` failed" in text and "Traceback (most recent call last)" in text
    assert text.rstrip().splitlines()[-1].startswith("FileExistsError:")


def test_an_unexpected_error_without_a_usable_state_dir_keeps_its_traceback_elsewhere(tmp_path: Path) -> None:
    assert CliRunner().invoke(cli, ["init", str(tmp_path / "p")]).exit_code == 0
    config = tmp_path / "p" / "eventlake.toml"
    config.write_text(config.read_text().replace('state_dir = ".eventlake"', 'state_dir = "state-file"'))
    (tmp_path / "p" / "state-file").write_text("not a folder")
    (tmp_path / "tmp").mkdir()
    result = _eventlake(
        "--config", str(config), "serve", "--port", str(free_port()), TMPDIR=str(tmp_path / "tmp")
    )
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    match = re.fullmatch(r"error: \w+Error: .* \(full traceback: (.+)\)", line)
    assert match, line
    log = Path(match.group(1))
    assert log.parent == tmp_path / "tmp" and "Traceback (most recent call last)" in log.read_text()


def _project_with_sources(tmp_path: Path, *slugs: str) -> str:
    runner = CliRunner()
    assert runner.invoke(cli, ["init", str(tmp_path / "p")]).exit_code == 0
    config = str(tmp_path / "p" / "eventlake.toml")
    for slug in slugs:
        assert runner.invoke(cli, ["--config", config, "sources", "add", slug]).exit_code == 0
    return config


def test_sources_disable_enable_and_their_messages(tmp_path: Path) -> None:
    config = _project_with_sources(tmp_path, "web", "ios")
    runner = CliRunner()
    disabled = runner.invoke(cli, ["--config", config, "sources", "disable", "ios"])
    assert disabled.exit_code == 0
    assert disabled.stdout.startswith("disabled source ios: its events are still collected and archived (in ")
    assert "not synced until `eventlake sources enable ios`" in disabled.stdout
    assert "takes this up within a second, without a restart" in disabled.stderr
    again = runner.invoke(cli, ["--config", config, "sources", "disable", "ios"])
    assert (again.exit_code, again.stdout) == (0, "source ios is already disabled\n")
    listed = runner.invoke(cli, ["--config", config, "sources", "list", "--format", "csv"]).stdout
    listed = listed.splitlines()
    assert listed[0].endswith(",enabled") and listed[1].endswith(",True") and listed[2].endswith(",False")

    skipped = runner.invoke(cli, ["--config", config, "sync", "--source", "ios"])  # no Spark started
    assert skipped.exit_code == 2
    said = "ios: Skipped: disabled (source ios is disabled: its events are collected and archived but not"
    assert said in skipped.stderr
    assert skipped.stderr.splitlines()[-1] == "error: ios not synced: disabled"

    enabled = runner.invoke(cli, ["--config", config, "sources", "enable", "ios"])
    assert enabled.exit_code == 0 and enabled.stdout.startswith("enabled source ios: the next sync")
    unknown = runner.invoke(cli, ["--config", config, "sources", "enable", "nope"])
    assert unknown.exit_code == 2 and "unknown source 'nope' (known: web, ios;" in unknown.stderr


def test_sources_remove_asks_first_and_says_what_stays(tmp_path: Path) -> None:
    config = _project_with_sources(tmp_path, "web", "ios")
    runner = CliRunner()
    refused = runner.invoke(cli, ["--config", config, "sources", "remove", "ios"])  # no terminal to ask on
    assert refused.exit_code == 2
    assert refused.stderr == "error: not removing source ios without a confirmation: pass --yes\n"

    # on a terminal: asked, and "n" keeps it (exit 1), "y" removes it
    import pty

    for answer, code in ((b"n\n", 1), (b"y\n", 0)):
        leader, follower = pty.openpty()
        process = subprocess.Popen(
            [sys.executable, "-m", "eventlake", "--config", config, "sources", "remove", "ios"],
            stdin=follower, stdout=subprocess.PIPE, stderr=follower, env=os.environ,
        )  # fmt: skip
        os.close(follower)
        prompt = b""
        while b"[y/N]" not in prompt:
            prompt += os.read(leader, 1024)
        assert b"Remove source ios (id " in prompt and b"its lake data and archive stay" in prompt
        os.write(leader, answer)
        stdout, _ = process.communicate(timeout=60)
        os.close(leader)
        assert process.returncode == code
    assert stdout.decode().startswith('[[sources]]\nslug = "ios"\n')

    listed = runner.invoke(cli, ["--config", config, "sources", "list", "--format", "csv"]).stdout
    assert [line.split(",")[0] for line in listed.splitlines()[1:]] == ["web"]
    web = runner.invoke(cli, ["--config", config, "sources", "remove", "web", "--yes"])
    assert web.exit_code == 0
    assert "removed source web (id " in web.stderr
    for kept in ("its lake data in ", "/lake/segment-data/data/", "its tables in database web",
                 "its raw archive in ", "/lake/segment-logs/"):  # fmt: skip
        assert kept in web.stderr, web.stderr

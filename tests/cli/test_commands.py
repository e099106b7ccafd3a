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

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


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
    assert f"`{path}" in README, f"{path} is missing from the README's command reference"
    assert "Example" in (command.help or ""), f"{path} --help has no example"


def test_help_does_not_start_spark() -> None:
    code = (
        "import sys; from eventlake.cli import cli\ntry:\n    cli(['--help'])\nexcept SystemExit: pass\n"
        "print('pyspark' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("False")


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
    assert listed.output.splitlines()[0] == "slug,id,database,table_prefix,date_partition"
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

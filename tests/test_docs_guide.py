"""The migration guide (docs/migrating-from-segment-data-lakes.md) names only commands that exist.

Every ``eventlake ...`` command line of the guide, in its code blocks and in inline code, resolves
to a real subcommand; one written with arguments also parses with them (options, choices, required
arguments), through click without running anything. Lines for ``eventlake adopt`` are skipped while
this branch has no such command (it is built on another branch).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from eventlake.cli import cli

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "migrating-from-segment-data-lakes.md"
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"`(eventlake [^`]+)`")


def command_lines(text: str) -> list[str]:
    """Each ``eventlake ...`` command of the guide, a quoted multi-line argument kept whole."""
    found: list[str] = []
    for block in FENCE.findall(text):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            if lines[i].lstrip().startswith("eventlake "):
                command = lines[i]
                while command.count('"') % 2 and i + 1 < len(lines):  # a quoted argument goes on
                    i += 1
                    command += "\n" + lines[i]
                found.append(command.strip())
            i += 1
    prose = FENCE.sub("", text)
    found += [m.group(1) for m in INLINE.finditer(prose)]
    return found


def test_the_guide_has_commands() -> None:
    lines = command_lines(GUIDE.read_text(encoding="utf-8"))
    assert len(lines) >= 15
    assert any(line.startswith("eventlake adopt --source web --dry-run") for line in lines)
    assert any(line.startswith('eventlake sql --engine duckdb "\nWITH sdl AS') for line in lines)


@pytest.mark.parametrize("line", command_lines(GUIDE.read_text(encoding="utf-8")))
def test_each_command_line_parses(line: str) -> None:
    words = shlex.split(line, comments=True)
    assert words[0] == "eventlake"
    command: click.Command = cli
    path = ["eventlake"]
    args = words[1:]
    while isinstance(command, click.Group) and args and not args[0].startswith("-"):
        if args[0] == "adopt" and "adopt" not in command.commands:
            pytest.skip("eventlake adopt is not on this branch")
        assert args[0] in command.commands, f"{' '.join(path)} has no subcommand {args[0]!r}: {line}"
        command = command.commands[args[0]]
        path.append(args.pop(0))
    assert "Usage:" in command.get_help(click.Context(command, info_name=" ".join(path)))
    if args:  # written with arguments: they must parse as the command's own
        context = command.make_context(" ".join(path), list(args))
        assert context.command is command

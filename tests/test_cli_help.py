"""Every ``li`` command has help text that documents its exit codes (house style 10)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lirun.cli.main import COMMANDS
from support.cli import li_command

# Commands with subcommands: each subcommand's help must document exit codes too.
SUBCOMMANDS = {
    "invoke": ("start", "end"),
    "db": ("path", "migrate"),
    "flow": ("run", "resume", "list", "clean"),
    "show": ("run", "resume", "abort", "status", "list", "clean"),
    "schedule": ("add", "list", "show", "enable", "disable", "delete", "apply", "runs", "fire"),
    "worker": ("status",),
    "team": ("create", "join", "list", "show", "send", "inbox", "log", "archive"),
}


def help_of(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        li_command(*args, "--help"), capture_output=True, text=True, timeout=60, stdin=None
    )


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_command_help_documents_exit_codes(command: str) -> None:
    result = help_of(command)
    assert result.returncode == 0, f"li {command} --help failed:\n{result.stderr}"
    assert "exit codes" in result.stdout.lower(), result.stdout
    assert result.stdout.startswith("usage: li "), result.stdout


@pytest.mark.parametrize(
    ("command", "sub"), [(c, s) for c, subs in sorted(SUBCOMMANDS.items()) for s in subs]
)
def test_subcommand_help(command: str, sub: str) -> None:
    result = help_of(command, sub)
    assert result.returncode == 0, result.stderr
    assert f"li {command} {sub}" in result.stdout


def test_top_level_help_lists_every_command() -> None:
    result = subprocess.run(li_command("--help"), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    for command, (_, helptext) in COMMANDS.items():
        assert f"  {command}" in result.stdout
        assert helptext in result.stdout


def test_a_sigint_while_li_is_still_importing_ends_it_with_130_and_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import types

    import lirun.cli

    class Interrupted(types.ModuleType):
        def __getattr__(self, name: str) -> object:
            if name == "main":
                raise KeyboardInterrupt  # as a SIGINT during the dispatcher's import would
            raise AttributeError(name)

    monkeypatch.setitem(sys.modules, "lirun.cli.main", Interrupted("lirun.cli.main"))
    assert lirun.cli.start() == 2
    assert capsys.readouterr().err == "li: interrupted while starting; nothing was started\n"

"""Every ``li`` command and subcommand has help text that documents its exit codes (house
style 10), and every usage error is one line and a hint, never argparse's usage block."""

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
    assert "exit codes:" in result.stdout, result.stdout  # each subcommand lists its own


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


def li_run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        li_command(*args), capture_output=True, text=True, timeout=60, stdin=None, env=env
    )


@pytest.mark.parametrize(
    "argv",
    [[c, "--no-such-option"] for c in sorted(COMMANDS) if c not in ("run", "agent")]
    + [[c, s, "--no-such-option"] for c, subs in sorted(SUBCOMMANDS.items()) for s in subs]
    + [["flow"], ["db"], ["show"], ["schedule", "add"]],
)
def test_a_usage_error_is_one_line_and_a_hint(argv: list[str]) -> None:
    result = li_run(*argv)
    assert result.returncode == 2, result.stderr
    assert "usage:" not in result.stderr
    first, hint = result.stderr.splitlines()
    prog = first.split(": error: ")[0]
    assert prog.startswith(f"li {argv[0]}"), first
    assert hint == f"try '{prog} --help'"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["stauts"], "li: error: unknown command 'stauts'; did you mean 'status'?"),
        (["flow", "rn"], "li flow: error: unknown command 'rn'; did you mean 'run'?"),
        (["schedule", "ad"], "li schedule: error: unknown command 'ad'; did you mean 'add'?"),
        (["db", "migrat"], "li db: error: unknown command 'migrat'; did you mean 'migrate'?"),
        (
            ["schedule", "add", "x", "--every", "1h", "--overlap", "skp", "--", "run", "true"],
            "li schedule add: error: argument --overlap: invalid choice 'skp'; "
            "did you mean 'skip'?",
        ),
    ],
)
def test_a_mistyped_command_gets_did_you_mean(argv: list[str], says: str) -> None:
    result = li_run(*argv)
    assert result.returncode == 2
    assert result.stderr.splitlines()[0].startswith(says), result.stderr
    assert len(result.stderr.splitlines()) == 2


@pytest.mark.parametrize(
    "argv",
    [
        ["agent", "claude", "hi", "--stall-timeout", "20x"],
        ["run", "--timeout", "5x", "--", "true"],
        ["wait", "some-id", "--timeout", "5x"],
        ["flow", "run", "f.yaml", "--timeout", "5x"],
    ],
)
def test_a_bad_duration_option_names_the_option_and_the_forms(argv: list[str]) -> None:
    result = li_run(*argv)
    assert result.returncode == 2
    option = argv[argv.index("5x" if "5x" in argv else "20x") - 1]
    assert f"argument {option}: " in result.stderr
    assert "is not a duration; give a number of seconds (90, 2.5) or 30s, 5m" in result.stderr
    assert len(result.stderr.splitlines()) == 2

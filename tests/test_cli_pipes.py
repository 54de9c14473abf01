"""Every ``li`` command whose output is closed early (``li schedule runs NAME | head -1``)
ends quietly: no BrokenPipeError traceback, no "Exception ignored" at exit; 141 (as a
shell reports a command the closed pipe stopped), or 0 where what was cut short was
only help (argparse drops a write that fails) or a table rich had already drawn."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from lirun.cli.main import COMMANDS
from support.cli import li_command
from support.showfilekit import COMMAND_SHOW, write_show
from test_cli_help import SUBCOMMANDS

QUIET_EXIT = 141


def closed_stdout(env: dict[str, str], *args: str, cwd: Path | None = None) -> tuple[int, str]:
    """Run ``li ARGS`` with its stdout a pipe nobody reads any more: (exit code, stderr)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before li writes its first byte
    try:
        result = subprocess.run(
            li_command(*args), env=env, cwd=cwd, stdin=subprocess.DEVNULL,
            stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120,
        )  # fmt: skip
    finally:
        os.close(write_end)
    return result.returncode, result.stderr


def assert_quiet(code: int, err: str) -> None:
    assert "Traceback" not in err, err
    assert "BrokenPipe" not in err, err
    assert "Exception ignored" not in err, err
    assert code in (0, QUIET_EXIT), (code, err)


@pytest.fixture
def env(lirun_home: Path, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "LIRUN_HOME": str(lirun_home), "LIRUN_DB_URL": str(tmp_path / "s.db")}


HELPS = [
    ("--help",),
    *[(c, "--help") for c in sorted(COMMANDS)],
    *[(c, s, "--help") for c, subs in sorted(SUBCOMMANDS.items()) for s in subs],
]


@pytest.mark.parametrize("args", HELPS, ids=" ".join)
def test_every_help_ends_quietly(env: dict[str, str], args: tuple[str, ...]) -> None:
    assert_quiet(*closed_stdout(env, *args))


def test_every_listing_and_plan_ends_quietly(env: dict[str, str], tmp_path: Path) -> None:
    def ok(*args: str) -> str:
        done = subprocess.run(li_command(*args), env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout

    ok("run", "--", "echo", "done")
    ok("schedule", "add", "tick", "--every", "1h", "--", "run", "true")
    ok("schedule", "fire", "tick")
    flow = tmp_path / "flow.yaml"
    flow.write_text("legs:\n  - id: a\n    run: echo 'hi there'\n")
    flow_id = ok("flow", "run", str(flow)).split("\t", 1)[0].strip()
    show = write_show(tmp_path, COMMAND_SHOW.format(topic="pipes"))
    for args in (
        ("--version",),
        ("status",),
        ("status", "--kind", "schedule_run"),
        ("status", "--json"),
        ("schedule", "list"),
        ("schedule", "show", "tick"),
        ("schedule", "runs", "tick"),
        ("schedule", "add", "tock", "--every", "1h", "--", "run", "true"),
        ("schedule", "disable", "tock"),
        ("worker", "status"),
        ("flow", "run", "--dry-run", str(flow)),
        ("flow", "list"),
        ("flow", "list", "--json"),
        ("logs", flow_id),
        ("flow", "clean", flow_id),
        ("show", "run", "--dry-run", str(show)),
        ("show", "list"),
        ("show", "status"),
        ("attention",),
        ("db", "path"),
    ):
        code, err = closed_stdout(env, *args)
        assert "Traceback" not in err, (args, err)
        assert "Exception ignored" not in err, (args, err)
        assert code in (0, QUIET_EXIT), (args, code, err)

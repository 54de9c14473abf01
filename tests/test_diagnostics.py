"""One diagnostics channel: the library only logs (named ``lirun.*`` loggers with
structured ``extra``); `li` installs the one handler that prints ``li: …`` lines, and
``-v`` / ``-q`` choose how much of it a person sees."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from lirun.cli.diagnostics import level_for, li_lines, line_for
from lirun.cli.main import GlobalOptions, main
from lirun.logs import get_logger
from support.cli import li_command


def test_each_level_reads_as_one_li_line() -> None:
    assert (
        line_for(logging.INFO, "the database at db is back") == "li: the database at db is back\n"
    )
    assert line_for(logging.WARNING, "x was empty") == "li: warning: x was empty\n"
    assert line_for(logging.ERROR, "spawn failed\ntraceback...") == "li: error: spawn failed\n"
    assert [level_for(v) for v in (-1, 0, 1, 2)] == [
        logging.WARNING,
        logging.INFO,
        logging.DEBUG,
        logging.DEBUG,
    ]


@pytest.mark.parametrize(
    ("argv", "db", "verbosity", "rest"),
    [
        (["wait", "x", "-v"], None, 0, ["wait", "x", "-v"]),  # after the command: its own
        (["-v", "--db", "u", "status"], "u", 1, ["status"]),
        (["--db=u", "-vv", "run", "--", "true"], "u", 2, ["run", "--", "true"]),
        (["--quiet", "--verbose", "db", "path"], None, 1, ["db", "path"]),
        (["-q", "--help"], None, -1, ["--help"]),
        (["--db"], None, 0, ["--db"]),  # no value: left for the usage error
    ],
)
def test_global_options_come_before_the_command(
    argv: list[str], db: str | None, verbosity: int, rest: list[str]
) -> None:
    options = GlobalOptions(argv)
    assert (options.db, options.verbosity, options.rest) == (db, verbosity, rest)


@pytest.mark.parametrize(
    ("verbosity", "shown"),
    [
        (-1, ["li: warning: w"]),
        (0, ["li: i", "li: warning: w"]),
        (1, ["li: d", "li: i", "li: warning: w"]),
    ],
)
def test_the_handler_shows_what_the_verbosity_asks_and_leaves_nothing_behind(
    verbosity: int, shown: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    log = get_logger("lirun.test_diagnostics")
    with li_lines(verbosity):
        log.debug("d")
        log.info("i")
        log.warning("w", extra={"event": "test.warned"})
    assert capsys.readouterr().err.splitlines() == shown
    log.warning("after")  # the block is over: no `li:` line any more
    assert "li: " not in capsys.readouterr().err
    assert not [h for h in logging.getLogger("lirun").handlers if type(h).__name__ == "LiHandler"]


def test_a_librarys_warning_in_the_queue_shows_as_one_line_without_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with li_lines(0):
        try:
            raise ConnectionError("server closed\nthe connection")
        except ConnectionError:
            logging.getLogger("procrastinate.worker").warning("job failed\nmore", exc_info=True)
        logging.getLogger("procrastinate.worker").info("chatter")
    err = capsys.readouterr().err
    assert err == "li: warning: job failed (ConnectionError: server closed)\n"


_LIBRARY_USER = """
import logging, sys
from lirun.store import open_store

seen = []
class Keep(logging.Handler):
    def emit(self, record):
        seen.append((record.name, record.levelname, record.event, record.db))
logging.getLogger("lirun").addHandler(Keep())
open_store(sys.argv[1]).close()
print(seen)
"""


def test_a_library_user_gets_lirun_warnings_through_logging(tmp_path: Path) -> None:
    """Nothing printed by lirun itself; the record carries its facts in ``extra``."""
    path = tmp_path / "state.db"
    path.write_bytes(b"")  # an empty file: set aside with a warning
    done = subprocess.run(
        [sys.executable, "-c", _LIBRARY_USER, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == str(
        [("lirun.store.dbfile", "WARNING", "db.empty_set_aside", str(path))]
    )
    assert done.stderr == ""  # a handler is configured: no last-resort line, no `li:`


def test_li_prints_the_librarys_warning_as_an_li_line_even_when_quiet(tmp_path: Path) -> None:
    for flags in ([], ["-q"]):
        path = tmp_path / f"state{len(flags)}.db"
        path.write_bytes(b"")
        done = subprocess.run(
            li_command(*flags, "--db", str(path), "db", "migrate"),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        [line] = [line for line in done.stderr.splitlines() if "was empty" in line]
        assert line.startswith(f"li: warning: {path} was empty"), done.stderr


def test_main_in_process_removes_its_handler(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--db", str(tmp_path / "s.db"), "db", "path"]) == 0
    capsys.readouterr()
    get_logger("lirun.test_diagnostics").warning("a library warning after li returned")
    assert "li: warning" not in capsys.readouterr().err

"""The fault suite's harness: seeded rounds, invariant checks, one summary line per kind.

``LIRUN_FAULT_ROUNDS`` rounds run per fault kind (CI: 20; default 3); ``LIRUN_FAULT_SEED``
fixes the random seed (else a fresh one, printed in the summary and in every failure).
A round that breaks an invariant does not stop its kind: every round runs, then the test
fails listing the bad rounds with the seed that reproduces them. The per-kind lines
(``<kind>: rounds=N ok=N lost=N lying=N overlap=N escaped=N hung=N traceback=N``) are
printed at the end of the session by ``pytest_terminal_summary``, so they show even with
``-q``. A kind that measures something (``Round.figure``) has its figures on its line
too, each as ``name=median/max`` over the rounds that measured it.

Loaded as a plugin by ``conftest.py``.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from lirun.lifecycle import EXIT_CODE_BY_STATUS, SESSION_TERMINAL_STATUSES

ROUNDS = max(1, int(os.environ.get("LIRUN_FAULT_ROUNDS") or 3))
SEED = int(os.environ.get("LIRUN_FAULT_SEED") or random.SystemRandom().randrange(10**9))
# Any single `li` command that takes longer than this is counted as hung.
COMMAND_TIMEOUT = 60.0
TRACEBACK = "Traceback (most recent call last)"
# Set on every `li run` of the suite and inherited by its child and grandchildren, so the
# processes a run started can be found after the fact (a grandchild has its own argv).
TAG_VAR = "LIRUN_FAULT_TAG"

RUN_EXIT_CODES = frozenset(EXIT_CODE_BY_STATUS.values()) | {2}
WAIT_EXIT_CODES = frozenset({0, 1, 2, 3})

# The summary line's counters, in order: a round counts once in each category it broke.
CATEGORIES = ("rounds", "ok", "lost", "lying", "overlap", "escaped", "hung", "traceback")
_SUMMARY: dict[str, dict[str, int]] = {}
_FIGURES: dict[str, str] = {}
_SUMMARY_LOCK = threading.Lock()


class Hung(AssertionError):
    """A command did not finish in time."""


class Lost(AssertionError):
    """The record and what a command said disagree, or an outcome never landed."""


class TracebackSeen(AssertionError):
    """A command printed a Python traceback."""


class Lying(AssertionError):
    """The record says something that did not happen (completed work it did not finish,
    a failure for work that finished, an exit code not that of the stored outcome)."""


class Overlap(AssertionError):
    """Two copies of one piece of work ran at the same instant (the ledger proves it)."""


class Escaped(AssertionError):
    """A process the work started outlived its owner and its record."""


@dataclass
class Done:
    """A finished `li` command: argv label, exit code, stdout, stderr, wall time."""

    label: str
    rc: int
    out: str
    err: str
    seconds: float


@dataclass
class Round:
    """One round of one fault kind: its random source and what went wrong in it."""

    kind: str
    index: int
    rng: random.Random
    workdir: Path
    problems: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    figures: dict[str, float] = field(default_factory=dict)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def figure(self, name: str, value: float) -> None:
        """A measure of this round, summed up over the rounds on the kind's line."""
        self.figures[name] = value

    def fail(self, category: str, text: str) -> None:
        self.problems.append((category, text))

    @property
    def tag(self) -> str:
        return f"{self.kind}-{SEED}-{self.index}"


# --- the harness ---------------------------------------------------------------------------


def run_rounds(
    kind: str,
    body: Callable[[Round], None],
    base: Path,
    *,
    rounds: int = ROUNDS,
    parallel: int = 1,
) -> None:
    """Run ``body`` ``rounds`` times (``parallel`` at once), record the summary, then fail
    the test if any round broke an invariant."""
    done: list[Round] = []

    def one(index: int) -> Round:
        workdir = base / f"{kind}-{index}"
        workdir.mkdir(parents=True)
        rnd = Round(kind, index, random.Random(f"{SEED}:{kind}:{index}"), workdir)
        try:
            body(rnd)
        except Hung as exc:
            rnd.fail("hung", str(exc))
        except TracebackSeen as exc:
            rnd.fail("traceback", str(exc))
        except Lying as exc:
            rnd.fail("lying", str(exc))
        except Overlap as exc:
            rnd.fail("overlap", str(exc))
        except Escaped as exc:
            rnd.fail("escaped", str(exc))
        except Lost as exc:
            rnd.fail("lost", str(exc))
        except AssertionError as exc:
            rnd.fail("lost", str(exc))
        except subprocess.TimeoutExpired as exc:
            rnd.fail("hung", f"{exc}")
        except Exception as exc:  # a harness error still counts, and names itself
            rnd.fail("lost", f"harness error {type(exc).__name__}: {exc}")
        finally:
            kill_tagged(rnd.tag)
        return rnd

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        done = list(pool.map(one, range(rounds)))
    counts = dict.fromkeys(CATEGORIES, 0)
    counts["rounds"] = len(done)
    for rnd in done:
        categories = {c for c, _ in rnd.problems}
        counts["ok"] += not categories
        for category in categories:
            counts[category] = counts.get(category, 0) + 1
    with _SUMMARY_LOCK:
        _SUMMARY[kind] = counts
        _FIGURES[kind] = figures_text(done)
    bad = [r for r in done if r.problems]
    if bad:
        lines = [
            f"{kind}: {len(bad)} of {len(done)} rounds broke an invariant (seed {SEED}; "
            f"rerun with LIRUN_FAULT_SEED={SEED} LIRUN_FAULT_ROUNDS={rounds})"
        ]
        for rnd in bad:
            lines.append(f"  round {rnd.index} [{'; '.join(rnd.notes)}]:")
            lines.extend(f"    {cat}: {text}" for cat, text in rnd.problems)
        pytest.fail("\n".join(lines), pytrace=False)


def summary_line(kind: str, counts: Mapping[str, int]) -> str:
    line = f"{kind}: " + " ".join(f"{name}={counts.get(name, 0)}" for name in CATEGORIES)
    return f"{line} {_FIGURES[kind]}" if _FIGURES.get(kind) else line


def figures_text(done: Iterable[Round]) -> str:
    """``name=median/max`` of each figure the rounds measured, with how many measured it."""
    values: dict[str, list[float]] = {}
    for rnd in done:
        for name, value in rnd.figures.items():
            values.setdefault(name, []).append(value)
    parts = []
    for name, seen in sorted(values.items()):
        seen.sort()
        middle = (seen[(len(seen) - 1) // 2] + seen[len(seen) // 2]) / 2
        parts.append(f"{name}={middle:g}/{seen[-1]:g}(n={len(seen)})")
    return " ".join(parts)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _SUMMARY:
        return
    terminalreporter.section("lirun fault suite")
    terminalreporter.write_line(f"seed={SEED} rounds_per_kind={ROUNDS} (LIRUN_FAULT_SEED)")
    for kind in sorted(_SUMMARY):
        terminalreporter.write_line(summary_line(kind, _SUMMARY[kind]))


# --- processes -----------------------------------------------------------------------------


def li_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "lirun", *args]


def fault_env(home: Path, db_url: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    for var in ("LIRUN_RUN_ID", "LIONAGI_RUN_ID", "PYTHONUNBUFFERED"):
        env.pop(var, None)
    env.update({"LIRUN_HOME": str(home), "LIRUN_DB_URL": db_url, **extra})
    return env


def start(rnd: Round, *args: str, env: Mapping[str, str], tagged: bool = False) -> Any:
    """A background `li` (stdio on pipes), started at a known monotonic time."""
    env = dict(env)
    if tagged:
        env[TAG_VAR] = rnd.tag
    proc = subprocess.Popen(
        li_argv(*args),
        env=env,
        cwd=rnd.workdir,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc.started_at = time.monotonic()  # type: ignore[attr-defined]
    return proc


def finish(
    proc: Any, label: str, *, timeout: float = COMMAND_TIMEOUT, allow_traceback: bool = False
) -> Done:
    """Collect a background `li`; Hung if it does not end in ``timeout``."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise Hung(f"{label} still running after {timeout:.0f}s; stderr: {tail(err)}") from None
    done = Done(label, proc.returncode, out, err, time.monotonic() - proc.started_at)
    if not allow_traceback:
        no_traceback(done)
    return done


def li(rnd: Round, *args: str, env: Mapping[str, str], timeout: float = COMMAND_TIMEOUT) -> Done:
    """Run one `li` command to its end (no traceback allowed)."""
    return finish(start(rnd, *args, env=env), "li " + " ".join(args[:2]), timeout=timeout)


def no_traceback(done: Done) -> None:
    if TRACEBACK in done.err or TRACEBACK in done.out:
        raise TracebackSeen(f"{done.label} (exit {done.rc}) printed a traceback: {tail(done.err)}")


def traceback_before_lirun(done: Done) -> bool:
    """A traceback raised before any of lirun's code ran (a signal while the interpreter
    was still starting: no handler of lirun's can be installed yet)."""
    frames = [line for line in done.err.splitlines() if line.strip().startswith("File ")]
    return TRACEBACK in done.err and not any("/lirun/" in frame for frame in frames)


def tail(text: str, lines: int = 6) -> str:
    return " | ".join(text.strip().splitlines()[-lines:])


def tagged_processes(tag: str) -> list[psutil.Process]:
    """Live processes (not zombies) that carry this round's tag in their environment."""
    found = []
    needle = f"{TAG_VAR}={tag}".encode()
    for proc in psutil.process_iter():
        try:
            with open(f"/proc/{proc.pid}/environ", "rb") as handle:
                if needle not in handle.read().split(b"\0"):
                    continue
            if proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (OSError, psutil.Error):
            continue
    return found


def tagged_named(tag: str, name: str) -> list[psutil.Process]:
    """The tagged processes called ``name``; one that exits while it is looked at (a
    shell or guard between fork and exec) is not one of them."""
    found = []
    for proc in tagged_processes(tag):
        try:
            if proc.name() == name:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def describe(procs: Iterable[psutil.Process]) -> str:
    parts = []
    for proc in procs:
        try:
            parts.append(f"{proc.pid}:{' '.join(proc.cmdline())}")
        except psutil.Error:
            parts.append(str(proc.pid))
    return ", ".join(parts)


def kill_tagged(tag: str) -> None:
    """Clean up whatever a round left behind (the check itself is elsewhere)."""
    for proc in tagged_processes(tag):
        with contextlib.suppress(psutil.Error):
            proc.send_signal(signal.SIGKILL)


def leftover_processes(tag: str, grace: float = 1.0) -> list[psutil.Process]:
    """Processes of the run still alive ``grace`` seconds after its `li` ended."""
    deadline = time.monotonic() + grace
    while True:
        left = tagged_processes(tag)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


# --- the record ----------------------------------------------------------------------------


def read_row(db_url: str, run_id: str) -> dict[str, Any] | None:
    """The row as the database holds it, read with a fresh read-only connection (None when
    there is no row, or no database yet: reading must not create one)."""
    from lirun.errors import DatabaseMissingError, DatabaseUnavailableError
    from lirun.store import open_store

    try:
        store = open_store(db_url, readonly=True)
    except DatabaseMissingError:
        return None
    except DatabaseUnavailableError:
        # A database whose creation a SIGKILL cut short (schema older than the code): a
        # writing open finishes the migration, as any writing li command would.
        store = open_store(db_url)
    try:
        return store.get_entity("session", run_id)
    finally:
        store.close()


def wait_fields(line: str) -> dict[str, str]:
    first, *pairs = line.split("\t")
    return {"id": first, **dict(p.split("=", 1) for p in pairs if "=" in p)}


def row_fields(row: Mapping[str, Any]) -> dict[str, str]:
    """The wait line's fields as the row says they must be (design.md D6)."""
    code = row.get("exit_code")
    return {
        "id": str(row["id"]),
        "status": str(row["status"]),
        "reason": str(row.get("status_reason_code") or "unknown"),
        "exit_code": "-" if code is None else str(int(code)),
    }


def check_wait_matches(done: Done, db_url: str, run_id: str) -> dict[str, Any] | None:
    """`li wait RUN_ID` printed exactly what the database holds, with the documented code.

    Returns the row (None when there is none, which `li wait` must report with exit 2).
    """
    if done.rc not in WAIT_EXIT_CODES:
        raise Lost(f"li wait exited {done.rc}, not one of 0,1,2,3; stderr: {tail(done.err)}")
    if done.rc == 3:
        raise Hung(f"li wait gave up (exit 3) on a run whose owner is gone: {tail(done.err)}")
    row = read_row(db_url, run_id)
    lines = [line for line in done.out.splitlines() if line.strip()]
    if row is None:
        if done.rc != 2 or lines:
            raise Lost(f"no row {run_id}, yet li wait exited {done.rc} printing {lines}")
        return None
    if len(lines) != 1:
        raise Lost(
            f"li wait exited {done.rc} printing {len(lines)} lines for one id: {lines}; "
            f"{tail(done.err)}"
        )
    printed = {k: v for k, v in wait_fields(lines[0]).items() if k != "artifact_dir"}
    stored = row_fields(row)
    if printed != stored:
        raise Lost(f"li wait printed {printed} but the database holds {stored}")
    if row["status"] not in SESSION_TERMINAL_STATUSES:
        raise Lost(f"li wait printed a line while the row is still {row['status']}")
    expected_rc = 0 if row["status"] == "completed" else 1
    if done.rc != expected_rc:
        raise Lost(f"li wait exited {done.rc} for status {row['status']} (want {expected_rc})")
    return row


def check_run_exit(done: Done, row: Mapping[str, Any] | None) -> None:
    """`li run`'s exit code is EXIT_CODE_BY_STATUS of the stored status, or 2 with no row."""
    if row is None:
        if done.rc != 2:
            raise Lost(f"{done.label} exited {done.rc} but no row was written")
        return
    if row["status"] not in SESSION_TERMINAL_STATUSES:
        raise Lost(f"{done.label} exited {done.rc} while the row is still {row['status']}")
    want = EXIT_CODE_BY_STATUS[row["status"]]
    if done.rc != want:
        raise Lost(
            f"{done.label} exited {done.rc} but the row says {row['status']} "
            f"({row.get('status_reason_code')}), whose exit code is {want}"
        )


def check_not_running_after_reap(
    rnd: Round, env: Mapping[str, str], db_url: str, run_id: str
) -> None:
    """Once its owner is gone, `li reap` leaves no row of this run `running`."""
    reap = li(rnd, "reap", env=env)
    if reap.rc not in (0, 2):
        raise Lost(f"li reap exited {reap.rc}: {tail(reap.err)}")
    row = read_row(db_url, run_id)
    if row is not None and row["status"] == "running":
        raise Lost(f"row {run_id} is still running after its owner died and li reap ran")


def new_run_id(rnd: Round) -> str:
    return f"f{rnd.index}-{uuid.uuid4().hex[:10]}"


def hold_lock(db_url: str, seconds: float) -> subprocess.Popen[str]:
    """Another process takes the write lock and holds it ``seconds`` (returns once held);
    ``release`` ends it sooner.

    SQLite: ``BEGIN IMMEDIATE`` with a pending write; PostgreSQL: ``LOCK TABLE sessions IN
    EXCLUSIVE MODE`` (every writer of sessions waits, readers do not).
    """
    from lirun.store import is_postgres_url

    if is_postgres_url(db_url):
        code = (
            "import select, sys, psycopg\n"
            "from lirun.store.postgres import split_schema\n"
            "conninfo, schema = split_schema(sys.argv[1])\n"
            "conn = psycopg.connect(conninfo, options=f'-c search_path={schema}')\n"
            "conn.execute('LOCK TABLE sessions IN EXCLUSIVE MODE')\n"
            "print('locked', flush=True)\n"
            "select.select([sys.stdin], [], [], float(sys.argv[2]))\n"
            "conn.rollback()\n"
        )
    else:
        code = (
            "import select, sqlite3, sys\n"
            "conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=60)\n"
            "conn.execute('BEGIN IMMEDIATE')\n"
            "conn.execute('UPDATE sessions SET updated_at = updated_at')\n"
            "print('locked', flush=True)\n"
            "select.select([sys.stdin], [], [], float(sys.argv[2]))\n"
            "conn.execute('ROLLBACK')\n"
        )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, db_url, str(seconds)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    if holder.stdout.readline().strip() != "locked":
        holder.kill()
        raise AssertionError("the lock holder could not take the lock")
    holder.locked_at = time.monotonic()  # type: ignore[attr-defined]
    return holder


def release(holder: subprocess.Popen[str]) -> None:
    """End a lock holder now (closing its stdin wakes it) and reap it."""
    if holder.stdin is not None and not holder.stdin.closed:
        holder.stdin.close()
    holder.wait(timeout=30)


def migrate(db_url: str) -> None:
    """Create the schema up front (in this process: cheaper than a `li db migrate`), so a
    lock holder has a table to lock."""
    from lirun.store import open_store

    open_store(db_url).close()


def poll_row(db_url: str, run_id: str, status: str = "running", timeout: float = 20.0) -> bool:
    """True once the row exists in ``status``; False after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            row = read_row(db_url, run_id)
        except Exception:
            row = None
        if row is not None and row["status"] == status:
            return True
        time.sleep(0.05)
    return False

"""``--detach``: hand the execution to a background ``li`` and return once its row exists.

The parent has already checked everything that can fail before a row exists; it
allocates the run (so the worker's stdio can go to the run's log files), starts
``python -m lirun <command> --detached-worker --run-id ID ...`` in a new session, and
waits until the worker has created the execution row. Then the id is all the caller
needs: ``li wait ID`` reports how it ended.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from lirun.errors import LirunError
from lirun.record.rundir import RunDir
from lirun.settings import LI_ENV, li_path
from lirun.store import Store

__all__ = [
    "DETACHED_WORKER_FLAG",
    "DetachError",
    "detached_env",
    "log_paths",
    "spawn_detached",
    "spawn_worker",
    "wait_for_entity",
    "wait_for_row",
]

DETACHED_WORKER_FLAG = "--detached-worker"
ROW_WAIT_SECONDS = 60.0


class DetachError(LirunError, RuntimeError):
    """The background ``li`` did not create its execution row; its log says why."""

    exit_code = 2


def log_paths(run: RunDir) -> tuple[Path, Path]:
    """Where the detached worker's own stdout and stderr go."""
    return run.state_root / "li.stdout.log", run.state_root / "li.stderr.log"


def spawn_worker(
    command: str,
    argv: Sequence[str],
    run: RunDir,
    *,
    env: Mapping[str, str] | None = None,
    stdin_text: str | None = None,
) -> subprocess.Popen[bytes]:
    """Start the worker in its own session with stdio in the run's logs.

    Its stdin is ``stdin_text`` (the prompt: an argument would show it to every user in
    ``ps``), else closed.
    """
    worker = [sys.executable, "-m", "lirun", command, DETACHED_WORKER_FLAG, "--run-id", run.run_id]
    return spawn_detached([*worker, *argv], *log_paths(run), env=env, stdin_text=stdin_text)


def spawn_detached(
    argv: Sequence[str],
    out_path: Path,
    err_path: Path,
    *,
    env: Mapping[str, str] | None = None,
    stdin_text: str | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own session, stdout and stderr appended to private log files
    (for a background ``li`` that owns something other than one run, such as a show)."""
    # 0600 whatever the umask: the logs may hold the run's output.
    with _private_log(out_path) as out, _private_log(err_path) as err:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL if stdin_text is None else subprocess.PIPE,
            stdout=out,
            stderr=err,
            start_new_session=True,
            close_fds=True,
            env=dict(env) if env is not None else None,
        )
    if stdin_text is not None and proc.stdin is not None:
        # A worker that died before reading says why in its log (wait_for_row reports it).
        with contextlib.suppress(BrokenPipeError), proc.stdin:
            proc.stdin.write(stdin_text.encode())
    return proc


def _private_log(path: Path) -> IO[bytes]:
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab")


def _log_tail(path: Path, limit: int = 2000) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-limit:].strip()
    except OSError:
        return ""


def wait_for_row(
    store: Store,
    run: RunDir,
    proc: subprocess.Popen[bytes],
    *,
    timeout: float = ROW_WAIT_SECONDS,
    interval: float = 0.02,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    entity_type: str = "session",
) -> None:
    """Return once the row exists (a session, or the ``entity_type`` row a flow's worker
    creates under the run's id); DetachError if the worker exits first or takes too long."""
    wait_for_entity(
        store,
        entity_type,
        run.run_id,
        proc,
        err_log=log_paths(run)[1],
        timeout=timeout,
        interval=interval,
        sleep=sleep,
        clock=clock,
    )


def wait_for_entity(
    store: Store,
    entity_type: str,
    entity_id: str,
    proc: subprocess.Popen[bytes],
    *,
    err_log: Path,
    timeout: float = ROW_WAIT_SECONDS,
    interval: float = 0.02,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Return once the worker created the ``entity_type`` row ``entity_id``; DetachError
    (its log's last words) if the worker exits first or takes longer than ``timeout``."""
    label = "run" if entity_type == "session" else entity_type
    row_name = "execution row" if entity_type == "session" else f"{entity_type} row"
    deadline = clock() + timeout
    while store.get_entity(entity_type, entity_id) is None:
        code = proc.poll()
        if code is not None:
            # The worker may have created the row just before exiting.
            if store.get_entity(entity_type, entity_id) is not None:
                return
            detail = _log_tail(err_log) or f"it exited with code {code}"
            raise DetachError(f"the background li for {label} {entity_id} failed: {detail}")
        if clock() >= deadline:
            raise DetachError(
                f"no {row_name} for {label} {entity_id} after {timeout:.0f}s; the background "
                f"li (pid {proc.pid}) is still running, see {err_log}"
            )
        sleep(interval)


def detached_env(db_url: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """The worker's environment: ours, unbuffered so its logs are current.

    The database (``db_url``, a ``--db`` given to the command) goes in ``LIRUN_DB_URL``,
    never in the worker's arguments: those are readable by every user in ``ps`` for as
    long as the worker runs, and a PostgreSQL URL may hold a password. A process's
    environment is readable only by its own user and root.

    The worker runs as ``python -m lirun``; ``LIRUN_LI`` tells it which `li` started it,
    so the children it starts get that one (``settings.li_path``).
    """
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    li = li_path()
    if li is not None:
        env[LI_ENV] = li
    if db_url is not None:
        env["LIRUN_DB_URL"] = os.fspath(db_url)
    return env

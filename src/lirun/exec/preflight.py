"""Checks that must pass before an execution creates anything (exit 2, no row, no run dir).

They read the database (the branch to resume, the invocation, an explicit run id) but
never write: a refused execution leaves no trace.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from shutil import which
from typing import Any

from lirun.errors import ConflictError, NotFoundError, UsageError
from lirun.liveness import START_TIME_TOLERANCE, host_name, process_start_time
from lirun.paths import runs_root
from lirun.record.rundir import safe_component
from lirun.store import Store

__all__ = ["Resume", "check_run_id_free", "preflight", "resolve_resume"]


@dataclass(frozen=True, slots=True)
class Resume:
    """The conversation an execution continues: its branch and the last execution in it."""

    branch_id: str
    resumed_from: str | None
    engine_session_uid: str | None


def resolve_resume(store: Store, target: str, provider: str) -> Resume:
    """The branch ``target`` names (a branch id, or an execution id that belongs to one)."""
    branch = store.sessions.get_branch(target)
    if branch is None:
        row = store.sessions.get(target)
        if row is not None and row.branch_id:
            branch = store.sessions.get_branch(row.branch_id)
    if branch is None:
        raise NotFoundError(
            f"--resume {target!r}: no such branch or execution; `li status` lists recent runs"
        )
    if branch.provider and branch.provider != provider:
        raise UsageError(
            f"--resume {target!r}: branch {branch.id} belongs to {branch.provider}, not {provider}"
        )
    last = branch.last_session_id
    if last:
        previous = store.sessions.get(last)
        if previous is not None and previous.status == "running":
            raise ConflictError(
                f"--resume {target!r}: its last execution {last} is still running; "
                f"wait for it first (li wait {last})"
            )
    return Resume(branch.id, last, branch.engine_session_uid)


def _live_owner(manifest: dict[str, Any]) -> int | None:
    """The pid of the process that wrote ``run.json`` if it still runs (this host only)."""

    pid = manifest.get("owner_pid")
    if not isinstance(pid, int) or manifest.get("owner_host") not in (None, host_name()):
        return pid if isinstance(pid, int) else None  # another host: cannot tell, assume alive
    started = process_start_time(pid)
    recorded = manifest.get("owner_start_time")
    if started is None:
        return None
    if isinstance(recorded, (int, float)) and abs(recorded - started) > START_TIME_TOLERANCE:
        return None  # the pid now belongs to another process
    return pid


def _produced_output(directory: Path) -> bool:
    stream = directory / "stream"
    try:
        return any(entry.stat().st_size > 0 for entry in stream.iterdir())
    except OSError:
        return False


def abandoned_run_dir(run_id: str) -> str | None:
    """Why the run directory of ``run_id`` (which has no row) cannot be reused, or None.

    ``li`` killed before it created the row leaves ``run.json`` and nothing else: no child
    ran. Such a directory is reused once its writer is gone. One with output may belong to
    a run recorded in another database, and a live writer may still be setting up.
    """
    directory = runs_root() / run_id
    try:
        manifest = json.loads((directory / "run.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        manifest = {}
    if not isinstance(manifest, dict):
        manifest = {}
    owner = _live_owner(manifest)
    if owner is not None:
        return f"the li that created it (pid {owner}) is still running"
    if _produced_output(directory):
        return "it holds a run's output but no record in this database (another database?)"
    return None


def check_run_id_free(store: Store, run_id: str) -> None:
    """An explicit id must be new: reusing one would overwrite another run's files.

    A run directory with no row, no live writer and no output (``li`` was killed before
    the row existed) does not block the id.
    """
    if store.sessions.get(run_id) is not None:
        raise ConflictError(f"run id {run_id!r} is already used; pick another or omit --run-id")
    why = abandoned_run_dir(run_id)
    if why is not None:
        raise ConflictError(
            f"run id {run_id!r} already has a run directory ({runs_root() / run_id}) and {why}; "
            "pick another id, or move that directory away if it is no longer needed"
        )


def preflight(
    store: Store,
    *,
    cwd: str,
    run_id: str | None,
    invocation_id: str | None,
    resume_branch: str | None,
    provider: str,
) -> Resume | None:
    """Checks with no side effect; each failure is a LirunError with exit code 2.
    ``run_id``: the run's id as its settings decided it (``prepare``), if any.

    Returns the conversation to continue when ``resume_branch`` is given.
    """
    if not os.path.isdir(cwd):
        raise UsageError(f"--cwd {cwd!r} is not a directory; create it or fix the path")
    if run_id is not None:
        check_run_id_free(store, safe_component(run_id, "run id"))
    if invocation_id is not None and store.invocations.get(invocation_id) is None:
        raise NotFoundError(
            f"--invocation {invocation_id!r}: no such invocation; start one with `li invoke start`"
        )
    if resume_branch is None:
        return None
    return resolve_resume(store, resume_branch, provider)


def check_command(command: list[str], cwd: str) -> None:
    """The command must exist before anything is created (exit 2, no row)."""
    if not command:
        raise UsageError("no command given; usage: li run [options] [--] CMD [ARGS...]")
    name = command[0]
    if os.sep in name:
        path = os.path.join(cwd, os.path.expanduser(name))
        if not os.path.isfile(path) or not os.access(path, os.X_OK):
            where = "" if os.path.isabs(name) else f" (relative to {cwd})"
            raise UsageError(f"command {name!r} is not an executable file{where}")
    elif which(name) is None:
        raise UsageError(f"command {name!r} not found on PATH; check the name or give its path")

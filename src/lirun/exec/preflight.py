"""Checks that must pass before an execution creates anything (exit 2, no row, no run dir).

They read the database (the branch to resume, the invocation, an explicit run id) but
never write: a refused execution leaves no trace.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from lirun.errors import ConflictError, NotFoundError, UsageError
from lirun.paths import runs_root
from lirun.rundir import RUN_ID_ENV_VARS, safe_component
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
    branch = store.get_branch(target)
    if branch is None:
        row = store.get_entity("session", target)
        if row is not None and row.get("branch_id"):
            branch = store.get_branch(str(row["branch_id"]))
    if branch is None:
        raise NotFoundError(
            f"--resume {target!r}: no such branch or execution; `li status` lists recent runs"
        )
    if branch.get("provider") and branch["provider"] != provider:
        raise UsageError(
            f"--resume {target!r}: branch {branch['id']} belongs to {branch['provider']}, "
            f"not {provider}"
        )
    last = branch.get("last_session_id")
    if last:
        previous = store.get_entity("session", str(last))
        if previous is not None and previous.get("status") == "running":
            raise ConflictError(
                f"--resume {target!r}: its last execution {last} is still running; "
                f"wait for it first (li wait {last})"
            )
    return Resume(str(branch["id"]), last, branch.get("engine_session_uid"))


def check_run_id_free(store: Store, run_id: str) -> None:
    """An explicit id must be new: reusing one would overwrite another run's files."""
    if store.get_entity("session", run_id) is not None:
        raise ConflictError(f"run id {run_id!r} is already used; pick another or omit --run-id")
    if (runs_root() / run_id / "run.json").exists():
        raise ConflictError(
            f"run id {run_id!r} already has a run directory ({runs_root() / run_id}); "
            "pick another id"
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

    Returns the conversation to continue when ``resume_branch`` is given.
    """
    if not os.path.isdir(cwd):
        raise UsageError(f"--cwd {cwd!r} is not a directory; create it or fix the path")
    run_id = run_id or next(filter(None, map(os.environ.get, RUN_ID_ENV_VARS)), None)
    if run_id is not None:
        check_run_id_free(store, safe_component(run_id, "run id"))
    if invocation_id is not None and store.get_entity("invocation", invocation_id) is None:
        raise NotFoundError(
            f"--invocation {invocation_id!r}: no such invocation; start one with `li invoke start`"
        )
    if resume_branch is None:
        return None
    return resolve_resume(store, resume_branch, provider)

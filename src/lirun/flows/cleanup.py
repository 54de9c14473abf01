"""``li flow clean``: remove what an ended flow's worktree legs left in git.

Agent legs that ran side by side got worktrees under ``<home>/worktrees/<invocation>/``
on branches ``lirun/flow/<invocation>/<leg>``, and their leftover work was committed
there at the end of each leg. The clean removes worktrees with nothing uncommitted and
branches whose commits another branch holds (a person merged them, or the leg changed
nothing); unmerged work stays unless ``force`` (``exec.leftovers`` decides). A flow
still running is refused; one whose owner died is reaped first, as ``li flow resume``
does.
"""

from __future__ import annotations

from collections.abc import Mapping

from lirun.errors import ConflictError, UsageError
from lirun.exec.leftovers import CleanReport, gather, repo_of, sweep
from lirun.exec.worktrees import worktrees_root
from lirun.record.reap_flows import reap_flow_if_orphaned
from lirun.store import open_existing
from lirun.store.rows import InvocationRow, SessionRow

__all__ = ["clean_flow", "leftover_flows", "leg_branch_prefix"]


def leg_branch_prefix(invocation_id: str) -> str:
    """Every worktree leg of the invocation has its branch under this prefix."""
    return f"lirun/flow/{invocation_id}/"


def _repo_path(row: InvocationRow, sessions: list[SessionRow]) -> str | None:
    """The repository the legs branched from: the flow's cwd, else a leg's cwd."""
    flow = row.flow_json or {}
    spec = flow.get("spec") or {} if isinstance(flow, Mapping) else {}
    candidates = [spec.get("cwd")] if isinstance(spec, Mapping) else []
    candidates += [s.cwd for s in sessions]
    for path in candidates:
        if isinstance(path, str) and path and repo_of(path) is not None:
            return path
    return None


def clean_flow(invocation: str, *, db_url: str | None = None, force: bool = False) -> CleanReport:
    """Clean what the flow ``invocation`` (id or unique prefix) left in git.
    ConflictError (exit 2) while it runs; UsageError for an invocation that is not a flow
    or whose repository is gone."""
    store = open_existing(db_url, f"invocation with id {invocation!r}")
    try:
        inv_id = store.resolve_id("invocation", invocation)
        row = store.invocations.get(inv_id)
        if row is None or row.kind != "flow":
            raise UsageError(f"invocation {inv_id} is not a flow; only flows have leg worktrees")
        if row.status == "running" and not reap_flow_if_orphaned(store, inv_id):
            raise ConflictError(
                f"flow {inv_id} is still running (its owner process is alive); wait for it "
                f"(`li wait {inv_id}`) or stop it, then clean it"
            )
        sessions = store.waits.invocation_sessions(inv_id)
    finally:
        store.close()
    root = worktrees_root() / inv_id
    where = _repo_path(row, sessions)
    repo = repo_of(where) if where else None
    if repo is None:
        if root.exists():
            raise UsageError(f"flow {inv_id}'s repository is gone; remove {root} by hand")
        return CleanReport("flow", inv_id, None, (), ("it ran no leg in a worktree",))
    branches = repo.branches(leg_branch_prefix(inv_id))
    trees, facts = gather(repo, root, branches)
    items = sweep(repo, root, trees, facts, force=force)
    notes = () if items else ("it left no worktree and no branch",)
    return CleanReport("flow", inv_id, repo.path, tuple(items), notes)


def leftover_flows(cwd: str) -> list[str]:
    """The invocations whose leg branches are still in the repository at ``cwd`` (oldest
    first): they never stop a new flow (its branches are named by its own new id), but a
    dry run says they are there and what cleans them."""
    repo = repo_of(cwd)
    if repo is None:
        return []
    found = {name.split("/")[2] for name in repo.branches("lirun/flow/") if name.count("/") >= 3}
    return sorted(found)

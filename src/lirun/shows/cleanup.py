"""``li show clean``: remove what an ended show left in git, keep unmerged work.

A show that ended (completed or aborted) may leave play worktrees (kept for a person),
the gate worktree, and attempt branches ``<integration>--<play>-a<N>``. The clean
removes worktrees with nothing uncommitted and branches whose work another branch holds
or a later merged attempt replaced; the rest stays unless ``force`` (``exec.leftovers``
decides). The integration branch is the show's result and is never touched. An active
show is refused: it is still running, or waiting for a person to look at its worktrees.
"""

from __future__ import annotations

from lirun.errors import ConflictError, UsageError
from lirun.exec.leftovers import CleanReport, gather, repo_of, sweep
from lirun.exec.worktrees import worktrees_root
from lirun.shows.engine import find_show, owner_alive
from lirun.store import open_existing
from lirun.store.rows import PlayRow

__all__ = ["clean_show"]


def _attempt_of(branch: str, integration: str) -> tuple[str, int] | None:
    """(play, attempt) of ``<integration>--<play>-a<N>``, or None for another name."""
    rest = branch[len(integration) + 2 :]
    play, sep, number = rest.rpartition("-a")
    if not branch.startswith(f"{integration}--") or not sep or not number.isdigit():
        return None
    return play, int(number)


def _superseded(branches: dict[str, str], plays: list[PlayRow], integration: str) -> dict[str, str]:
    """Attempt branch → the later attempt of a merged play that replaced it."""
    merged = {p.name: p for p in plays if p.status == "merged"}
    out: dict[str, str] = {}
    for name in branches:
        found = _attempt_of(name, integration)
        if found is None or found[0] not in merged:
            continue
        last = int(merged[found[0]].attempt or 0)
        if found[1] < last:
            out[name] = f"a{last}"
    return out


def clean_show(show: str, *, db_url: str | None = None, force: bool = False) -> CleanReport:
    """Clean what the ended ``show`` (id, prefix, or topic) left in git. ConflictError
    (exit 2) for an active show; UsageError when its repository is gone."""
    store = open_existing(db_url, f"show with id {show!r}")
    try:
        row = find_show(store, show)
        plays = store.shows.list_plays(row.id)
    finally:
        store.close()
    show_id, integration = row.id, str(row.integration)
    if row.status == "active":
        raise ConflictError(
            f"show {show_id} is still active (running, or waiting for a person to look at "
            f"its worktrees); finish it with `li show resume {show_id}` or end it with "
            f"`li show abort {show_id}`, then clean it"
        )
    if owner_alive(row):
        raise ConflictError(
            f"show {show_id} is {row.status} but pid {row.owner_pid} still stops "
            "its plays; clean it once that process ended"
        )
    repo = repo_of(row.repo or "")
    if repo is None:
        raise UsageError(f"show {show_id}'s repository {row.repo} is not a git repository")
    names = {p.name for p in plays}
    branches = {
        name: sha
        for name, sha in repo.branches(f"{integration}--").items()
        if (found := _attempt_of(name, integration)) is not None and found[0] in names
    }
    root = worktrees_root() / show_id
    trees, facts = gather(repo, root, branches, _superseded(branches, plays, integration))
    items = sweep(repo, root, trees, facts, force=force)
    note = f"integration branch {integration} is the show's result: a clean never touches it"
    return CleanReport("show", show_id, repo.path, tuple(items), (note,))

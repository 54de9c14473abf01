"""What a run did, in a few words: "reply, 1 commit (abc1234), 3 files changed", "reply
only", "2 artifacts", "no change".

Pure: a record's evidence list and artifact verification in, a ``Work`` out. The
completion gate's summary, ``li status ID`` (its ``evidence:`` line), ``li status
--json`` (``work``) and the dashboard's run page all say it with :func:`describe_work`,
so they never disagree. It reads the kinds the teardown records (docs/outcome.md): the
reply (``assistant_output``, or ``agent_activity`` of an empty run), what the cwd's
comparison saw (``git`` / ``cwd``: commits since the start and their first ids, files
changed) and the artifacts produced.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["MAX_IDS_SHOWN", "Work", "describe_work"]

MAX_IDS_SHOWN = 3


@dataclass(frozen=True, slots=True)
class Work:
    """``commits`` / ``files_changed`` / ``tree_changed``: None when not known (the cwd
    not checked, a directory outside git, a record from before they were counted);
    ``checked``: the cwd was compared with the start; ``summary``: the few words."""

    reply: bool
    checked: bool
    commits: int | None
    commit_ids: tuple[str, ...]
    files_changed: int | None
    tree_changed: bool | None
    artifacts: int
    summary: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "reply": self.reply,
            "checked": self.checked,
            "commits": self.commits,
            "commit_ids": list(self.commit_ids),
            "files_changed": self.files_changed,
            "tree_changed": self.tree_changed,
            "artifacts": self.artifacts,
        }


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _commits_text(count: int, ids: tuple[str, ...]) -> str:
    shown = ids[:MAX_IDS_SHOWN]
    if not shown:
        return _plural(count, "commit")
    more = count - len(shown)
    listed = ", ".join(shown) + (f", +{more} more" if more > 0 else "")
    return f"{_plural(count, 'commit')} ({listed})"


def _produced(verification: object) -> int:
    if not isinstance(verification, Mapping):
        return 0
    produced = verification.get("produced")
    return len(produced) if isinstance(produced, list) else 0


def _summary(work: Work, seen: Mapping[str, Any]) -> str:
    scope = seen.get("kind")
    parts = ["reply"] if work.reply else []
    if work.commits:
        parts.append(_commits_text(work.commits, work.commit_ids))
    if work.files_changed:
        parts.append(f"{_plural(work.files_changed, 'file')} changed")
    elif work.tree_changed:
        parts.append("files changed" if scope == "cwd" else "working tree changed")
    if work.artifacts:
        parts.append(_plural(work.artifacts, "artifact"))
    if parts == ["reply"]:
        return "reply only"
    if parts:
        return ", ".join(parts)
    if not work.checked:
        return "none recorded"
    # a capped fingerprint that could not tell (docs/outcome.md §1)
    return "change unknown" if "changed" in seen and seen["changed"] is None else "no change"


def describe_work(evidence: object, verification: object = None) -> Work:
    """The work a record's evidence (a list of entries) and artifact verification show."""
    entries = [e for e in evidence if isinstance(e, Mapping)] if isinstance(evidence, list) else []
    reply = any(
        e.get("kind") == "assistant_output"
        or (e.get("kind") == "agent_activity" and e.get("reply"))
        for e in entries
    )
    cwd = next((e for e in entries if e.get("kind") in ("git", "cwd")), None)
    seen: Mapping[str, Any] = cwd or {}
    ids = seen.get("commit_ids")
    # Without a start snapshot (the ADR's rule) the entry says only whether the tree is dirty.
    tree = seen.get("tree_changed") if "tree_changed" in seen else seen.get("dirty")
    work = Work(
        reply=reply,
        checked=cwd is not None,
        commits=_count(seen.get("commits_since_start")),
        commit_ids=tuple(str(i) for i in ids) if isinstance(ids, list) else (),
        files_changed=_count(seen.get("files_changed")),
        tree_changed=tree if isinstance(tree, bool) else None,
        artifacts=_produced(verification),
        summary="",
    )
    return replace(work, summary=_summary(work, seen))

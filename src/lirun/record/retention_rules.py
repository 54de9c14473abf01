"""What `li gc` does with one old record: the retention policy and the pure decision.

A record is pruned when it ended before the cutoff, matches the policy's filters, and
nothing still needs it whole. The refusals are the safety rules (docs/retention.md):
never a running record, never a run of a running flow or of an active show, never one
whose outcome waits in a spool. Filters (``--status``, ``--keep-failed``) only keep.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lirun.lifecycle import policy_for

PRUNE = "prune"
# Kept on purpose (a filter of the policy), not a refusal.
KEPT_STATUS = "kept_status"
KEPT_FAILED = "kept_failed"
# Refused: pruning would take something that is still in use.
RUNNING = "running"
RUNNING_FLOW = "running_flow"
ACTIVE_SHOW = "active_show"
SPOOL_PENDING = "spool_pending"
REFUSALS = (RUNNING, RUNNING_FLOW, ACTIVE_SHOW, SPOOL_PENDING)

REFUSAL_TEXT = {
    RUNNING: "still running",
    RUNNING_FLOW: "a leg of a flow that is still running",
    ACTIVE_SHOW: "a run of a show that is still active",
    SPOOL_PENDING: "its outcome is still pending in a spool",
}

DEFAULT_BATCH = 500
# ``--older-than`` has no retention ceiling; this bound only keeps the cutoff a date a
# calendar can show (36600d, a hundred years).
MAX_OLDER_THAN = 100 * 366 * 86400


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """``li gc``'s options: records that ended more than ``older_than`` seconds ago, of
    ``statuses`` (all when empty), unsuccessful ones kept when ``keep_failed``."""

    older_than: int
    statuses: tuple[str, ...] = ()
    keep_failed: bool = False
    batch: int = DEFAULT_BATCH

    def to_dict(self) -> dict[str, object]:
        return {
            "older_than": self.older_than,
            "statuses": list(self.statuses),
            "keep_failed": self.keep_failed,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> RetentionPolicy:
        statuses = data.get("statuses") or ()
        assert isinstance(statuses, list | tuple)
        return cls(
            older_than=int(str(data["older_than"])),
            statuses=tuple(str(s) for s in statuses),
            keep_failed=bool(data.get("keep_failed")),
        )


@dataclass(frozen=True, slots=True)
class Candidate:
    """The facts about one old record that the decision needs."""

    kind: str
    id: str
    status: str | None
    flow_status: str | None = None
    in_active_show: bool = False
    spool_pending: bool = False


@dataclass(slots=True)
class Tally:
    """What one gc pass did, by kind and by cause."""

    pruned: dict[str, int] = field(default_factory=dict)
    kept: dict[str, int] = field(default_factory=dict)
    refused: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, id, cause)
    bulk_bytes: int = 0
    file_bytes: int = 0
    files_removed: int = 0
    files_elsewhere: int = 0  # tombstones whose run directory is on another host
    problems: list[str] = field(default_factory=list)
    # --dry-run: what would go, (kind, id, status), in the order gc would prune it
    would_prune: list[tuple[str, str, str | None]] = field(default_factory=list)

    def count_pruned(self, kind: str, n: int = 1) -> None:
        self.pruned[kind] = self.pruned.get(kind, 0) + n

    def count_kept(self, cause: str) -> None:
        self.kept[cause] = self.kept.get(cause, 0) + 1


def decide(candidate: Candidate, policy: RetentionPolicy) -> str:
    """``PRUNE``, a ``KEPT_*`` filter, or one of ``REFUSALS`` (the first that applies)."""
    entity = policy_for(candidate.kind)
    if candidate.status not in entity.terminal:
        return RUNNING
    flow_terminal = policy_for("invocation").terminal
    if candidate.flow_status is not None and candidate.flow_status not in flow_terminal:
        return RUNNING_FLOW
    if candidate.in_active_show:
        return ACTIVE_SHOW
    if candidate.spool_pending:
        return SPOOL_PENDING
    if policy.statuses and candidate.status not in policy.statuses:
        return KEPT_STATUS
    if policy.keep_failed and candidate.status not in entity.success:
        return KEPT_FAILED
    return PRUNE

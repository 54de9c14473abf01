"""The store's rows for shows and their plays (see ``lirun.store.rows``)."""

from __future__ import annotations

from collections.abc import Mapping

from lirun.hints import Any, NamedTuple
from lirun.store.rows.base import TypedRow

__all__ = ["PlayRow", "ShowListRow", "ShowRow"]


class ShowRow(TypedRow):
    """A ``shows`` row: one show of plays, its git (repository, base, integration branch
    and head), its final gate and its owner's lease (its JSON columns decoded)."""

    id: str
    topic: str
    ended_at: float | None
    status: str
    status_reason_code: str | None
    status_reason_summary: str | None
    status_evidence_refs: Any
    created_at: float
    updated_at: float
    spec_json: Any
    repo: str | None
    base: str | None
    base_sha: str | None
    integration: str | None
    integration_head: str | None
    final_gate_json: Any
    owner_pid: int | None
    owner_start_time: float | None
    owner_host: str | None
    owner_boot_id: str | None
    heartbeat_at: float | None
    lease_seconds: float | None


class PlayRow(TypedRow):
    """A ``plays`` row: one play of a show, its attempt, branch and worktree, the
    candidate it offers and the merge it made (its JSON columns decoded)."""

    id: str
    show_id: str
    name: str
    session_id: str | None
    ended_at: float | None
    status: str
    status_reason_code: str | None
    status_reason_summary: str | None
    status_evidence_refs: Any
    created_at: float
    updated_at: float
    position: int | None
    attempt: int
    attempts: int | None
    branch: str | None
    worktree: str | None
    depends_on_json: Any
    candidate_sha: str | None
    candidate_base: str | None
    merge_sha: str | None
    merged_at: float | None
    gate_json: Any
    feedback: str | None


class ShowListRow(NamedTuple):
    """A show as the lists give it (``li show status``, the shows page): its status
    columns and ``plays``, how many of its plays are in each status (derived, not a
    column: ``{"merged": 2, "escalated": 1}``)."""

    id: str
    topic: str
    status: str
    status_reason_code: str | None
    status_reason_summary: str | None
    created_at: float
    updated_at: float
    ended_at: float | None
    plays: Mapping[str, int]

    @classmethod
    def from_row(cls, row: Mapping[str, Any], plays: Mapping[str, int]) -> ShowListRow:
        """The show of one list row (its show columns) and its plays counted by status."""
        fields = {name: row[name] for name in cls._fields if name != "plays"}
        return cls(**fields, plays=dict(plays))

    def as_dict(self) -> dict[str, Any]:
        """The row as a plain dict (``plays`` a dict), as the JSON outputs show it."""
        return {**self._asdict(), "plays": dict(self.plays)}

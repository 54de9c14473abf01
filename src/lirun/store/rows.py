"""The rows the store returns, one immutable class per entity, each built by its one
``from_row`` from the mapping a query returns: callers above the store read attributes
(``worker.heartbeat_at``), never a row dict's keys, and mypy checks each name.

NamedTuples (``hints.NamedTuple``, a ``collections.namedtuple`` at run time): this module
is on the start-up path of ``li wait``, where ``dataclasses`` is not. ``as_dict`` gives
the plain dict the async face (``StateDB``) and the JSON outputs hand on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lirun.hints import Any, NamedTuple


class WorkerRow(NamedTuple):
    """A ``workers`` row (a process that fires schedules and runs queued runs), with
    ``running``: the ids of the schedule runs it holds (derived, not a column)."""

    id: str
    host: str
    pid: int
    process_start_time: float | None
    boot_id: str | None
    started_at: float
    heartbeat_at: float
    stopped_at: float | None
    concurrency: int
    transport: str
    lease_seconds: float
    running: tuple[str, ...] = ()

    @classmethod
    def from_row(cls, row: Mapping[str, Any], running: Sequence[str] = ()) -> WorkerRow:
        """The worker of one ``workers`` row and the runs it holds."""
        return cls(
            id=str(row["id"]),
            host=str(row["host"]),
            pid=int(row["pid"]),
            process_start_time=row["process_start_time"],
            boot_id=row["boot_id"],
            started_at=float(row["started_at"]),
            heartbeat_at=float(row["heartbeat_at"]),
            stopped_at=row["stopped_at"],
            concurrency=int(row["concurrency"]),
            transport=str(row["transport"]),
            lease_seconds=float(row["lease_seconds"]),
            running=tuple(running),
        )

    def as_dict(self) -> dict[str, Any]:
        """The row as a plain dict (``running`` a list), as JSON outputs show it."""
        return {**self._asdict(), "running": list(self.running)}


class ScheduleRow(NamedTuple):
    """A ``schedules`` row: one definition (its JSON columns decoded) and its status."""

    id: str
    name: str
    spec: str | None
    action_kind: str
    action_json: Any
    enabled: int
    created_at: float
    updated_at: float
    status: str | None
    status_reason_code: str | None
    status_reason_summary: str | None
    status_evidence_refs: Any
    trigger_json: Any
    policies_json: Any
    tz: str | None
    next_due_at: int | None
    deleted_at: float | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ScheduleRow:
        """The schedule of one decoded ``schedules`` row (``records.decode_row``)."""
        return cls(**{name: row[name] for name in cls._fields})

    def as_dict(self) -> dict[str, Any]:
        """The row as a plain dict, as the JSON outputs show it."""
        return self._asdict()


class TransitionRow(NamedTuple):
    """One row of an entity's status history (``status_transitions``), its evidence and
    metadata decoded."""

    id: str
    entity_type: str
    entity_id: str
    previous_status: str | None
    status: str
    reason_code: str
    reason_summary: str | None
    evidence_refs: Any
    source: str
    actor: str | None
    created_at: float
    metadata: Any

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> TransitionRow:
        """The history row of one decoded ``status_transitions`` row."""
        return cls(**{name: row[name] for name in cls._fields})

    def as_dict(self) -> dict[str, Any]:
        """The row as a plain dict, as the JSON outputs and ``StateDB`` give it."""
        return self._asdict()


class ScheduleRunRow(NamedTuple):
    """A ``schedule_runs`` row: one run of a schedule (or of ``li submit``), the lease of
    the worker running it and what it produced (its action JSON decoded)."""

    id: str
    schedule_id: str | None
    invocation_id: str | None
    action_kind: str
    attempt: int
    started_at: float | None
    ended_at: float | None
    exit_code: int | None
    status: str
    status_reason_code: str | None
    status_reason_summary: str | None
    status_evidence_refs: Any
    created_at: float
    updated_at: float
    due_at: int | None
    retry_of: str | None
    session_id: str | None
    worker_id: str | None
    lease_expires_at: float | None
    heartbeat_at: float | None
    show_id: str | None
    action_json: Any

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ScheduleRunRow:
        """The run of one decoded ``schedule_runs`` row (``records.decode_row``)."""
        return cls(**{name: row[name] for name in cls._fields})

    def as_dict(self) -> dict[str, Any]:
        """The row as a plain dict, as the JSON outputs show it."""
        return self._asdict()


class AdminEventRow(NamedTuple):
    """An ``admin_events`` row: an override or a refused status write, who and why (its
    payload decoded)."""

    id: str
    event_type: str
    target_type: str
    target_id: str
    actor: str | None
    justification: str | None
    payload: Any
    created_at: float

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> AdminEventRow:
        """The event of one decoded ``admin_events`` row."""
        return cls(**{name: row[name] for name in cls._fields})

    def as_dict(self) -> dict[str, Any]:
        """The row as a plain dict, as the JSON outputs and ``StateDB`` give it."""
        return self._asdict()


# -- shows and plays --


class ShowRow(NamedTuple):
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

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ShowRow:
        """The show of one decoded ``shows`` row (``records.decode_row``)."""
        return cls(**{name: row[name] for name in cls._fields})

    def as_dict(self) -> dict[str, Any]:
        """The row as a plain dict, as the JSON outputs and ``StateDB`` give it."""
        return self._asdict()


class PlayRow(NamedTuple):
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

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> PlayRow:
        """The play of one decoded ``plays`` row (``records.decode_row``)."""
        return cls(**{name: row[name] for name in cls._fields})

    def as_dict(self) -> dict[str, Any]:
        """The row as a plain dict, as the JSON outputs and ``StateDB`` give it."""
        return self._asdict()


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


# -- teams and their messages --


class TeamRow(NamedTuple):
    """A ``teams`` row: a team's name, status, owner (the show or flow invocation that
    made it, if any) and its message count."""

    id: str
    name: str
    archived_at: float | None
    status: str
    status_reason_code: str | None
    status_reason_summary: str | None
    status_evidence_refs: Any
    created_at: float
    updated_at: float
    owner_type: str | None
    owner_id: str | None
    message_count: int
    last_message_at: float | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> TeamRow:
        """The team of one decoded ``teams`` row (``records.decode_row``)."""
        return cls(**{name: row[name] for name in cls._fields})

    def as_dict(self) -> dict[str, Any]:
        """The row as a plain dict, as the JSON outputs and ``StateDB`` give it."""
        return self._asdict()


class TeamMemberRow(NamedTuple):
    """A member of a team (``team_members``): its name, when it joined, the run it
    joined as (None for a member added by hand)."""

    member: str
    joined_at: float
    run_id: str | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> TeamMemberRow:
        """The member of one ``team_members`` row of a team."""
        return cls(**{name: row[name] for name in cls._fields})

    def as_dict(self) -> dict[str, Any]:
        """The row as a plain dict, as the JSON outputs show it."""
        return self._asdict()


class TeamMemberSummaryRow(NamedTuple):
    """A member with what it has received unread, what it has sent and when it last
    did (``lirun`` too once it has spoken: no join time, no run)."""

    member: str
    joined_at: float | None
    run_id: str | None
    unread: int
    sent: int
    last_sent_at: float | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> TeamMemberSummaryRow:
        """The summary of one member from its fields."""
        return cls(**{name: row[name] for name in cls._fields})

    def as_dict(self) -> dict[str, Any]:
        """The row as a plain dict, as the JSON outputs show it."""
        return self._asdict()


class RunMembershipRow(NamedTuple):
    """A team a run joined, and the member name it joined as."""

    team_id: str
    member: str

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> RunMembershipRow:
        """The membership of one ``team_members`` row of a run."""
        return cls(team_id=str(row["team_id"]), member=str(row["member"]))

    def as_dict(self) -> dict[str, Any]:
        """The row as a plain dict, as the JSON outputs show it."""
        return self._asdict()


class TeamMessageRow(NamedTuple):
    """A ``team_messages`` row: one message, its place in its team's order (``seq``),
    who sent it to whom (``all`` for everyone) and the run that sent it."""

    id: str
    team_id: str
    seq: int
    sender: str
    recipient: str
    body: str
    run_id: str | None
    created_at: float

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> TeamMessageRow:
        """The message of one ``team_messages`` row."""
        return cls(**{name: row[name] for name in cls._fields})

    def as_dict(self) -> dict[str, Any]:
        """The row as a plain dict, as ``StateDB`` gives it."""
        return self._asdict()


class InboxMessageRow(NamedTuple):
    """A message as a member's inbox gives it: the ``team_messages`` row and when that
    member had read it before this read (None: unread until now)."""

    id: str
    team_id: str
    seq: int
    sender: str
    recipient: str
    body: str
    run_id: str | None
    created_at: float
    read_at: float | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> InboxMessageRow:
        """The message of one inbox row (the message's columns and ``read_at``)."""
        return cls(**{name: row[name] for name in cls._fields})

    def as_dict(self) -> dict[str, Any]:
        """The row as a plain dict, as ``StateDB`` gives it."""
        return self._asdict()

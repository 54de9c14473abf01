"""The store's read rows: what a list view's query returns, one class per query, naming
exactly the columns it selects (see ``lirun.store.rows``)."""

from __future__ import annotations

from lirun.hints import Any, NamedTuple
from lirun.store.rows.base import TypedRow
from lirun.store.rows.schedules import AttentionQueuedRunRow
from lirun.store.rows.shows import ShowRow

__all__ = [
    "AttentionFlowRow",
    "AttentionPlayRow",
    "AttentionRows",
    "AttentionScheduleRunRow",
    "FlowListRow",
    "GcCandidateRow",
    "HistoryEventRow",
    "LineagePlayRow",
    "LineageScheduleRunRow",
    "RecentScheduleRunRow",
    "ResumedRunRow",
    "RunLineage",
    "RunPageRow",
    "ScheduleRunUsageRow",
    "UnremovedFileRow",
    "WaitExactRow",
    "WaitFetchRow",
    "WaitMatchRow",
]


class FlowListRow(TypedRow):
    """A flow invocation as ``li flow list`` and the flows page list it: its status,
    skill, prompt, usage and times, and when and by whom ``li gc`` pruned it
    (``store.lists.flows``)."""

    id: str
    status: str
    status_reason_code: str | None
    status_reason_summary: str | None
    skill: str | None
    prompt: str | None
    resumed_from: str | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    created_at: float
    updated_at: float
    ended_at: float | None
    heartbeat_at: float | None
    pruned_at: float | None
    pruned_by: str | None


class RunPageRow(TypedRow):
    """One execution of any kind as the runs page and ``li status --kind`` list it
    (``runs_page``): its ``kind``, status and reason, ``label`` (a leg, a flow's file, a
    play's name, a schedule's name), ``parent_id``, usage and times; a schedule run names
    what it made (``made_kind``, ``made_id``), a command run its argv (``command``), an
    invocation or schedule run its ``origin``; ``pruned_at`` when it was pruned; a
    session its ``meta`` (its metadata as stored JSON text: a show's gate or play, a team
    member)."""

    kind: str
    id: str
    status: str
    reason_code: str | None
    reason_summary: str | None
    provider: str | None
    model: str | None
    prompt: str | None
    label: str | None
    parent_id: str | None
    duration_s: float | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    created_at: float
    ended_at: float | None
    made_kind: str | None
    made_id: str | None
    command: str | None
    origin: str | None
    pruned_at: float | None
    meta: str | None


class RecentScheduleRunRow(TypedRow):
    """A schedule run as the schedules page's strip shows it (``recent_schedule_runs``):
    the ``schedule_runs`` columns as stored (JSON not decoded), the ``cost_usd`` its flow
    or session recorded and ``rn``, its place among its schedule's runs (1: the newest)."""

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
    idempotency_key: str | None
    lease_epoch: int
    event_key: str | None
    event_json: str | None
    chain_parent_id: str | None
    chain_depth: int
    subject_key: str | None
    cost_usd: float | None
    rn: int


class ScheduleRunUsageRow(TypedRow):
    """A schedule run as one schedule's page lists it (``schedule_runs_with_usage``): the
    ``schedule_runs`` columns as stored (JSON not decoded) and the cost and tokens its flow
    or session recorded."""

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
    idempotency_key: str | None
    lease_epoch: int
    event_key: str | None
    event_json: str | None
    chain_parent_id: str | None
    chain_depth: int
    subject_key: str | None
    cost_usd: float | None
    input_tokens: int | None
    output_tokens: int | None


class ResumedRunRow(TypedRow):
    """An execution that resumed another (``run_lineage``)."""

    id: str
    status: str
    created_at: float


class LineagePlayRow(TypedRow):
    """A play an execution backs (``run_lineage``)."""

    id: str
    show_id: str
    name: str
    status: str


class LineageScheduleRunRow(TypedRow):
    """A schedule run that made an execution or its flow, with its schedule's name
    (``None`` for ``li submit``; ``run_lineage``)."""

    id: str
    schedule_id: str | None
    status: str
    schedule_name: str | None


class RunLineage(NamedTuple):
    """What an execution is linked to besides its own columns (``run_lineage``): the
    executions that resumed it, the plays it backs and the schedule runs that made it."""

    resumed_as: list[ResumedRunRow]
    plays: list[LineagePlayRow]
    schedule_runs: list[LineageScheduleRunRow]

    def as_dict(self) -> dict[str, Any]:
        """Each list as plain dicts, as the run page and its API show them."""
        return {name: [r.as_dict() for r in rows] for name, rows in self._asdict().items()}


class AttentionPlayRow(TypedRow):
    """A play escalated or gate-failed, with its show's ``topic`` and ``show_status``
    (``attention_rows``; whether it needs a person is ``shows.decide.play_needs_person``)."""

    id: str
    show_id: str
    name: str
    status: str
    status_reason_code: str | None
    status_reason_summary: str | None
    updated_at: float
    topic: str
    show_status: str | None


class AttentionFlowRow(TypedRow):
    """A flow that failed or timed out and was not resumed (``attention_rows``)."""

    id: str
    status: str
    status_reason_code: str | None
    status_reason_summary: str | None
    skill: str | None
    updated_at: float
    created_at: float


class AttentionScheduleRunRow(TypedRow):
    """A schedule run that failed or timed out with no success of its schedule after it,
    with the schedule's name; an ad-hoc run (no schedule) not retried, with its action
    (``action_json``) and what it made (``session_id``, ...) (``attention_rows``)."""

    id: str
    schedule_id: str | None
    schedule_name: str | None
    status: str
    status_reason_code: str | None
    status_reason_summary: str | None
    updated_at: float
    created_at: float
    action_json: dict[str, Any] | None
    session_id: str | None
    invocation_id: str | None
    show_id: str | None


class AttentionRows(NamedTuple):
    """What the needs-you page judges (``attention_rows``): plays, flows and schedule runs
    that need a person, and the active shows whose owner may have died."""

    plays: list[AttentionPlayRow]
    flows: list[AttentionFlowRow]
    schedule_runs: list[AttentionScheduleRunRow]
    running_shows: list[ShowRow]
    queued_runs: list[AttentionQueuedRunRow]


class GcCandidateRow(TypedRow):
    """A run or flow gc may prune (``store.retention.candidates``): its status, times, run
    directory and host, the status of the flow it is a leg of, whether an active show
    holds it and ``bulk_bytes``, what its tombstone clears."""

    id: str
    status: str | None
    ended_at: float | None
    updated_at: float | None
    run_dir: str | None
    artifacts_path: str | None
    owner_host: str | None
    flow_status: str | None
    in_active_show: Any
    bulk_bytes: int | None


class UnremovedFileRow(TypedRow):
    """A tombstone whose run directory is not yet removed (``unremoved_files``)."""

    kind: str
    id: str
    run_dir: str | None
    artifacts_path: str | None
    owner_host: str | None


class HistoryEventRow(TypedRow):
    """A history row as the dashboard's event stream hears it (``transitions_since``):
    its sequence number, record, statuses, reason and time, and ``parent_id`` (a
    session's invocation, a play's show)."""

    seq: int
    entity_type: str
    entity_id: str
    previous_status: str | None
    status: str
    reason_code: str | None
    created_at: float
    parent_id: str | None


class WaitExactRow(TypedRow):
    """One exact reading of an id ``li wait`` was given (``store.waits.resolve_exact``): the
    record of ``kind`` it names, the ``input`` it was read from, and its ``tier`` (the
    lower wins: an id before a branch before a run id)."""

    tier: int
    kind: str
    id: str
    input: str
    created_at: float | None


class WaitMatchRow(TypedRow):
    """A record whose id starts or ends with a fragment ``li wait`` was given
    (``store.waits.match_ids``), with ``total``: how many match in all."""

    kind: str
    id: str
    total: int


class WaitFetchRow(TypedRow):
    """One target of ``li wait`` as one tick reads it (``store.waits.fetch_rows``): its status
    and reason, the run directory and artifacts of the session backing it, its exit code
    and the owner's liveness facts (a schedule run's: its worker's, and its lease)."""

    kind: str
    id: str
    status: str
    reason_code: str | None
    reason_summary: str | None
    run_dir: str | None
    artifact_dir: str | None
    exit_code: int | None
    owner_pid: int | None
    owner_start_time: float | None
    owner_host: str | None
    owner_boot_id: str | None
    heartbeat_at: float | None
    lease_seconds: float | None

"""The rows the store returns, one immutable class per entity, each built by its one
``from_row`` from the mapping a query returns: callers above the store read attributes
(``worker.heartbeat_at``), never a row dict's keys, and mypy checks each name.

NamedTuples (``hints.NamedTuple``, a ``collections.namedtuple`` at run time): this module
is on the start-up path of ``li wait``, where ``dataclasses`` is not. ``as_dict`` gives
the plain dict the async face (``StateDB``) and the JSON outputs hand on.
"""

from __future__ import annotations

from lirun.store.rows.reads import (
    AttentionFlowRow,
    AttentionPlayRow,
    AttentionRows,
    AttentionScheduleRunRow,
    FlowListRow,
    GcCandidateRow,
    HistoryEventRow,
    LineagePlayRow,
    LineageScheduleRunRow,
    RecentScheduleRunRow,
    ResumedRunRow,
    RunLineage,
    RunPageRow,
    ScheduleRunUsageRow,
    UnremovedFileRow,
    WaitExactRow,
    WaitFetchRow,
    WaitMatchRow,
)
from lirun.store.rows.runs import (
    AdminEventRow,
    BranchRow,
    InvocationRow,
    MessageRow,
    SessionRow,
    TransitionRow,
)
from lirun.store.rows.schedules import (
    AttentionQueuedRunRow,
    RunLeaseRow,
    ScheduleRow,
    ScheduleRunRow,
    WorkerRow,
)
from lirun.store.rows.shows import PlayRow, ShowListRow, ShowRow
from lirun.store.rows.teams import (
    InboxMessageRow,
    RunMembershipRow,
    TeamMemberRow,
    TeamMemberSummaryRow,
    TeamMessageRow,
    TeamRow,
)

__all__ = [
    "AdminEventRow",
    "AttentionFlowRow",
    "AttentionPlayRow",
    "AttentionQueuedRunRow",
    "AttentionRows",
    "AttentionScheduleRunRow",
    "BranchRow",
    "FlowListRow",
    "GcCandidateRow",
    "HistoryEventRow",
    "InboxMessageRow",
    "InvocationRow",
    "LineagePlayRow",
    "LineageScheduleRunRow",
    "MessageRow",
    "PlayRow",
    "RecentScheduleRunRow",
    "ResumedRunRow",
    "RunLeaseRow",
    "RunLineage",
    "RunMembershipRow",
    "RunPageRow",
    "ScheduleRow",
    "ScheduleRunRow",
    "ScheduleRunUsageRow",
    "SessionRow",
    "ShowListRow",
    "ShowRow",
    "TeamMemberRow",
    "TeamMemberSummaryRow",
    "TeamMessageRow",
    "TeamRow",
    "TransitionRow",
    "UnremovedFileRow",
    "WaitExactRow",
    "WaitFetchRow",
    "WaitMatchRow",
    "WorkerRow",
]

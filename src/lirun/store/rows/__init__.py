"""The rows the store returns, one immutable class per entity, each built by ``from_row``
from the mapping a query returns: callers above the store read attributes
(``worker.heartbeat_at``), never a row dict's keys, and mypy checks each name.

Each row class names its columns once, as annotated fields of a ``TypedRow`` subclass, and
gets from them one ``from_row`` and one ``as_dict`` (the plain dict the async face,
``StateDB``, and the JSON outputs hand on), not a copy in each class. At run time a
``TypedRow`` subclass is a ``collections.namedtuple`` of its fields with ``TypedRow`` among its
bases (this package is on the start-up path of ``li wait``, where ``typing`` and
``dataclasses`` are not); type checkers read it as a frozen dataclass
(``dataclass_transform``), checking its constructor field by field. A row built from more
than its columns (a worker's runs, a lease's retry) says so in its own ``from_row``.
"""

from __future__ import annotations

from lirun.store.rows.base import TypedRow
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
    EventRow,
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
    "EventRow",
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
    "TypedRow",
    "UnremovedFileRow",
    "WaitExactRow",
    "WaitFetchRow",
    "WaitMatchRow",
    "WorkerRow",
]

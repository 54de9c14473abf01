"""Rows cross the store's boundary as typed values (``lirun.store.rows``), not dicts.

The store's methods that still return row dicts are listed here, one aggregate at a time
leaving the list: a new method that returns a dict fails, and so does a listed one that
has become typed (the list must shrink with the code, never hide a typed method).
"""

from __future__ import annotations

import inspect
import re

import pytest

from lirun.store import Store
from lirun.store import rows as row_classes
from lirun.store.rows import (
    AdminEventRow,
    InboxMessageRow,
    PlayRow,
    RunMembershipRow,
    ScheduleRow,
    ScheduleRunRow,
    ShowListRow,
    ShowRow,
    TeamMemberRow,
    TeamMemberSummaryRow,
    TeamMessageRow,
    TeamRow,
    TransitionRow,
    WorkerRow,
)

# Methods whose rows are still dicts (decoded) or raw ``Row`` mappings.
STILL_DICTS = frozenset(
    {
        "append_message", "attention_rows", "create_flow_invocation",
        "create_invocation", "create_schedule_run", "create_session",
        "fetch_wait_rows", "find_session_by_engine_uid", "gc_candidates", "get_branch",
        "get_entity", "list_flows", "list_invocation_sessions",
        "list_messages", "list_play_sessions",
        "list_running_flows", "list_running_legs", "list_running_sessions", "list_sessions",
        "list_show_gate_sessions", "match_wait_ids",
        "recent_schedule_runs", "resolve_wait_exact",
        "run_lineage", "runs_page", "schedule_runs_with_usage",
        "transitions_since", "unremoved_files", "upsert_branch",
    }
)  # fmt: skip

ROW_DICT = re.compile(r"dict\[str, Any\]|\bRow\b")


def _returns() -> dict[str, str]:
    return {
        name: str(inspect.signature(fn).return_annotation)
        for name, fn in inspect.getmembers(Store, inspect.isfunction)
        if not name.startswith("_")
    }


def test_no_store_method_returns_a_row_dict_unless_listed() -> None:
    dicts = {name for name, ann in _returns().items() if ROW_DICT.search(ann)}
    assert dicts - STILL_DICTS == set(), "return a row class of lirun.store.rows instead"
    assert STILL_DICTS - dicts == set(), "typed now: take it off STILL_DICTS"


@pytest.mark.parametrize(
    ("method", "row_class"),
    [
        ("get_schedule", ScheduleRow),
        ("get_schedule_by_id", ScheduleRow),
        ("list_schedules", ScheduleRow),
        ("list_due_schedules", ScheduleRow),
        ("create_schedule", ScheduleRow),
        ("list_live_workers", WorkerRow),
        ("list_transitions", TransitionRow),
        ("list_admin_events", AdminEventRow),
        ("get_schedule_run", ScheduleRunRow),
        ("insert_due_run", ScheduleRunRow),
        ("insert_queued_run", ScheduleRunRow),
        ("queue_retry", ScheduleRunRow),
        ("list_schedule_runs", ScheduleRunRow),
        ("list_queued_runs", ScheduleRunRow),
        ("list_lapsed_runs", ScheduleRunRow),
        ("create_show", ShowRow),
        ("create_show_with_plays", ShowRow),
        ("get_show", ShowRow),
        ("active_shows_for_topic", ShowRow),
        ("recent_shows", ShowRow),
        ("create_play", PlayRow),
        ("get_play", PlayRow),
        ("list_plays", PlayRow),
        ("show_plays", PlayRow),
        ("list_shows", ShowListRow),
        ("list_recent_shows", ShowListRow),
        ("create_team", TeamRow),
        ("create_team_with_members", TeamRow),
        ("get_team", TeamRow),
        ("list_teams", TeamRow),
        ("teams_of_owner", TeamRow),
        ("team_members", TeamMemberRow),
        ("team_member_summary", TeamMemberSummaryRow),
        ("team_memberships_of_run", RunMembershipRow),
        ("send_team_message", TeamMessageRow),
        ("team_conversation", TeamMessageRow),
        ("team_recent_messages", TeamMessageRow),
        ("read_team_inbox", InboxMessageRow),
    ],
)
def test_typed_methods_name_their_row_class(method: str, row_class: type) -> None:
    assert row_class.__name__ in _returns()[method]
    assert getattr(row_classes, row_class.__name__) is row_class


@pytest.mark.parametrize(
    "row_class",
    [
        AdminEventRow,
        ScheduleRow,
        ScheduleRunRow,
        TransitionRow,
        ShowRow,
        PlayRow,
        TeamRow,
        TeamMessageRow,
        InboxMessageRow,
    ],
)
def test_a_row_is_built_from_its_dict_again(row_class: type) -> None:
    given = {name: f"v-{i}" for i, name in enumerate(row_class._fields)}  # type: ignore[attr-defined]
    row = row_class.from_row(given)  # type: ignore[attr-defined]
    assert row.as_dict() == given
    assert row_class.from_row(row.as_dict()) == row  # type: ignore[attr-defined]
    with pytest.raises(KeyError):
        row_class.from_row({k: v for k, v in given.items() if k != "id"})  # type: ignore[attr-defined]

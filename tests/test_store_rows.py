"""Rows cross the store's boundary as typed values (``lirun.store.rows``), not dicts.

The store's methods that still return row dicts are listed here, one aggregate at a time
leaving the list: a new method that returns a dict fails, and so does a listed one that
has become typed (the list must shrink with the code, never hide a typed method).
"""

from __future__ import annotations

import inspect
import re

import pytest

from lirun.lifecycle import PLAY_FIELDS, POLICIES
from lirun.store import Store
from lirun.store import rows as row_classes
from lirun.store.base import id_fragment_params
from lirun.store.records import UPDATABLE_FIELDS, decode_row
from lirun.store.repository import Repository
from lirun.store.rows import (
    AdminEventRow,
    AttentionFlowRow,
    AttentionPlayRow,
    AttentionQueuedRunRow,
    AttentionRows,
    AttentionScheduleRunRow,
    BranchRow,
    FlowListRow,
    GcCandidateRow,
    HistoryEventRow,
    InboxMessageRow,
    InvocationRow,
    LineagePlayRow,
    LineageScheduleRunRow,
    MessageRow,
    PlayRow,
    RecentScheduleRunRow,
    ResumedRunRow,
    RunLeaseRow,
    RunLineage,
    RunMembershipRow,
    RunPageRow,
    ScheduleRow,
    ScheduleRunRow,
    ScheduleRunUsageRow,
    SessionRow,
    ShowListRow,
    ShowRow,
    TeamMemberRow,
    TeamMemberSummaryRow,
    TeamMessageRow,
    TeamRow,
    TransitionRow,
    TypedRow,
    UnremovedFileRow,
    WaitExactRow,
    WaitFetchRow,
    WaitMatchRow,
    WorkerRow,
)
from lirun.store.ui_reads import RunFilter, page_params

# Methods whose rows are still dicts (decoded) or raw ``Row`` mappings: any entity's row,
# and the primitives the repositories build their typed rows from.
STILL_DICTS = frozenset(
    {
        "get_entity",
        "insert",
        "lock_row",
    }
)  # fmt: skip

ROW_DICT = re.compile(r"dict\[str, Any\]|\bRow\b")


def _returns(store: Store) -> dict[str, str]:
    """What each public method of the store and of its repositories returns, by
    ``name`` or ``repository.name`` (``shows.get``)."""
    owners: dict[str, object] = {"": store}
    owners.update(
        (name, part) for name, part in vars(store).items() if isinstance(part, Repository)
    )
    return {
        f"{part}.{name}" if part else name: str(inspect.signature(fn).return_annotation)
        for part, owner in owners.items()
        for name, fn in inspect.getmembers(type(owner), inspect.isfunction)
        if not name.startswith("_")
    }


def test_no_store_method_returns_a_row_dict_unless_listed(store: Store) -> None:
    dicts = {name for name, ann in _returns(store).items() if ROW_DICT.search(ann)}
    assert dicts - STILL_DICTS == set(), "return a row class of lirun.store.rows instead"
    assert STILL_DICTS - dicts == set(), "typed now: take it off STILL_DICTS"


@pytest.mark.parametrize(
    ("method", "row_class"),
    [
        ("schedules.get", ScheduleRow),
        ("schedules.get_by_id", ScheduleRow),
        ("schedules.list_all", ScheduleRow),
        ("schedules.list_due", ScheduleRow),
        ("schedules.create", ScheduleRow),
        ("workers.list_live", WorkerRow),
        ("list_transitions", TransitionRow),
        ("list_admin_events", AdminEventRow),
        ("schedules.get_run", ScheduleRunRow),
        ("schedules.create_run", ScheduleRunRow),
        ("schedules.insert_due_run", ScheduleRunRow),
        ("schedules.insert_queued_run", ScheduleRunRow),
        ("schedules.queue_retry", ScheduleRunRow),
        ("schedules.list_runs", ScheduleRunRow),
        ("schedules.list_queued_runs", ScheduleRunRow),
        ("schedules.list_lapsed_runs", ScheduleRunRow),
        ("shows.create", ShowRow),
        ("shows.create_with_plays", ShowRow),
        ("shows.get", ShowRow),
        ("shows.active_for_topic", ShowRow),
        ("shows.recent", ShowRow),
        ("shows.create_play", PlayRow),
        ("shows.get_play", PlayRow),
        ("shows.list_plays", PlayRow),
        ("ui.show_plays", PlayRow),
        ("lists.flows", FlowListRow),
        ("ui.runs_page", RunPageRow),
        ("waits.resolve_exact", WaitExactRow),
        ("waits.fetch_rows", WaitFetchRow),
        ("waits.match_ids", WaitMatchRow),
        ("ui.transitions_since", HistoryEventRow),
        ("retention.candidates", GcCandidateRow),
        ("retention.unremoved_files", UnremovedFileRow),
        ("ui.run_lineage", RunLineage),
        ("lists.attention_rows", AttentionRows),
        ("ui.recent_schedule_runs", RecentScheduleRunRow),
        ("lists.schedule_runs_with_usage", ScheduleRunUsageRow),
        ("lists.shows", ShowListRow),
        ("waits.recent_shows", ShowListRow),
        ("teams.create", TeamRow),
        ("teams.create_with_members", TeamRow),
        ("teams.get", TeamRow),
        ("teams.list_all", TeamRow),
        ("teams.of_owner", TeamRow),
        ("teams.members", TeamMemberRow),
        ("teams.member_summary", TeamMemberSummaryRow),
        ("teams.memberships_of_run", RunMembershipRow),
        ("teams.send_message", TeamMessageRow),
        ("teams.conversation", TeamMessageRow),
        ("teams.recent_messages", TeamMessageRow),
        ("teams.read_inbox", InboxMessageRow),
        ("sessions.get", SessionRow),
        ("sessions.create", SessionRow),
        ("sessions.list_recent", SessionRow),
        ("sessions.list_running", SessionRow),
        ("sessions.find_by_engine_uid", SessionRow),
        ("waits.invocation_sessions", SessionRow),
        ("shows.list_play_sessions", SessionRow),
        ("shows.list_gate_sessions", SessionRow),
        ("invocations.list_running_legs", SessionRow),
        ("invocations.create", InvocationRow),
        ("invocations.get", InvocationRow),
        ("invocations.create_flow", InvocationRow),
        ("invocations.list_running_flows", InvocationRow),
        ("sessions.get_branch", BranchRow),
        ("sessions.upsert_branch", BranchRow),
        ("sessions.append_message", MessageRow),
        ("sessions.list_messages", MessageRow),
    ],
)
def test_typed_methods_name_their_row_class(store: Store, method: str, row_class: type) -> None:
    assert row_class.__name__ in _returns(store)[method]
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
        BranchRow,
        InvocationRow,
        MessageRow,
        SessionRow,
        FlowListRow,
    ],
)
def test_a_row_is_built_from_its_dict_again(row_class: type) -> None:
    given = {name: f"v-{i}" for i, name in enumerate(row_class._fields)}  # type: ignore[attr-defined]
    row = row_class.from_row(given)  # type: ignore[attr-defined]
    assert row.as_dict() == given
    assert row_class.from_row(row.as_dict()) == row  # type: ignore[attr-defined]
    with pytest.raises(KeyError):
        row_class.from_row({k: v for k, v in given.items() if k != "id"})  # type: ignore[attr-defined]


def test_a_session_row_holds_every_column_of_the_sessions_table(store: Store) -> None:
    """``SessionRow.from_row`` names each column of ``sessions``: one the table gains fails
    here, not later as a missing attribute above the store; its JSON columns decoded."""
    made = store.sessions.create(metadata_json={"flow": {"item": 1}}, owner_pid=None)
    raw = store.connector.read(store.sql("get_row", table="sessions"), {"id": made.id})
    assert set(raw[0]) == set(SessionRow._fields)
    row = store.sessions.get(made.id)
    assert row == made
    assert row.as_dict() == {**dict(raw[0]), "metadata_json": {"flow": {"item": 1}}}
    assert row.meta == {"flow": {"item": 1}}
    assert store.sessions.list_recent() == [row]
    assert store.sessions.get("no-such-session") is None


def test_branch_and_message_rows_hold_every_column_of_their_tables(store: Store) -> None:
    """``BranchRow`` and ``MessageRow`` name each column of ``branches`` and ``messages``;
    the branch and message a write returns are the rows read back."""
    made = store.sessions.create(owner_pid=None)
    branch = store.sessions.upsert_branch("b-1", session_id=made.id, provider="claude")
    raw = store.connector.read(store.sql("get_branch"), {"id": "b-1"})
    assert set(raw[0]) == set(BranchRow._fields)
    assert branch.as_dict() == dict(raw[0])
    assert (branch.first_session_id, branch.last_session_id) == (made.id, made.id)
    assert store.sessions.get_branch("no-such-branch") is None
    message = store.sessions.append_message(made.id, role="assistant", content={"n": 1})
    raw = store.connector.read(store.sql("list_messages"), {"session_id": made.id})
    assert set(raw[0]) == set(MessageRow._fields)
    assert store.sessions.list_messages(made.id) == [message]
    assert (message.seq, message.content) == (1, '{"n":1}')


def test_an_invocation_row_holds_every_column_of_the_invocations_table(store: Store) -> None:
    """``InvocationRow.from_row`` names each column of ``invocations``; a flow's graph is
    decoded, and the running flows are the rows its creation returned."""
    flow = store.invocations.create_flow(id="flow-1", flow={"graph": []})
    manual = store.invocations.create(skill="review", id="inv-1")
    raw = store.connector.read(store.sql("get_row", table="invocations"), {"id": "flow-1"})
    assert set(raw[0]) == set(InvocationRow._fields)
    assert flow.as_dict() == {**dict(raw[0]), "flow_json": {"graph": []}}
    assert (flow.kind, manual.kind) == ("flow", None)
    assert store.invocations.list_running_flows() == [flow]
    assert (store.invocations.get("flow-1"), store.invocations.get("inv-1")) == (flow, manual)
    assert store.invocations.get("no-such-invocation") is None


def test_a_flow_list_row_names_each_column_list_flows_selects(store: Store) -> None:
    """``FlowListRow`` names exactly what ``list_flows`` selects: a column the query gains
    fails here, and ``li flow list --json`` keeps its keys."""
    flow = store.invocations.create_flow(id="flow-1", flow={"graph": []})
    params = {"status": None, "since": None, "before_at": 1e11, "before_id": "", "limit": 5}
    raw = store.connector.read(store.sql("list_flows"), params)
    assert set(raw[0]) == set(FlowListRow._fields)
    [row] = store.lists.flows()
    assert row.as_dict() == dict(raw[0])
    assert (row.id, row.status) == (flow.id, flow.status)


def test_a_run_page_row_names_each_column_ui_runs_page_selects(store: Store) -> None:
    """``RunPageRow`` names exactly what ``ui_runs_page`` selects for every kind: a column
    the query gains fails here, and the dashboard's ``/api/runs`` keeps its keys."""
    show = store.shows.create(topic="t")
    store.shows.create_play(show_id=show.id, name="p")
    store.schedules.create_run(action_kind="agent")
    store.invocations.create(skill="review")
    store.sessions.create(owner_pid=None)
    params = page_params(RunFilter(), None, 10)
    raw = store.connector.read(store.sql("ui_runs_page"), params)
    assert {r["kind"] for r in raw} == {"run", "invocation", "play", "schedule_run"}
    assert all(set(r) == set(RunPageRow._fields) for r in raw)
    assert [r.as_dict() for r in store.ui.runs_page()] == [dict(r) for r in raw]


def test_schedule_run_read_rows_name_each_column_their_queries_select(store: Store) -> None:
    """``RecentScheduleRunRow`` and ``ScheduleRunUsageRow`` name exactly what their queries
    select (every ``schedule_runs`` column and the usage joined to it): a column the table
    gains fails here, and the schedules pages' API keeps its keys."""
    schedule = store.schedules.create(name="nightly", fields={"action_kind": "run"})
    run = store.schedules.create_run(action_kind="run", schedule_id=schedule.id)
    raw = store.connector.read(store.sql("ui_recent_schedule_runs"), {"per_schedule": 5})
    assert set(raw[0]) == set(RecentScheduleRunRow._fields)
    assert [r.as_dict() for r in store.ui.recent_schedule_runs(5)] == [dict(r) for r in raw]
    params = {"schedule_id": schedule.id, "limit": 5}
    raw = store.connector.read(store.sql("schedule_runs_with_usage"), params)
    assert set(raw[0]) == set(ScheduleRunUsageRow._fields)
    [row] = store.lists.schedule_runs_with_usage(schedule.id)
    assert (row.as_dict(), row.id) == (dict(raw[0]), run.id)


@pytest.mark.parametrize(
    ("query", "row_class"),
    [
        ("ui_resumed_as", ResumedRunRow),
        ("ui_plays_of_session", LineagePlayRow),
        ("ui_schedule_runs_of_run", LineageScheduleRunRow),
    ],
)
def test_lineage_rows_name_each_column_their_queries_select(
    store: Store, query: str, row_class: type
) -> None:
    """Each list of ``run_lineage`` names exactly what its query selects, so the run
    page's ``lineage`` keeps its keys."""
    schedule = store.schedules.create(name="nightly", fields={"action_kind": "agent"})
    made = store.sessions.create(id="s-1", owner_pid=None)
    store.sessions.create(id="s-2", owner_pid=None, resumed_from=made.id)
    show = store.shows.create(topic="t")
    store.shows.create_play(show_id=show.id, name="p", session_id=made.id)
    run = store.schedules.create_run(action_kind="agent", schedule_id=schedule.id)
    with store.connector.write() as tx:
        tx.execute(
            "UPDATE schedule_runs SET session_id = :s WHERE id = :id", {"s": made.id, "id": run.id}
        )
    raw = store.connector.read(store.sql(query), {"id": made.id, "invocation_id": None})
    assert set(raw[0]) == set(row_class._fields)  # type: ignore[attr-defined]
    lineage = store.ui.run_lineage(made.id, None)
    assert lineage.as_dict()[_LINEAGE_OF[query]] == [dict(r) for r in raw]
    assert (lineage.resumed_as[0].id, lineage.schedule_runs[0].schedule_name) == ("s-2", "nightly")


_LINEAGE_OF = {
    "ui_resumed_as": "resumed_as",
    "ui_plays_of_session": "plays",
    "ui_schedule_runs_of_run": "schedule_runs",
}


@pytest.mark.parametrize(
    ("query", "field", "row_class"),
    [
        ("attention_plays", "plays", AttentionPlayRow),
        ("attention_flows", "flows", AttentionFlowRow),
        ("attention_schedule_runs", "schedule_runs", AttentionScheduleRunRow),
        ("attention_queued_runs", "queued_runs", AttentionQueuedRunRow),
    ],
)
def test_attention_rows_name_each_column_their_queries_select(
    store: Store, query: str, field: str, row_class: type
) -> None:
    """Each list ``attention_rows`` gives names exactly what its query selects, so the
    needs-you page's facts keep their keys."""
    show = store.shows.create(topic="t")
    play = store.shows.create_play(show_id=show.id, name="p")
    flow = store.invocations.create_flow(id="flow-1", flow={"graph": []})
    schedule = store.schedules.create(name="nightly", fields={"action_kind": "run"})
    run = store.schedules.create_run(action_kind="run", schedule_id=schedule.id)
    with store.connector.write() as tx:
        for table, ident, status in (
            ("plays", play.id, "escalated"),
            ("invocations", flow.id, "failed"),
            ("schedule_runs", run.id, "failed"),
        ):
            tx.execute(f"UPDATE {table} SET status = :s WHERE id = :id", {"s": status, "id": ident})
    store.schedules.create_run(action_kind="run", schedule_id=schedule.id)  # queued
    raw = store.connector.read(store.sql(query), {"since": 0.0})
    assert set(raw[0]) == set(row_class._fields)  # type: ignore[attr-defined]
    rows = store.lists.attention_rows(since=0.0)
    assert [r.as_dict() for r in getattr(rows, field)] == [decode_row(r) for r in raw]
    assert [s.id for s in rows.running_shows] == [show.id]


@pytest.mark.parametrize("kind", ["session", "invocation"])
def test_gc_rows_name_each_column_their_queries_select(store: Store, kind: str) -> None:
    """``GcCandidateRow`` names exactly what both candidate queries select and
    ``UnremovedFileRow`` what ``gc_unremoved_files`` does: a column a query gains fails
    here, not as a missing attribute in gc."""
    if kind == "session":
        made = store.sessions.create(id="r-1", status="completed", owner_pid=None).id
    else:
        made = store.invocations.create(skill="review", id="r-1").id
    [row] = store.retention.candidates(kind, cutoff=1e11, after="", limit=5)
    query = "gc_session_candidates" if kind == "session" else "gc_invocation_candidates"
    raw = store.connector.read(store.sql(query), {"cutoff": 1e11, "after": "", "limit": 5})
    assert (set(raw[0]), row.as_dict(), row.id) == (
        set(GcCandidateRow._fields),
        dict(raw[0]),
        made,
    )
    with store.connector.write() as tx:
        table = f"{kind}s"
        tx.execute(f"UPDATE {table} SET pruned_at = 1.0 WHERE id = :id", {"id": made})
    [gone] = store.retention.unremoved_files(host="here", limit=5)
    raw = store.connector.read(store.sql("gc_unremoved_files"), {"host": "here", "limit": 5})
    assert set(raw[0]) == set(UnremovedFileRow._fields)
    assert (gone.as_dict(), gone.kind) == (dict(raw[0]), kind)


def test_a_history_event_row_names_each_column_transitions_since_selects(store: Store) -> None:
    """``HistoryEventRow`` names exactly what ``ui_transitions_since`` selects: a column
    the query gains fails here, not in the dashboard's event stream."""
    show = store.shows.create(topic="t")
    play = store.shows.create_play(show_id=show.id, name="p")
    raw = store.connector.read(store.sql("ui_transitions_since"), {"after": 0, "limit": 10})
    assert set(raw[0]) == set(HistoryEventRow._fields)
    rows = store.ui.transitions_since(0)
    assert [r.as_dict() for r in rows] == [dict(r) for r in raw]
    assert (rows[-1].entity_id, rows[-1].parent_id) == (play.id, show.id)


def test_wait_resolve_rows_name_each_column_their_queries_select(store: Store) -> None:
    """``WaitExactRow`` and ``WaitMatchRow`` name exactly what ``li wait``'s resolving
    queries select: a column either gains fails here."""
    made = store.sessions.create(id="run-42", owner_pid=None)
    raw = store.connector.read(
        store.sql("wait_resolve_exact"), {"ids": store.connector.bind_list(["run-42"])}
    )
    assert set(raw[0]) == set(WaitExactRow._fields)
    assert [r.as_dict() for r in store.waits.resolve_exact(["run-42"])] == [dict(r) for r in raw]
    raw = store.connector.read(store.sql("wait_resolve_partial"), id_fragment_params("-42", 5))
    assert set(raw[0]) == set(WaitMatchRow._fields)
    [match] = store.waits.match_ids("-42", limit=5)
    assert match.as_dict() == dict(raw[0])
    assert (match.kind, match.id, match.total) == ("session", made.id, 1)


def test_a_wait_fetch_row_names_each_column_wait_fetch_selects(store: Store) -> None:
    """``WaitFetchRow`` names exactly what ``wait_fetch`` selects for every wait kind: a
    column the query gains fails here, not in ``li wait``."""
    store.sessions.create(id="s-1", owner_pid=None)
    store.invocations.create(skill="review", id="i-1")
    ids = {"session": ["s-1"], "invocation": ["i-1"]}
    params = {
        f"{kind}_ids": store.connector.bind_list(ids.get(kind, ()))
        for kind in ("session", "invocation", "play", "schedule_run", "show")
    }
    raw = store.connector.read(store.sql("wait_fetch"), params)
    assert {r["kind"] for r in raw} == {"session", "invocation"}
    assert all(set(r) == set(WaitFetchRow._fields) for r in raw)
    assert [r.as_dict() for r in store.waits.fetch_rows(ids)] == [dict(r) for r in raw]


# Rows built from more than their columns, or coercing them: their own ``from_row``. Every
# other row takes ``TypedRow``'s, so a class cannot drift from the one way a row is read.
OWN_FROM_ROW = frozenset({WorkerRow, RunLeaseRow, RunMembershipRow})
ROW_CLASSES = sorted(
    (
        c
        for c in vars(row_classes).values()
        if isinstance(c, type) and issubclass(c, TypedRow) and c is not TypedRow
    ),
    key=lambda c: c.__name__,
)


def test_every_row_class_but_the_listed_reads_its_row_one_way() -> None:
    own = {c for c in ROW_CLASSES if "from_row" in vars(c)}
    assert own == OWN_FROM_ROW, "take TypedRow's from_row, or list why a row reads its own"
    others = {getattr(row_classes, n) for n in row_classes.__all__} - {TypedRow, *ROW_CLASSES}
    # Not one row of a query: a show with its plays counted, and two bundles of row lists.
    assert others == {ShowListRow, RunLineage, AttentionRows}, "make the row a TypedRow"


@pytest.mark.parametrize("row_class", sorted(set(ROW_CLASSES) - OWN_FROM_ROW, key=str))
def test_every_row_class_round_trips_its_dict(row_class: type[TypedRow]) -> None:
    """``from_row`` takes each field's column as it comes (no coercion, JSON left as the
    caller decoded it), ignores other columns, and ``as_dict`` gives the same mapping
    back; the row is immutable and holds no instance dict."""
    given = {name: [i] if i % 2 else f"v-{i}" for i, name in enumerate(row_class._fields)}
    row = row_class.from_row({**given, "not_a_column": 1})
    assert row.as_dict() == given
    assert type(row) is row_class
    assert row_class.from_row(row.as_dict()) == row
    with pytest.raises(KeyError):
        row_class.from_row({k: v for k, v in given.items() if k != row_class._fields[-1]})
    with pytest.raises(AttributeError):
        row.extra = 1  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        setattr(row, row_class._fields[0], "changed")


def test_a_row_with_a_default_field_keeps_it_and_refuses_one_before_a_required_one() -> None:
    worker = WorkerRow(
        id="w", host="h", pid=1, process_start_time=None, boot_id=None, started_at=1.0,
        heartbeat_at=2.0, stopped_at=None, concurrency=1, transport="t", lease_seconds=3.0,
    )  # fmt: skip
    assert (worker.running, worker.as_dict()["running"]) == ((), [])
    with pytest.raises(TypeError, match="without a default follows"):

        class Broken(TypedRow):
            first: int = 0
            second: int  # type: ignore[misc]  # what is refused


def _one_of_each_table(store: Store) -> None:
    """One row in each table a row class mirrors whole."""
    schedule = store.schedules.create(name="nightly", fields={"action_kind": "run"})
    store.schedules.create_run(action_kind="run", schedule_id=schedule.id)
    show = store.shows.create(topic="t")
    store.shows.create_play(show_id=show.id, name="p")
    team = store.teams.create_with_members(name="crew", members=["ann", "bob"])
    store.teams.send_message(team.id, sender="ann", recipient="bob", text="hi")
    made = store.sessions.create(owner_pid=None)
    store.sessions.append_evidence(made.id, [{"kind": "note", "text": "late"}])
    owner = {"owner_host": "h", "owner_pid": 1, "owner_start_time": 5.0}
    store.workers.register(owner=owner, concurrency=2, transport="poll", lease_seconds=30)


@pytest.mark.parametrize(
    ("table", "row_class"),
    [
        ("schedules", ScheduleRow),
        ("schedule_runs", ScheduleRunRow),
        ("shows", ShowRow),
        ("plays", PlayRow),
        ("teams", TeamRow),
        ("team_messages", TeamMessageRow),
        ("status_transitions", TransitionRow),
        ("admin_events", AdminEventRow),
        ("workers", WorkerRow),
    ],
)
def test_a_table_row_class_names_each_column_and_round_trips_the_backends_row(
    store: Store, table: str, row_class: type[TypedRow]
) -> None:
    """Each class that mirrors a table names its columns (``records.decode_row`` drops
    the history's ``seq``; a worker's ``running`` is derived), so a column the table gains
    fails here; the backend's own row, decoded, comes back from ``as_dict`` unchanged."""
    _one_of_each_table(store)
    raw = store.connector.read(f"SELECT * FROM {table}", {})
    decoded = decode_row(raw[0])
    derived = {"running"} if row_class is WorkerRow else set()
    assert set(decoded) == set(row_class._fields) - derived
    row = row_class.from_row(decoded)
    assert {k: v for k, v in row.as_dict().items() if k not in derived} == decoded
    assert row_class.from_row(row.as_dict()) == row


ROW_OF_ENTITY: dict[str, type[TypedRow]] = {
    "session": SessionRow,
    "invocation": InvocationRow,
    "schedule_run": ScheduleRunRow,
    "schedule": ScheduleRow,
    "show": ShowRow,
    "play": PlayRow,
    "team": TeamRow,
}


@pytest.mark.parametrize("entity_type", sorted(POLICIES))
def test_the_columns_an_entity_writes_are_columns_of_its_row_class(entity_type: str) -> None:
    """What a status write may set besides the status, and what ``update_fields`` may
    set, are columns its row class names: a write list cannot name a column the table
    (and so the row) does not have."""
    columns = set(ROW_OF_ENTITY[entity_type]._fields)
    assert POLICIES[entity_type].extra_fields <= columns
    assert UPDATABLE_FIELDS[entity_type] <= columns


def test_a_plays_writable_columns_are_declared_once() -> None:
    assert POLICIES["play"].extra_fields is PLAY_FIELDS
    assert UPDATABLE_FIELDS["play"] is PLAY_FIELDS

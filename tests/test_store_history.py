"""Creation, history, reads and the other writes of the store, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lirun.errors import ConflictError, NotFoundError, TransitionRejectedError, ValidationError
from lirun.lifecycle import POLICIES
from lirun.reasons import VALID_REASON_CODES, validate_reason
from lirun.store import Store
from support.storekit import assert_linear, create_entity, entity_types, reason_for

# A walk through each entity's statuses that ends terminal and then tries to leave.
WALKS: dict[str, list[str]] = {
    "session": ["completed", "completed"],
    "invocation": ["failed"],
    "schedule_run": ["waiting_dependency", "running", "retry_wait", "running", "completed"],
    "show": ["aborted"],
    "play": ["prepared", "running", "gated", "redoing", "running", "blocked"],
    "team": ["archived"],
    "schedule": ["disabled", "enabled", "deleted"],
}


@pytest.mark.parametrize("entity_type", sorted(POLICIES))
def test_creation_appends_one_system_history_row(store: Store, entity_type: str) -> None:
    eid = create_entity(store, entity_type)
    row = store.get_entity(entity_type, eid)
    policy = POLICIES[entity_type]
    assert row is not None
    assert row["status"] == policy.initial
    assert row["created_at"] == row["updated_at"]
    [first] = store.list_transitions(entity_type, eid)
    assert first.entity_type == entity_type
    assert first.entity_id == eid
    assert first.previous_status is None
    assert first.status == policy.initial
    assert first.source == "system"
    assert first.reason_code == row["status_reason_code"]
    assert first.reason_code in VALID_REASON_CODES
    validate_reason(first.reason_code, entity_type)
    assert first.created_at == row["created_at"]


@pytest.mark.parametrize(
    ("status", "reason"),
    [("completed", "run.completed.ok"), ("failed", "run.failed.exception")],
)
def test_a_session_created_terminal_has_a_fitting_reason(
    store: Store, status: str, reason: str
) -> None:
    row = store.sessions.create(status=status)
    assert (row.status, row.status_reason_code) == (status, reason)
    assert [t.status for t in store.list_transitions("session", row.id)] == [status]


@pytest.mark.parametrize("entity_type", sorted(POLICIES))
def test_history_is_linear(store: Store, entity_type: str) -> None:
    eid = create_entity(store, entity_type)
    for status in WALKS[entity_type]:
        reason = "legacy.imported" if entity_type == "play" else reason_for(entity_type, status)
        assert store.update_status(entity_type, eid, new_status=status, reason_code=reason)
        # A guarded write that loses, and a rejected one, must not disturb the history.
        assert not store.update_status(
            entity_type,
            eid,
            new_status=status,
            reason_code=reason,
            expected_statuses={POLICIES[entity_type].initial} - {status} or {None},
        )
    final = WALKS[entity_type][-1]
    other = next(s for s in sorted(POLICIES[entity_type].statuses) if s != final)
    with pytest.raises(TransitionRejectedError):
        store.update_status(entity_type, eid, new_status=other, reason_code="legacy.imported")
    history = assert_linear(store, entity_type, eid)
    assert [t.status for t in history] == [POLICIES[entity_type].initial, *WALKS[entity_type]]


def test_history_is_per_entity(store: Store) -> None:
    a, b = create_entity(store, "session"), create_entity(store, "session")
    store.update_status("session", a, new_status="failed", reason_code="run.failed.exception")
    assert len(store.list_transitions("session", a)) == 2
    assert len(store.list_transitions("session", b)) == 1
    assert store.list_transitions("invocation", a) == []
    assert store.list_transitions("session", "missing") == []


def test_create_session_stores_the_columns_it_is_given(store: Store, tmp_path: Path) -> None:
    row = store.sessions.create(
        run_id="r-1",
        branch_id="b-1",
        invocation_id="inv-1",
        artifacts_path=tmp_path / "artifacts",
        artifact_contract={"report": {"path": "report.md", "required": True}},
        cwd=str(tmp_path),
        run_dir=tmp_path / "runs" / "r-1",
        provider="claude",
        model="sonnet",
        command_json=["claude", "-p", "hi"],
        owner_pid=123,
        owner_start_time=1.5,
        owner_host="h",
        owner_boot_id="boot",
        lease_seconds=30.0,
        metadata_json={"k": "v"},
    )
    assert row.id == "r-1"  # id defaults to run_id
    assert row.artifacts_path == str(tmp_path / "artifacts")
    assert row.run_dir == str(tmp_path / "runs" / "r-1")
    assert row.artifact_contract_json == {"report": {"path": "report.md", "required": True}}
    assert row.command_json == ["claude", "-p", "hi"]
    assert row.metadata_json == {"k": "v"}
    assert (row.owner_pid, row.owner_host, row.lease_seconds) == (123, "h", 30.0)
    assert row.started_at is not None
    assert row.ended_at is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"colour": "red"}, "does not accept colour"),
        ({"status": "done"}, "status 'done' is not valid"),
        ({"id": 42}, "id must be a non-empty string"),
        ({"owner_pid": object()}, "owner_pid must be a string, number or None"),
        ({"metadata_json": {"x": {1}}}, "JSON-serializable"),
    ],
)
def test_create_session_rejects_bad_input(
    store: Store, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        store.sessions.create(**kwargs)
    assert store.sessions.list_recent() == []


@pytest.mark.parametrize(
    ("create", "message"),
    [
        (lambda s: s.invocations.create(skill=""), "skill must be a non-empty string"),
        (lambda s: s.shows.create(topic=None), "topic must be a non-empty string"),
        (lambda s: s.shows.create_play(show_id="s", name=3), "name must be a non-empty string"),
        (lambda s: s.teams.create(name=" "), "name must be a non-empty string"),
        (lambda s: s.schedules.create_run(action_kind="x", status="done"), "not valid"),
    ],
)
def test_other_creators_reject_bad_input(store: Store, create: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        create(store)


@pytest.mark.parametrize("entity_type", sorted(POLICIES))
def test_a_duplicate_id_is_a_conflict_and_changes_nothing(store: Store, entity_type: str) -> None:
    eid = create_entity(store, entity_type, "dup-1")
    before = (store.get_entity(entity_type, eid), store.list_transitions(entity_type, eid))
    with pytest.raises(ConflictError, match="already exists"):
        create_entity(store, entity_type, "dup-1")
    assert (store.get_entity(entity_type, eid), store.list_transitions(entity_type, eid)) == before


def test_get_entity_of_a_missing_id_is_none_and_unknown_type_is_an_error(store: Store) -> None:
    assert store.get_entity("session", "missing") is None
    with pytest.raises(ValidationError, match="unknown entity type 'widget'"):
        store.get_entity("widget", "x")
    with pytest.raises(ValidationError, match="unknown entity type"):
        store.list_transitions("widgets", "x")


def test_messages_are_numbered_and_bound_to_the_session(store: Store) -> None:
    sid = create_entity(store, "session")
    assert not store.sessions.has_assistant_text(sid)
    first = store.sessions.append_message(sid, role="user", content="hello")
    store.sessions.append_message(sid, role="assistant", content="   ")
    assert not store.sessions.has_assistant_text(sid)
    last = store.sessions.append_message(sid, role="assistant", content={"text": "done", "n": 1})
    assert store.sessions.has_assistant_text(sid)
    messages = store.sessions.list_messages(sid)
    assert [m.seq for m in messages] == [1, 2, 3]
    assert messages[2].content == '{"n":1,"text":"done"}'
    row = store.sessions.get(sid)
    assert row is not None
    assert (row.first_msg_id, row.last_msg_id) == (first.id, last.id)
    with pytest.raises(NotFoundError):
        store.sessions.append_message("missing", role="user", content="x")
    with pytest.raises(ValidationError, match="role"):
        store.sessions.append_message(sid, role="", content="x")
    assert len(store.sessions.list_messages(sid)) == 3


def test_update_fields_is_closed_and_bumps_the_version(store: Store) -> None:
    sid = create_entity(store, "session")
    version = store.get_entity("session", sid)["updated_at"]  # type: ignore[index]
    store.update_fields("sessions", sid, {"engine_session_uid": "u-1", "exit_code": 0})
    row = store.get_entity("session", sid)
    assert row is not None
    assert row["engine_session_uid"] == "u-1"
    assert row["updated_at"] > version
    with pytest.raises(ValidationError, match="does not accept status"):
        store.update_fields("session", sid, {"status": "completed"})
    with pytest.raises(ValidationError, match="does not accept run_id"):
        store.update_fields("session", sid, {"run_id": "other"})
    with pytest.raises(NotFoundError):
        store.update_fields("session", "missing", {"model": "m"})
    assert store.get_entity("session", sid) == row
    assert len(store.list_transitions("session", sid)) == 1


def test_list_sessions_and_running_sessions(store: Store) -> None:
    ids = [create_entity(store, "session") for _ in range(3)]
    store.update_status("session", ids[1], new_status="failed", reason_code="run.failed.exception")
    assert {r.id for r in store.sessions.list_running()} == {ids[0], ids[2]}
    assert [r.id for r in store.sessions.list_recent(status="failed")] == [ids[1]]
    assert len(store.sessions.list_recent(limit=2)) == 2
    assert store.sessions.list_recent(since=10**12) == []


def test_admin_events_filter_by_target(store: Store) -> None:
    a, b = create_entity(store, "session"), create_entity(store, "team")
    store.update_status("session", a, new_status="completed", reason_code="run.completed.ok")
    store.update_status("team", b, new_status="archived", reason_code="team.archived.user")
    for entity_type, eid, to in (("session", a, "failed"), ("team", b, "active")):
        with pytest.raises(TransitionRejectedError):
            store.update_status(entity_type, eid, new_status=to, reason_code="legacy.imported")
    assert [e.target_id for e in store.list_admin_events()] == [a, b]
    assert [e.target_type for e in store.list_admin_events(b)] == ["team"]
    assert store.list_admin_events("nobody") == []


def test_every_entity_type_round_trips(store: Store) -> None:
    for entity_type in entity_types():
        eid = create_entity(store, entity_type)
        assert store.get_entity(entity_type, eid)["id"] == eid  # type: ignore[index]


def test_a_row_written_then_gone_is_a_lost_connection_not_an_assertion(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit was acknowledged, then the database failed over to a server it had not
    reached (asynchronous replication): the row is not there to read back. The caller
    gets the typed error a lost database gives (one line, exit 2), not a traceback."""
    from lirun.errors import DatabaseConnectionLostError

    monkeypatch.setattr(store, "get_entity", lambda *_: None)
    with pytest.raises(DatabaseConnectionLostError, match="no longer holds it"):
        create_entity(store, "invocation")

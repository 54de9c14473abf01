"""update_status: every rule of design.md D5, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from lirun.errors import NotFoundError, TransitionRejectedError, ValidationError
from lirun.lifecycle import POLICIES
from lirun.store import Store, open_store
from support.storekit import create_entity, entity_types, raw_write, reason_for, snapshot


def finish(store: Store, sid: str, status: str = "completed", **kwargs: Any) -> bool:
    return store.update_status(
        "session", sid, new_status=status, reason_code=reason_for("session", status), **kwargs
    )


# -- aliases and validation ------------------------------------------------------------


@pytest.mark.parametrize("alias", ["session", "sessions", "run", "runs", " Sessions "])
def test_session_aliases_are_canonicalized(store: Store, alias: str) -> None:
    sid = create_entity(store, "session")
    assert store.update_status(alias, sid, new_status="failed", reason_code="run.failed.exception")
    assert store.get_entity(alias, sid)["status"] == "failed"  # type: ignore[index]
    history = store.list_transitions(alias, sid)
    assert [t.entity_type for t in history] == ["session", "session"]
    assert history == store.list_transitions("session", sid)


@pytest.mark.parametrize("entity_type", sorted(POLICIES))
def test_plural_table_names_are_aliases(store: Store, entity_type: str) -> None:
    eid = create_entity(store, entity_type)
    table = POLICIES[entity_type].table
    assert store.get_entity(table, eid) == store.get_entity(entity_type, eid)
    assert store.list_transitions(table, eid)[0].entity_type == entity_type


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"entity_type": "sesion"}, "unknown entity type 'sesion'"),
        ({"new_status": "done"}, "status 'done' is not valid for session"),
        ({"new_status": "merged"}, "status 'merged' is not valid for session"),
        ({"reason_code": "run.finished.ok"}, "'run.finished.ok' is not registered"),
        ({"reason_code": "play.merged.ok"}, "does not fit session"),
        ({"reason_code": "show.completed.ok"}, "does not fit session"),
        ({"source": "robot"}, "source 'robot' is not valid"),
        ({"expected_statuses": "running"}, "not a string"),
        ({"expected_statuses": {"runing"}}, "status 'runing' is not valid"),
        ({"evidence_refs": {"kind": "commit"}}, "list of dictionaries"),
        ({"evidence_refs": [{"kind": {1, 2}}]}, "JSON-serializable"),
        ({"metadata": {"when": object()}}, "JSON-serializable"),
        ({"metadata": ["not", "a", "dict"]}, "must be a dictionary"),
        ({"extra_fields": {"status": "completed"}}, "does not accept status"),
        ({"extra_fields": {"exit_code": [1]}}, "exit_code must be a string, number or None"),
        ({"override": True}, "override_actor and override_justification"),
        ({"override": True, "override_actor": "ops"}, "override_justification"),
        ({"override": True, "override_justification": "why"}, "override_actor"),
    ],
)
def test_invalid_input_is_a_validation_error_and_writes_nothing(
    store: Store, change: dict[str, Any], message: str
) -> None:
    sid = create_entity(store, "session")
    before = snapshot(store, "session", sid)
    call: dict[str, Any] = {
        "entity_type": "session",
        "new_status": "completed",
        "reason_code": "run.completed.ok",
        **change,
    }
    entity_type = call.pop("entity_type")
    with pytest.raises(ValidationError, match=message):
        store.update_status(entity_type, sid, **call)
    assert snapshot(store, "session", sid) == before


@pytest.mark.parametrize(
    ("entity_type", "reason"),
    [
        ("play", "run.failed.exception"),
        ("show", "play.merged.ok"),
        ("team", "show.completed.ok"),
        ("schedule_run", "session.orphaned.no_process"),
        ("invocation", "schedule.completed.ok"),
    ],
)
def test_reason_domain_must_fit_the_entity(store: Store, entity_type: str, reason: str) -> None:
    eid = create_entity(store, entity_type)
    status = sorted(POLICIES[entity_type].terminal)[0]
    before = snapshot(store, entity_type, eid)
    with pytest.raises(ValidationError, match="does not fit"):
        store.update_status(entity_type, eid, new_status=status, reason_code=reason)
    assert snapshot(store, entity_type, eid) == before


def test_legacy_imported_fits_every_entity(store: Store) -> None:
    for entity_type in entity_types():
        eid = create_entity(store, entity_type)
        status = sorted(POLICIES[entity_type].terminal)[0]
        assert store.update_status(
            entity_type, eid, new_status=status, reason_code="legacy.imported", source="system"
        )


def test_missing_row_is_a_lookup_error_and_writes_nothing(store: Store) -> None:
    create_entity(store, "session")
    events = store.list_admin_events()
    with pytest.raises(LookupError, match="no session with id 'nope'"):
        finish(store, "nope")
    with pytest.raises(NotFoundError):
        finish(store, "nope", expected_statuses={"running"})
    assert store.list_transitions("session", "nope") == []
    assert store.list_admin_events() == events
    assert store.get_entity("session", "nope") is None


# -- guards ------------------------------------------------------------------------------


def test_expected_statuses_mismatch_returns_false_and_writes_nothing(store: Store) -> None:
    sid = create_entity(store, "session")
    before = snapshot(store, "session", sid)
    assert finish(store, sid, expected_statuses={"completed", "failed"}) is False
    assert finish(store, sid, expected_statuses=set()) is False
    assert finish(store, sid, expected_statuses={None}) is False
    assert snapshot(store, "session", sid) == before
    assert finish(store, sid, expected_statuses=frozenset({"running", None})) is True
    assert store.get_entity("session", sid)["status"] == "completed"  # type: ignore[index]


def test_expected_none_matches_a_null_status(store: Store) -> None:
    sid = create_entity(store, "session")
    raw_write(store, "UPDATE sessions SET status = NULL WHERE id = :id", {"id": sid})
    assert store.get_entity("session", sid)["status"] is None  # type: ignore[index]
    before = snapshot(store, "session", sid)
    assert finish(store, sid, expected_statuses={"running"}) is False
    assert snapshot(store, "session", sid) == before
    assert finish(store, sid, "failed", expected_statuses={None}) is True
    row = store.get_entity("session", sid)
    assert row is not None
    assert row["status"] == "failed"
    last = store.list_transitions("session", sid)[-1]
    assert (last.previous_status, last.status) == (None, "failed")


def test_a_null_status_is_not_matched_by_a_status_only_guard(store: Store) -> None:
    """The compare-and-set in SQL is NULL-safe: NULL equals None only, not every status."""
    sid = create_entity(store, "session")
    raw_write(store, "UPDATE sessions SET status = NULL WHERE id = :id", {"id": sid})
    assert finish(store, sid) is True  # no guard: a NULL row may be written
    assert store.get_entity("session", sid)["status"] == "completed"  # type: ignore[index]


def test_expected_updated_at_guards_on_the_version(store: Store) -> None:
    sid = create_entity(store, "session")
    version = store.get_entity("session", sid)["updated_at"]  # type: ignore[index]
    store.sessions.heartbeat(sid)  # touch=False: not a new version
    store.update_fields("session", sid, {"model": "m1"})  # a new version
    before = snapshot(store, "session", sid)
    assert finish(store, sid, expected_updated_at=version) is False
    assert snapshot(store, "session", sid) == before
    current = before["row"]["updated_at"]
    assert current > version
    assert finish(store, sid, expected_updated_at=current) is True
    assert store.get_entity("session", sid)["updated_at"] > current  # type: ignore[index]


def test_both_guards_must_match(store: Store) -> None:
    sid = create_entity(store, "session")
    version = store.get_entity("session", sid)["updated_at"]  # type: ignore[index]
    assert finish(store, sid, expected_statuses={"failed"}, expected_updated_at=version) is False
    assert finish(store, sid, expected_statuses={"running"}, expected_updated_at=version + 1) is (
        False
    )
    assert finish(store, sid, expected_statuses={"running"}, expected_updated_at=version)


# -- terminal immutability and override --------------------------------------------------------


def test_leaving_a_terminal_status_is_rejected_audited_and_committed(
    store: Store, db_url: str
) -> None:
    sid = create_entity(store, "session")
    assert finish(store, sid, "completed")
    before = snapshot(store, "session", sid)
    with pytest.raises(TransitionRejectedError) as caught:
        finish(store, sid, "failed", actor="teardown", source="executor")
    err = caught.value
    assert isinstance(err, RuntimeError)
    assert (err.entity_type, err.entity_id) == ("session", sid)
    assert (err.previous_status, err.attempted_status) == ("completed", "failed")
    assert "override" in str(err)
    # Committed: a separate connection sees the audit row.
    other = open_store(db_url)
    try:
        events = other.list_admin_events(sid)
    finally:
        other.close()
    assert [e.event_type for e in events] == ["status_transition_rejected"]
    assert events[0].target_type == "session"
    assert events[0].actor == "teardown"
    assert events[0].payload["previous_status"] == "completed"
    assert events[0].payload["attempted_status"] == "failed"
    after = snapshot(store, "session", sid)
    assert after["row"] == before["row"]
    assert after["transitions"] == before["transitions"]


@pytest.mark.parametrize("entity_type", sorted(POLICIES))
def test_every_terminal_status_of_every_entity_is_immutable(store: Store, entity_type: str) -> None:
    policy = POLICIES[entity_type]
    others = sorted(policy.statuses)
    for terminal in sorted(policy.terminal):
        eid = create_entity(store, entity_type)
        store.update_status(
            entity_type, eid, new_status=terminal, reason_code="legacy.imported", source="system"
        )
        target = next(s for s in others if s != terminal)
        with pytest.raises(TransitionRejectedError):
            store.update_status(
                entity_type, eid, new_status=target, reason_code="legacy.imported", source="system"
            )
        assert store.get_entity(entity_type, eid)["status"] == terminal  # type: ignore[index]


def test_expected_statuses_mismatch_wins_over_rejection(store: Store) -> None:
    """A guarded writer that lost the race gets False, not an error and no audit row."""
    sid = create_entity(store, "session")
    finish(store, sid, "completed")
    assert finish(store, sid, "failed", expected_statuses={"running"}) is False
    assert store.list_admin_events(sid) == []


def test_same_status_write_on_a_terminal_row_appends_history(store: Store) -> None:
    sid = create_entity(store, "session")
    finish(store, sid, "failed")
    assert store.update_status(
        "session",
        sid,
        new_status="failed",
        reason_code="run.failed.missing_artifact",
        reason_summary="report.md missing",
        evidence_refs=[{"kind": "artifact", "path": "report.md"}],
        expected_statuses={"failed"},
    )
    row = store.get_entity("session", sid)
    assert row is not None
    assert row["status_reason_code"] == "run.failed.missing_artifact"
    assert row["status_reason_summary"] == "report.md missing"
    assert row["status_evidence_refs"] == [{"kind": "artifact", "path": "report.md"}]
    history = store.list_transitions("session", sid)
    assert [(t.previous_status, t.status) for t in history] == [
        (None, "running"),
        ("running", "failed"),
        ("failed", "failed"),
    ]
    assert store.list_admin_events(sid) == []


def test_override_repairs_a_terminal_row_with_an_audit_row(store: Store) -> None:
    sid = create_entity(store, "session")
    finish(store, sid, "failed")
    assert store.update_status(
        "session",
        sid,
        new_status="completed",
        reason_code="run.completed.admin",
        source="admin",
        actor="alice",
        override=True,
        override_actor="alice",
        override_justification="artifact was written to the wrong path; verified by hand",
    )
    assert store.get_entity("session", sid)["status"] == "completed"  # type: ignore[index]
    [event] = store.list_admin_events(sid)
    assert event.event_type == "status_transition_override"
    assert event.actor == "alice"
    assert (event.justification or "").startswith("artifact was written")
    assert event.payload["previous_status"] == "failed"
    assert event.payload["new_status"] == "completed"
    last = store.list_transitions("session", sid)[-1]
    assert (last.previous_status, last.status, last.source) == (
        "failed",
        "completed",
        "admin",
    )
    assert last.created_at >= event.created_at


def test_override_event_and_status_share_one_transaction(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = create_entity(store, "session")
    finish(store, sid, "failed")
    before = snapshot(store, "session", sid)

    def boom(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(store, "append_transition", boom)
    with pytest.raises(RuntimeError, match="disk on fire"):
        store.update_status(
            "session",
            sid,
            new_status="completed",
            reason_code="run.completed.admin",
            override=True,
            override_actor="alice",
            override_justification="checked",
        )
    assert snapshot(store, "session", sid) == before


def test_an_update_that_matches_no_row_rolls_back_the_override_audit(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defence in depth: if the SQL compare-and-set ever matches nothing, nothing commits."""
    sid = create_entity(store, "session")
    finish(store, sid, "failed")
    before = snapshot(store, "session", sid)
    real_sql = store.sql

    def cas_matches_nothing(name: str, **slots: str) -> str:
        text = real_sql(name, **slots)
        return f"{text} AND 1 = 0" if name == "cas_update_status" else text

    monkeypatch.setattr(store, "sql", cas_matches_nothing)
    assert (
        store.update_status(
            "session",
            sid,
            new_status="completed",
            reason_code="run.completed.admin",
            override=True,
            override_actor="alice",
            override_justification="checked",
        )
        is False
    )
    assert snapshot(store, "session", sid) == before


# -- extra fields and atomicity -----------------------------------------------------------


def test_extra_fields_commit_with_the_status(store: Store) -> None:
    sid = create_entity(store, "session")
    assert finish(
        store,
        sid,
        "timed_out",
        extra_fields={
            "ended_at": 1234.5,
            "exit_code": 124,
            "engine_session_uid": "abc",
            "artifact_verification_json": {"ok": False, "missing": ["report"]},
        },
    )
    row = store.get_entity("session", sid)
    assert row is not None
    assert (row["ended_at"], row["exit_code"], row["engine_session_uid"]) == (1234.5, 124, "abc")
    assert row["artifact_verification_json"] == {"ok": False, "missing": ["report"]}


@pytest.mark.parametrize("entity_type", sorted(POLICIES))
def test_extra_fields_are_closed_per_entity(store: Store, entity_type: str) -> None:
    eid = create_entity(store, entity_type)
    policy = POLICIES[entity_type]
    status = sorted(policy.terminal)[0]
    every_other = set().union(*(p.extra_fields for p in POLICIES.values())) - policy.extra_fields
    before = snapshot(store, entity_type, eid)
    for key in sorted(every_other | {"status", "id", "created_at", "bogus"}):
        with pytest.raises(ValidationError, match=f"does not accept {key}"):
            store.update_status(
                entity_type,
                eid,
                new_status=status,
                reason_code="legacy.imported",
                extra_fields={key: 1},
            )
    assert snapshot(store, entity_type, eid) == before
    allowed = sorted(policy.extra_fields)[0]
    value: Any = 7 if allowed in ("exit_code", "attempt") else "x"
    if allowed.endswith("_at"):
        value = 99.5
    assert store.update_status(
        entity_type,
        eid,
        new_status=status,
        reason_code="legacy.imported",
        extra_fields={allowed: value},
    )
    assert store.get_entity(entity_type, eid)[allowed] == value  # type: ignore[index]


def test_a_failure_after_the_update_leaves_nothing_behind(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Status, reason, evidence, extra fields and history roll back together."""
    sid = create_entity(store, "session")
    before = snapshot(store, "session", sid)
    real = store.append_transition
    calls: list[str] = []

    def fail_after_update(tx: Any, *args: Any, **kwargs: Any) -> None:
        row = tx.query("SELECT status, exit_code FROM sessions WHERE id = :id", {"id": sid})
        calls.append(row[0]["status"])
        real(tx, *args, **kwargs)
        raise RuntimeError("crash between history and commit")

    monkeypatch.setattr(store, "append_transition", fail_after_update)
    with pytest.raises(RuntimeError, match="crash between"):
        finish(
            store,
            sid,
            "failed",
            evidence_refs=[{"kind": "log"}],
            extra_fields={"exit_code": 1, "ended_at": 5.0},
        )
    assert calls == ["failed"]  # the UPDATE had been applied inside the transaction
    assert snapshot(store, "session", sid) == before


def test_evidence_metadata_source_and_actor_are_recorded(store: Store) -> None:
    sid = create_entity(store, "session")
    evidence: list[dict[str, Any]] = [
        {"kind": "commit", "ref": "abc123", "label": "head"},
        {"kind": "log", "id": 3},
    ]
    assert store.update_status(
        "session",
        sid,
        new_status="completed",
        reason_code="run.completed.ok",
        reason_summary="2 commits",
        evidence_refs=evidence,
        source="agent",
        actor="worker-3",
        metadata={"attempt": 2, "nested": {"a": [1, None]}},
    )
    row = store.get_entity("session", sid)
    assert row is not None
    assert row["status_evidence_refs"] == evidence
    last = store.list_transitions("session", sid)[-1]
    assert last.evidence_refs == evidence
    assert last.metadata == {"attempt": 2, "nested": {"a": [1, None]}}
    assert (last.source, last.actor, last.reason_summary) == (
        "agent",
        "worker-3",
        "2 commits",
    )
    assert last.created_at == row["updated_at"]


def test_non_terminal_moves_are_free(store: Store) -> None:
    pid = create_entity(store, "play")
    for status in ("prepared", "running", "gated", "redoing", "running", "gated", "merged"):
        reason = "play.running.started" if status == "running" else reason_for("play", status)
        assert store.update_status("play", pid, new_status=status, reason_code=reason)
    play = store.shows.get_play(pid)
    assert play is not None
    assert play.status == "merged"

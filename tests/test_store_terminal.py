"""The terminal write owns ``ended_at`` and ``exit_code`` (one rule, keyed by the entity
policy), on SQLite and PostgreSQL."""

from __future__ import annotations

import subprocess
import time
from typing import Any

import pytest

from lirun.errors import ValidationError
from lirun.lifecycle import EXIT_CODE_BY_STATUS, POLICIES
from lirun.store import Store
from lirun.wait.api import format_wait_line
from lirun.wait.outcome import project
from lirun.wait.resolve import resolve_targets
from support.cli import li_command
from support.storekit import create_entity, reason_for

ADMIN = {"override": True, "override_actor": "alice", "override_justification": "checked"}


def set_status(store: Store, entity_type: str, eid: str, status: str, **kwargs: Any) -> bool:
    return store.update_status(
        entity_type, eid, new_status=status, reason_code=reason_for(entity_type, status), **kwargs
    )


def wait_line(store: Store, eid: str) -> str:
    """The `li wait` line of ``eid`` as the library computes it."""
    [target] = resolve_targets(store, [eid])
    assert target.kind is not None
    assert target.id is not None
    [row] = store.waits.fetch_rows({target.kind: [target.id]})
    return format_wait_line(project(target, row))


@pytest.mark.parametrize("status", sorted(EXIT_CODE_BY_STATUS))
@pytest.mark.parametrize("entity_type", ["session", "invocation"])
def test_a_terminal_write_sets_ended_at_and_the_status_exit_code(
    store: Store, entity_type: str, status: str
) -> None:
    eid = create_entity(store, entity_type)
    before = time.time()
    assert set_status(store, entity_type, eid, status)
    row = store.get_entity(entity_type, eid)
    assert row is not None
    assert row["exit_code"] == EXIT_CODE_BY_STATUS[status]
    assert before <= row["ended_at"] <= time.time()
    assert row["ended_at"] == row["updated_at"]  # the same instant, one transaction


def test_a_library_override_failed_to_completed_gives_exit_code_0_on_the_wait_line(
    store: Store,
) -> None:
    sid = create_entity(store, "session", "run-1")
    assert set_status(store, "session", sid, "failed")
    assert wait_line(store, sid).endswith("\texit_code=1")
    first_end = store.get_entity("session", sid)["ended_at"]  # type: ignore[index]
    assert set_status(store, "session", sid, "completed", source="admin", **ADMIN)
    row = store.get_entity("session", sid)
    assert row is not None
    assert (row["status"], row["exit_code"]) == ("completed", 0)
    assert row["ended_at"] > first_end  # an override to another terminal status ends anew
    assert "\tstatus=completed\t" in wait_line(store, sid)
    assert wait_line(store, sid).endswith("\texit_code=0")


def test_li_wait_prints_the_overridden_exit_code(store: Store, li_env: dict[str, str]) -> None:
    sid = create_entity(store, "invocation", "inv-1")
    assert set_status(store, "invocation", sid, "failed")
    assert set_status(store, "invocation", sid, "completed", source="admin", **ADMIN)
    done = subprocess.run(
        li_command("wait", sid), env=li_env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("inv-1\tstatus=completed\t")
    assert done.stdout.rstrip("\n").endswith("\texit_code=0")


def test_a_caller_given_ended_at_is_kept(store: Store) -> None:
    sid = create_entity(store, "session")
    assert set_status(store, "session", sid, "timed_out", extra_fields={"ended_at": 1234.5})
    row = store.get_entity("session", sid)
    assert row is not None
    assert (row["ended_at"], row["exit_code"]) == (1234.5, 124)


def test_rewriting_the_same_terminal_status_keeps_when_it_ended(store: Store) -> None:
    sid = create_entity(store, "session")
    assert set_status(store, "session", sid, "failed", extra_fields={"ended_at": 10.0})
    assert set_status(store, "session", sid, "failed")
    row = store.get_entity("session", sid)
    assert row is not None
    assert (row["ended_at"], row["exit_code"]) == (10.0, 1)


def test_a_non_terminal_write_sets_neither(store: Store) -> None:
    rid = create_entity(store, "schedule_run")
    assert set_status(store, "schedule_run", rid, "running")
    row = store.get_entity("schedule_run", rid)
    assert row is not None
    assert (row["ended_at"], row["exit_code"]) == (None, None)


@pytest.mark.parametrize(
    ("entity_type", "status"),
    [("schedule_run", "skipped"), ("show", "completed"), ("play", "blocked")],
)
def test_entities_without_a_status_exit_code_get_ended_at_only(
    store: Store, entity_type: str, status: str
) -> None:
    eid = create_entity(store, entity_type)
    assert set_status(store, entity_type, eid, status)
    row = store.get_entity(entity_type, eid)
    assert row is not None
    assert row["ended_at"] == row["updated_at"]
    assert row.get("exit_code") is None  # a schedule run's exit code is its action's own


def test_a_schedule_run_keeps_the_exit_code_its_caller_gives(store: Store) -> None:
    rid = create_entity(store, "schedule_run")
    assert set_status(store, "schedule_run", rid, "failed", extra_fields={"exit_code": 3})
    assert store.get_entity("schedule_run", rid)["exit_code"] == 3  # type: ignore[index]


def test_an_exit_code_that_contradicts_the_status_is_refused(store: Store) -> None:
    sid = create_entity(store, "session")
    with pytest.raises(ValidationError, match="exit_code 1 contradicts status 'completed'"):
        set_status(store, "session", sid, "completed", extra_fields={"exit_code": 1})
    assert store.get_entity("session", sid)["status"] == "running"  # type: ignore[index]
    assert set_status(store, "session", sid, "completed", extra_fields={"exit_code": 0})


def test_the_policy_names_the_terminal_columns() -> None:
    with_exit = {k for k, p in POLICIES.items() if p.exit_code_by_status}
    assert with_exit == {"session", "invocation"}
    for policy in POLICIES.values():
        assert policy.ended_column is None or policy.ended_column in policy.extra_fields
        if policy.exit_code_by_status:
            assert policy.terminal <= set(EXIT_CODE_BY_STATUS)


def test_evidence_added_after_the_outcome_is_audited_and_leaves_the_status_as_written(
    store: Store,
) -> None:
    sid = create_entity(store, "session", "run-late")
    first = {"kind": "killed_descendants", "processes": [{"pid": 7}], "signal": "SIGTERM"}
    assert set_status(store, "session", sid, "completed", evidence_refs=[first])
    before = store.get_entity("session", sid)
    assert before is not None
    late = {"kind": "killed_descendants", "processes": [{"pid": 7}], "signal": "SIGKILL"}
    store.sessions.append_evidence(sid, [late], source="leftovers")
    after = store.get_entity("session", sid)
    assert after is not None
    assert after["status_evidence_refs"] == [first, late]
    for column in ("status", "status_reason_code", "ended_at", "exit_code"):
        assert after[column] == before[column]
    assert after["updated_at"] > before["updated_at"]
    [history] = [t for t in store.list_transitions("session", sid) if t.status == "completed"]
    assert history.evidence_refs == [first]  # the transition stays as it was written
    [event] = [e for e in store.list_admin_events(sid) if e.event_type == "evidence_appended"]
    assert event.payload == {"status": "completed", "source": "leftovers", "evidence": [late]}
    with pytest.raises(ValidationError):
        store.sessions.append_evidence(sid, ["not a dict"])  # type: ignore[list-item]

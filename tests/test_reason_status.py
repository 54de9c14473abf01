"""Each reason code accompanies only the statuses it describes (issue 9, item 4).

The rule: a code fits the status its middle segment names, unless ``reasons._STATUSES``
lists its statuses (the exceptions). ``update_status`` and ``li override`` refuse a code
that does not fit the target status and name the codes that do.
"""

from __future__ import annotations

import subprocess

import pytest

from lirun.errors import ValidationError
from lirun.lifecycle import POLICIES
from lirun.reasons import (
    LEGACY_IMPORTED,
    VALID_REASON_CODES,
    codes_for,
    creation_reason,
    reason_fits_status,
    resolve_run_reason,
    validate_reason,
)
from lirun.store import Store
from support.cli import li_command
from support.storekit import REASON_FOR, create_entity, row_of

EXCEPTIONS = {
    "run.cancelled.sigint": {"aborted", "cancelled"},
    "session.orphaned.no_process": {"failed"},
    "session.stale.no_heartbeat": {"failed"},
    "show.blocked.no_ready_plays": {"active"},
    "schedule.budget.exhausted": {"skipped"},
    # a poll's outcome is a schedule's last_poll_reason, never a status of its own
    "schedule.poll.ok": {"skipped"},
    "schedule.poll.failed_exit": {"skipped"},
    "schedule.poll.timed_out": {"skipped"},
    "schedule.poll.bad_output": {"skipped"},
}
ALL_STATUSES = sorted(set().union(*(p.statuses for p in POLICIES.values())))


@pytest.mark.parametrize("code", sorted(VALID_REASON_CODES - {LEGACY_IMPORTED}))
def test_a_code_fits_its_middle_segment_or_its_explicit_list(code: str) -> None:
    expected = EXCEPTIONS.get(code, {code.split(".")[1]})
    fits = {s for s in ALL_STATUSES if reason_fits_status(code, s)}
    assert fits == expected


def test_legacy_imported_fits_any_status() -> None:
    assert all(reason_fits_status(LEGACY_IMPORTED, s) for s in ALL_STATUSES)
    validate_reason(LEGACY_IMPORTED, "play", "merged")


@pytest.mark.parametrize(
    ("code", "entity", "status"),
    [
        ("run.completed.admin", "session", "failed"),
        ("run.failed.admin", "session", "completed"),
        ("run.cancelled.sigterm", "session", "aborted"),
        ("session.orphaned.no_process", "session", "completed"),
        ("run.completed_empty.no_evidence", "schedule_run", "completed"),
        ("play.merged.ok", "play", "gated"),
    ],
)
def test_validate_reason_refuses_a_code_that_does_not_fit_the_status(
    code: str, entity: str, status: str
) -> None:
    with pytest.raises(ValidationError, match="does not fit status") as info:
        validate_reason(code, entity, status)
    for fitting in codes_for(entity, status):
        assert fitting in str(info.value)


def test_codes_for_lists_the_exceptions_where_they_fit() -> None:
    assert "session.orphaned.no_process" in codes_for("session", "failed")
    assert codes_for("session", "aborted") == ["run.cancelled.sigint"]
    assert "run.failed.admin" in codes_for("session", "failed")
    assert "run.completed.admin" not in codes_for("session", "failed")


@pytest.mark.parametrize("entity_type", sorted(POLICIES))
def test_creation_and_teardown_reasons_fit_their_status(entity_type: str) -> None:
    for status in sorted(POLICIES[entity_type].statuses):
        validate_reason(creation_reason(entity_type, status), entity_type, status)
    if entity_type in ("session", "invocation"):
        for status in POLICIES[entity_type].statuses:
            validate_reason(resolve_run_reason(status), entity_type, status)
        validate_reason(resolve_run_reason("cancelled", signal_name="SIGTERM"), "session",
                        "cancelled")  # fmt: skip


def test_storekit_reasons_fit() -> None:
    for (entity, status), code in REASON_FOR.items():
        validate_reason(code, entity, status)


def test_update_status_refuses_a_misfit_reason_and_writes_nothing(store: Store) -> None:
    ident = create_entity(store, "session")
    before = (store.get_entity("session", ident), store.list_transitions("session", ident))
    with pytest.raises(ValidationError, match=r"run\.failed\.admin"):
        store.update_status(
            "session", ident, new_status="failed", reason_code="run.completed.admin"
        )
    assert (store.get_entity("session", ident), store.list_transitions("session", ident)) == before
    assert store.update_status(
        "session", ident, new_status="failed", reason_code="session.orphaned.no_process"
    )
    assert row_of(store, "session", ident)["status_reason_code"] == "session.orphaned.no_process"


def test_initial_rows_carry_a_fitting_reason(store: Store) -> None:
    for entity in sorted(POLICIES):
        ident = create_entity(store, entity)
        row = store.get_entity(entity, ident)
        assert row is not None
        validate_reason(row["status_reason_code"], entity, row["status"])
    aborted = store.sessions.create(status="aborted")
    assert aborted.status_reason_code == "run.cancelled.sigint"


def test_li_override_refuses_a_reason_for_another_status(
    store: Store, li_env: dict[str, str]
) -> None:
    store.sessions.create(id="run-1")
    assert store.update_status(
        "session", "run-1", new_status="completed", reason_code="run.completed.ok"
    )
    before = (store.get_entity("session", "run-1"), store.list_admin_events("run-1"))
    argv = ["override", "session", "run-1", "--to", "failed", "--actor", "a"]
    argv += ["--justification", "j", "--reason"]
    proc = subprocess.run(
        li_command(*argv, "run.completed.admin"), env=li_env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "does not fit status 'failed'" in proc.stderr
    assert "run.failed.admin" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert (store.get_entity("session", "run-1"), store.list_admin_events("run-1")) == before
    ok = subprocess.run(
        li_command(*argv, "run.failed.admin"), env=li_env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr

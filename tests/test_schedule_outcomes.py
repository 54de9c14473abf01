"""The run path's pure decisions (lirun.schedules.outcomes), table-tested."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lirun.schedules.outcomes import (
    StartFacts,
    notify_env,
    run_outcome,
    should_retry,
    start_refusal,
)
from lirun.store.rows import ScheduleRunRow


@pytest.mark.parametrize(
    ("status", "reason", "stopping", "expected"),
    [
        ("completed", "run.completed.ok", False, ("completed", "schedule.completed.ok")),
        ("failed", "run.failed.exit_nonzero", False, ("failed", "run.failed.exit_nonzero")),
        (
            "failed",
            "run.failed.provider_retryable",
            False,
            ("failed", "run.failed.provider_retryable"),
        ),
        ("failed", "show.aborted.user", False, ("failed", "schedule.failed.action")),
        (
            "failed",
            "session.failed.lease_lapsed",
            False,
            ("failed", "schedule.failed.lease_lapsed"),
        ),
        ("failed", None, False, ("failed", "schedule.failed.action")),
        (
            "completed_empty",
            "run.completed_empty.no_evidence",
            False,
            ("failed", "schedule.failed.completed_empty"),
        ),
        ("timed_out", "run.timed_out.idle", False, ("timed_out", "run.timed_out.idle")),
        ("timed_out", None, False, ("timed_out", "schedule.timed_out.deadline")),
        ("cancelled", "run.cancelled.sigterm", False, ("cancelled", "run.cancelled.sigterm")),
        ("aborted", "run.cancelled.sigint", False, ("cancelled", "run.cancelled.sigint")),
        (
            "cancelled",
            "run.cancelled.sigterm",
            True,
            ("cancelled", "schedule.cancelled.worker_stopped"),
        ),
    ],
)
def test_the_run_status_follows_the_execution(
    status: str, reason: str | None, stopping: bool, expected: tuple[str, str]
) -> None:
    stopped_by = "schedule.cancelled.worker_stopped" if stopping else None
    outcome = run_outcome(status, reason, stopped_by=stopped_by)
    assert (outcome.status, outcome.reason_code) == expected
    if status == "completed_empty":
        assert reason is not None
        assert reason in outcome.summary  # the execution's reason is kept


def facts(tmp_path: Path, **changes: Any) -> StartFacts:
    base = StartFacts(
        now=1000.0, queued_at=990.0, start_deadline=60.0, cwd=str(tmp_path), cwd_exists=True,
        allow_roots=(),
    )  # fmt: skip
    return base._replace(**changes)


def test_start_refusals(tmp_path: Path) -> None:
    assert start_refusal(facts(tmp_path)) is None
    code, summary = start_refusal(facts(tmp_path, queued_at=900.0)) or ("", "")
    assert code == "schedule.failed.start_deadline"
    assert "100s ago" in summary
    other = tmp_path / "other"
    other.mkdir()
    assert start_refusal(facts(tmp_path, allow_roots=(str(tmp_path),))) is None
    inside = facts(tmp_path, cwd=str(other), allow_roots=(str(tmp_path),))
    assert start_refusal(inside) is None
    sibling = facts(tmp_path, allow_roots=(str(other),))
    assert (start_refusal(sibling) or ("",))[0] == "schedule.failed.cwd_not_allowed"
    prefix = facts(tmp_path, cwd=str(tmp_path) + "x", allow_roots=(str(tmp_path),))
    assert (start_refusal(prefix) or ("",))[0] == "schedule.failed.cwd_not_allowed"
    gone = facts(tmp_path, cwd_exists=False)
    assert (start_refusal(gone) or ("",))[0] == "schedule.failed.file_missing"
    missing = facts(tmp_path, file="/x/f.yaml", file_sha256=None, snapshot_sha256="a" * 64)
    assert (start_refusal(missing) or ("",))[0] == "schedule.failed.file_missing"
    changed = facts(tmp_path, file="/x/f.yaml", file_sha256="b" * 64, snapshot_sha256="a" * 64)
    assert (start_refusal(changed) or ("",))[0] == "schedule.failed.file_changed"
    same = facts(tmp_path, file="/x/f.yaml", file_sha256="a" * 64, snapshot_sha256="a" * 64)
    assert start_refusal(same) is None


@pytest.mark.parametrize(
    ("status", "reason", "attempt", "retries", "expected"),
    [
        ("failed", "schedule.failed.lease_lapsed", 1, 1, True),
        ("failed", "run.failed.provider_retryable", 2, 2, True),
        ("failed", "run.failed.provider_retryable", 3, 2, False),
        ("failed", "run.failed.exit_nonzero", 1, 3, False),
        ("failed", "schedule.failed.lease_lapsed", 1, 0, False),
        ("timed_out", "run.timed_out.deadline", 1, 3, False),
        # by the failure's class: what a retry may fix, never a refused login or request
        ("failed", "run.failed.provider_rate_limit", 1, 1, True),
        ("failed", "run.failed.provider_overloaded", 1, 1, True),
        ("failed", "run.failed.provider_server_error", 1, 1, True),
        ("failed", "run.failed.provider_network", 1, 1, True),
        ("failed", "run.failed.provider_stalled", 1, 1, True),
        ("timed_out", "run.timed_out.provider_retrying", 1, 1, True),
        ("timed_out", "run.timed_out.provider_retrying", 2, 1, False),
        ("failed", "run.failed.provider_auth", 1, 3, False),
        ("failed", "run.failed.provider_rejected", 1, 3, False),
        ("failed", "run.failed.provider_nonretryable", 1, 3, False),
        ("cancelled", "run.failed.provider_rate_limit", 1, 3, False),
    ],
)
def test_retries(status: str, reason: str, attempt: int, retries: int, expected: bool) -> None:
    assert should_retry(status, reason, attempt, retries) is expected


def test_notify_env_carries_the_wait_line() -> None:
    given = {
        "id": "r1", "status": "failed", "status_reason_code": "run.failed.exit_nonzero",
        "status_reason_summary": "exit 3", "exit_code": 3,
    }  # fmt: skip
    run = ScheduleRunRow.from_row({**dict.fromkeys(ScheduleRunRow._fields), **given})
    env = notify_env(run, schedule="nightly", artifact_dir="/a")
    assert env["LIRUN_WAIT_LINE"] == (
        "r1\tstatus=failed\treason=run.failed.exit_nonzero\tartifact_dir=/a\texit_code=3"
    )
    assert (env["LIRUN_STATUS"], env["LIRUN_EXIT_CODE"], env["LIRUN_SUCCESS"]) == (
        "failed",
        "3",
        "0",
    )
    assert env["LIRUN_SCHEDULE"] == "nightly"
    assert env["LIRUN_REASON_SUMMARY"] == "exit 3"


def test_every_retryable_run_reason_is_retried_and_no_other_provider_class() -> None:
    from lirun.provider_errors import FAILURE_CLASSES
    from lirun.reasons import RETRYABLE_RUN_REASONS

    for code in RETRYABLE_RUN_REASONS:
        status = "timed_out" if code.startswith("run.timed_out.") else "failed"
        assert should_retry(status, code, 1, 1), code
    for failure in FAILURE_CLASSES.values():
        assert should_retry("failed", failure.reason_code, 1, 1) is failure.retryable

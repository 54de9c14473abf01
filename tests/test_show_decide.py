"""The show engine's decisions, as tables (no database, no git)."""

from __future__ import annotations

import pytest

from lirun.shows.decide import (
    FailureKind,
    FinalGate,
    PlayFacts,
    abort_target,
    after_failure,
    after_run,
    gate_verdict,
    ready_plays,
    show_next,
    waiting_plays,
)


def P(name: str, status: str, *deps: str) -> PlayFacts:
    return PlayFacts(name, status, tuple(deps))


@pytest.mark.parametrize(
    ("plays", "ready", "waiting"),
    [
        ([P("a", "pending"), P("b", "pending")], ["a", "b"], []),
        ([P("a", "pending"), P("b", "pending", "a")], ["a"], ["b"]),
        ([P("a", "running"), P("b", "pending", "a")], [], ["b"]),
        ([P("a", "merged"), P("b", "pending", "a")], ["b"], []),
        ([P("a", "escalated"), P("b", "pending", "a"), P("c", "pending")], ["c"], ["b"]),
        ([P("a", "merged"), P("b", "gated", "a")], [], []),
        ([P("a", "merged"), P("b", "merged"), P("c", "pending", "a", "b")], ["c"], []),
    ],
)
def test_ready_and_waiting(plays: list[PlayFacts], ready: list[str], waiting: list[str]) -> None:
    assert ready_plays(plays) == ready
    assert waiting_plays(plays) == waiting


@pytest.mark.parametrize(
    ("kind", "attempt", "attempts", "status", "reason"),
    [
        ("gate", 1, 2, "redoing", "play.redoing.gate_failed"),
        ("gate", 2, 2, "escalated", "play.escalated.gate"),
        ("gate", 1, 1, "gate_failed", "play.gate_failed.check"),
        ("merge_conflict", 1, 2, "redoing", "play.redoing.merge_conflict"),
        ("merge_conflict", 2, 2, "escalated", "play.escalated.merge_conflict"),
        ("merge_conflict", 1, 1, "gate_failed", "play.gate_failed.merge_conflict"),
        ("session_failed", 1, 2, "redoing", "play.redoing.session_failed"),
        ("session_failed", 2, 2, "escalated", "play.escalated.session_failed"),
        ("session_failed", 1, 1, "gate_failed", "play.gate_failed.session_failed"),
        ("no_changes", 1, 2, "redoing", "play.redoing.no_changes"),
        ("no_changes", 2, 2, "escalated", "play.escalated.no_changes"),
        ("no_changes", 1, 1, "gate_failed", "play.gate_failed.no_changes"),
    ],
)
def test_after_failure(
    kind: FailureKind, attempt: int, attempts: int, status: str, reason: str
) -> None:
    failure = after_failure(kind, attempt=attempt, attempts=attempts)
    assert (failure.status, failure.reason_code) == (status, reason)


@pytest.mark.parametrize(
    ("status", "reason", "stopping", "retries", "expected"),
    [
        ("completed", "run.completed.ok", False, 0, "gate"),
        ("completed_empty", "run.completed_empty.no_evidence", False, 0, "fail"),
        ("failed", "run.failed.exit_nonzero", False, 0, "fail"),
        ("timed_out", "run.timed_out.deadline", False, 0, "fail"),
        ("failed", "run.failed.provider_retryable", False, 0, "retry"),
        ("failed", "run.failed.provider_retryable", False, 1, "retry"),
        ("failed", "run.failed.provider_retryable", False, 2, "fail"),
        ("failed", "run.failed.provider_nonretryable", False, 0, "fail"),
        # a provider class a person must fix stops the play; one a retry may fix is retried
        ("failed", "run.failed.provider_auth", False, 0, "escalate"),
        ("failed", "run.failed.provider_rejected", False, 0, "escalate"),
        ("failed", "run.failed.provider_rate_limit", False, 0, "retry"),
        ("failed", "run.failed.provider_overloaded", False, 1, "retry"),
        ("failed", "run.failed.provider_server_error", False, 0, "retry"),
        ("failed", "run.failed.provider_network", False, 0, "retry"),
        ("failed", "run.failed.provider_stalled", False, 0, "retry"),
        ("timed_out", "run.timed_out.provider_retrying", False, 0, "retry"),
        ("timed_out", "run.timed_out.provider_retrying", False, 2, "fail"),
        ("cancelled", "run.cancelled.sigterm", True, 0, "interrupted"),
        ("failed", "session.orphaned.no_process", False, 0, "rerun"),
        ("failed", "session.stale.no_heartbeat", False, 0, "rerun"),
        ("aborted", "run.cancelled.sigint", True, 0, "interrupted"),
        ("cancelled", "run.cancelled.sigterm", False, 0, "fail"),
        ("completed", "run.completed.ok", True, 0, "gate"),
    ],
)
def test_after_session(
    status: str, reason: str, stopping: bool, retries: int, expected: str
) -> None:
    assert after_run(status, reason, stopping=stopping, retries_used=retries) == expected


@pytest.mark.parametrize(
    ("status", "stopping", "verdict"),
    [
        ("completed", False, "pass"),  # a gate is a command: exit 0 is completed
        ("failed", False, "fail"),
        ("timed_out", False, "fail"),
        ("cancelled", True, "interrupted"),
        ("cancelled", False, "fail"),
    ],
)
def test_gate_verdict(status: str, stopping: bool, verdict: str) -> None:
    assert gate_verdict(status, stopping=stopping) == verdict


@pytest.mark.parametrize(
    ("status", "target"),
    [
        ("pending", ("blocked", "play.blocked.show_aborted")),
        ("prepared", ("blocked", "play.blocked.show_aborted")),
        ("running", ("aborted_after_finish", "play.aborted_after_finish.show_aborted")),
        ("running_complete", ("aborted_after_finish", "play.aborted_after_finish.show_aborted")),
        ("gated", ("aborted_after_finish", "play.aborted_after_finish.show_aborted")),
        ("redoing", ("aborted_after_finish", "play.aborted_after_finish.show_aborted")),
        ("merged", None),
        ("escalated", None),
        ("gate_failed", None),
    ],
)
def test_abort_target(status: str, target: tuple[str, str] | None) -> None:
    assert abort_target(status) == target


@pytest.mark.parametrize(
    ("plays", "busy", "final", "kind"),
    [
        ([P("a", "merged")], False, "none", "completed"),
        ([P("a", "merged")], False, "pending", "final_gate"),
        ([P("a", "merged")], False, "passed", "completed"),
        ([P("a", "merged")], False, "failed", "final_gate_failed"),
        ([P("a", "merged"), P("b", "pending")], False, "none", "go"),
        ([P("a", "gated")], False, "none", "go"),
        ([P("a", "merged")], True, "none", "go"),
        ([P("a", "escalated"), P("b", "pending", "a")], False, "none", "blocked"),
        ([P("a", "gate_failed"), P("b", "merged")], False, "pending", "blocked"),
    ],
)
def test_show_next(plays: list[PlayFacts], busy: bool, final: FinalGate, kind: str) -> None:
    assert show_next(plays, busy=busy, final_gate=final).kind == kind


def test_every_decided_reason_is_registered_and_fits_its_status() -> None:
    from lirun.reasons import validate_reason

    for kind in ("gate", "merge_conflict", "session_failed", "no_changes"):
        for attempt, attempts in ((1, 2), (2, 2), (1, 1)):
            f = after_failure(kind, attempt=attempt, attempts=attempts)
            validate_reason(f.reason_code, "play", f.status)
    for status in ("pending", "running"):
        target = abort_target(status)
        assert target is not None
        validate_reason(target[1], "play", target[0])
    validate_reason("show.blocked.no_ready_plays", "show", "active")


def test_a_provider_stop_says_the_providers_words_and_what_to_do() -> None:
    from lirun.shows.decide import provider_stop

    stop = provider_stop("r1", "run.failed.provider_auth", "Invalid API key · Please run /login")
    assert stop is not None
    summary, feedback = stop
    assert summary.startswith("Invalid API key · Please run /login (auth); what to do: log in")
    assert len(summary) <= 300  # it fits the play's reason summary whole
    assert "its execution r1 failed with run.failed.provider_auth" in feedback
    assert "the provider said: Invalid API key · Please run /login" in feedback
    long = provider_stop("r1", "run.failed.provider_rejected", "prompt is too long " * 40)
    assert long is not None
    assert len(long[0]) <= 300
    assert "shorten the prompt" in long[0]
    assert ("prompt is too long " * 40).strip() in long[1]  # the feedback keeps it all
    assert provider_stop("r1", "run.failed.provider_rate_limit", "slow down") is None
    assert provider_stop("r1", "run.failed.exit_nonzero", None) is None

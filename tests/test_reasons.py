"""The closed reason-code registry (design.md §5)."""

from __future__ import annotations

import re

import pytest

import lirun
from lirun.errors import ValidationError
from lirun.lifecycle import POLICIES
from lirun.reasons import (
    LEGACY_IMPORTED,
    REASON_DOMAINS,
    VALID_REASON_CODES,
    creation_reason,
    describe,
    display_reason,
    reason_domain,
    resolve_run_reason,
    validate_reason,
)

NAMED_BY_THE_DESIGN = {
    "run.completed.ok",
    "run.completed_empty.no_evidence",
    "run.timed_out.deadline",
    "run.cancelled.sigint",
    "run.cancelled.sigterm",
    "run.cancelled.system",
    "run.failed.provider_retryable",
    "run.failed.provider_nonretryable",
    "run.failed.exception",
    "run.failed.exit_nonzero",
    "run.failed.missing_artifact",
    "run.failed.escalated",
    "session.orphaned.no_process",
    "session.stale.no_heartbeat",
    "legacy.imported",
}
DOMAINS_BY_ENTITY = {
    "session": {"run", "session"},
    "invocation": {"run", "session"},
    "schedule_run": {"run", "schedule"},
    "play": {"play"},
    "show": {"show"},
    "team": {"team"},
    "schedule": {"schedule_definition"},
}


def test_the_registry_has_every_named_code() -> None:
    assert NAMED_BY_THE_DESIGN <= VALID_REASON_CODES
    assert lirun.VALID_REASON_CODES is VALID_REASON_CODES
    for domain in ("play", "show", "schedule", "team"):
        assert any(reason_domain(c) == domain for c in VALID_REASON_CODES), domain


def test_every_code_has_the_three_part_format_and_a_known_domain() -> None:
    shape = re.compile(r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$")
    assert {
        "run",
        "session",
        "play",
        "show",
        "schedule",
        "team",
        "schedule_definition",
    } == REASON_DOMAINS
    for code in VALID_REASON_CODES - {LEGACY_IMPORTED}:
        assert shape.match(code), code
        assert reason_domain(code) in REASON_DOMAINS, code
        assert describe(code), code


@pytest.mark.parametrize("entity_type", sorted(DOMAINS_BY_ENTITY))
def test_domain_fit_per_entity(entity_type: str) -> None:
    assert POLICIES[entity_type].reason_domains == DOMAINS_BY_ENTITY[entity_type]
    for code in VALID_REASON_CODES:
        fits = code == LEGACY_IMPORTED or reason_domain(code) in DOMAINS_BY_ENTITY[entity_type]
        if fits:
            validate_reason(code, entity_type)
        else:
            with pytest.raises(ValidationError, match="does not fit"):
                validate_reason(code, entity_type)


@pytest.mark.parametrize(
    "bad", ["", "run.done", "run.failed.Exception", "run.failed.nope", "RUN.failed.exception"]
)
def test_unregistered_codes_are_validation_errors(bad: str) -> None:
    with pytest.raises(ValidationError, match="not registered"):
        validate_reason(bad)


def test_unregistered_codes_display_as_unknown() -> None:
    assert display_reason("run.completed.ok") == "run.completed.ok"
    assert display_reason("run.completed.maybe") == "unknown"
    assert display_reason(None) == "unknown"


@pytest.mark.parametrize(
    ("status", "signal", "reason"),
    [
        ("completed", None, "run.completed.ok"),
        ("completed_empty", None, "run.completed_empty.no_evidence"),
        ("timed_out", None, "run.timed_out.deadline"),
        ("aborted", None, "run.cancelled.sigint"),
        ("cancelled", "SIGTERM", "run.cancelled.sigterm"),
        ("cancelled", None, "run.cancelled.system"),
        ("failed", None, "run.failed.exception"),
    ],
)
def test_base_teardown_reason(status: str, signal: str | None, reason: str) -> None:
    assert resolve_run_reason(status, signal_name=signal) == reason


@pytest.mark.parametrize("entity_type", sorted(POLICIES))
def test_creation_reasons_fit_every_status(entity_type: str) -> None:
    for status in sorted(POLICIES[entity_type].statuses):
        code = creation_reason(entity_type, status)
        validate_reason(code, entity_type)

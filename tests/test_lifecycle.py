"""The lifecycle policy registry against the tables of design.md §5."""

from __future__ import annotations

import pytest

import lirun
from lirun.errors import ValidationError
from lirun.lifecycle import (
    ENTITY_TYPES,
    EXIT_CODE_BY_STATUS,
    POLICIES,
    SESSION_TERMINAL_STATUSES,
    SUCCESS_STATUSES_BY_ENTITY_TYPE,
    TERMINAL_STATUSES_BY_ENTITY_TYPE,
    VALID_SESSION_STATUSES,
    VALID_SOURCES,
    VALID_STATUSES_BY_ENTITY_TYPE,
    canonical_entity_type,
    is_success,
    is_terminal,
    policy_for,
    validate_source,
    validate_status,
)

SESSION_TERMINAL = {"completed", "completed_empty", "failed", "timed_out", "aborted", "cancelled"}
# design.md §5: statuses (terminal ones listed separately) and the success set.
DESIGN: dict[str, tuple[set[str], set[str], set[str]]] = {
    "session": ({"running"}, SESSION_TERMINAL, {"completed"}),
    "invocation": ({"running"}, SESSION_TERMINAL, {"completed"}),
    "schedule_run": (
        {"queued", "waiting_dependency", "running", "retry_wait"},
        {"completed", "failed", "timed_out", "skipped", "cancelled"},
        {"completed"},
    ),
    "show": ({"active"}, {"completed", "aborted"}, {"completed"}),
    "play": (
        {"pending", "prepared", "running", "running_complete", "gated", "redoing"},
        {"merged", "escalated", "gate_failed", "blocked", "aborted_after_finish"},
        {"merged"},
    ),
    "team": ({"active"}, {"archived"}, set()),
    # a schedule definition (the entity kind; deleted frees its name)
    "schedule": ({"enabled", "disabled"}, {"deleted"}, set()),
}


@pytest.mark.parametrize("entity_type", sorted(DESIGN))
def test_vocabularies_match_the_design(entity_type: str) -> None:
    live, terminal, success = DESIGN[entity_type]
    policy = POLICIES[entity_type]
    assert policy.statuses == live | terminal
    assert policy.terminal == terminal
    assert policy.success == success
    assert policy.success <= policy.terminal
    assert policy.initial in live
    assert VALID_STATUSES_BY_ENTITY_TYPE[entity_type] == live | terminal
    assert TERMINAL_STATUSES_BY_ENTITY_TYPE[entity_type] == terminal
    assert SUCCESS_STATUSES_BY_ENTITY_TYPE[entity_type] == success


def test_entity_types_and_session_sets() -> None:
    assert set(DESIGN) == set(ENTITY_TYPES) == set(POLICIES)
    assert SESSION_TERMINAL | {"running"} == VALID_SESSION_STATUSES
    assert SESSION_TERMINAL_STATUSES == SESSION_TERMINAL
    assert {"executor", "agent", "admin", "system"} == VALID_SOURCES


def test_exit_codes_follow_the_adr() -> None:
    assert EXIT_CODE_BY_STATUS == {
        "completed": 0,
        "completed_empty": 1,
        "failed": 1,
        "timed_out": 124,
        "aborted": 130,
        "cancelled": 143,
    }
    assert set(EXIT_CODE_BY_STATUS) == SESSION_TERMINAL


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("session", "session"),
        ("sessions", "session"),
        ("run", "session"),
        ("runs", "session"),
        ("Sessions", "session"),
        (" run ", "session"),
        ("invocations", "invocation"),
        ("schedule_runs", "schedule_run"),
        ("schedule-run", "schedule_run"),
        ("shows", "show"),
        ("plays", "play"),
        ("teams", "team"),
        ("schedules", "schedule"),
    ],
)
def test_aliases_are_canonicalized(alias: str, canonical: str) -> None:
    assert canonical_entity_type(alias) == canonical
    assert policy_for(alias) is POLICIES[canonical]


@pytest.mark.parametrize(
    "bad", ["", "widget", "schedule_def", "branch", "messages", "admin_events"]
)
def test_unknown_entity_types_are_validation_errors(bad: str) -> None:
    with pytest.raises(ValidationError, match="unknown entity type") as caught:
        canonical_entity_type(bad)
    assert "session" in str(caught.value)  # lists what is accepted
    assert isinstance(caught.value, ValueError)


def test_every_table_name_is_an_alias() -> None:
    for entity_type, policy in POLICIES.items():
        assert canonical_entity_type(policy.table) == entity_type


def test_status_and_source_validation() -> None:
    validate_status("run", "timed_out")
    with pytest.raises(ValidationError, match="'merged' is not valid for session"):
        validate_status("session", "merged")
    with pytest.raises(ValidationError, match="not valid for play"):
        validate_status("plays", "completed")
    validate_source("admin")
    with pytest.raises(ValidationError, match="source 'user' is not valid"):
        validate_source("user")


def test_terminal_and_success_predicates() -> None:
    assert is_terminal("session", "completed_empty")
    assert not is_success("session", "completed_empty")
    assert not is_terminal("session", None)
    assert not is_success("session", None)
    assert is_terminal("schedule_runs", "timed_out")
    assert is_success("play", "merged")
    assert not is_success("team", "archived")
    assert not is_terminal("play", "running_complete")


def test_the_public_names_come_from_the_registry() -> None:
    assert lirun.TERMINAL_STATUSES_BY_ENTITY_TYPE is TERMINAL_STATUSES_BY_ENTITY_TYPE
    assert lirun.EXIT_CODE_BY_STATUS is EXIT_CODE_BY_STATUS
    assert lirun.VALID_SOURCES is VALID_SOURCES

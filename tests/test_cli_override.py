"""``li override``: audited repair through update_status(override=True) (design.md D5)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from lirun.cli import override as override_cli
from lirun.cli.main import main as li_main
from lirun.settings import Settings
from lirun.store import Store
from support.cli import li_command

ACTOR_X = ["--actor", "a", "--justification", "x"]
REPAIR = ["--to", "completed", "--reason", "run.completed.admin", "--actor", "alice"]


def li(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(li_command(*args), env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture
def failed_run(store: Store) -> Store:
    store.sessions.create(id="run-1")
    assert store.update_status(
        "session", "run-1", new_status="failed", reason_code="run.failed.exception"
    )
    return store


def snapshot(store: Store, entity: str, ident: str) -> tuple[Any, ...]:
    return (
        store.get_entity(entity, ident),
        store.list_transitions(entity, ident),
        store.list_admin_events(ident),
    )


def test_override_repairs_a_terminal_row_with_an_audit_trail(
    failed_run: Store, li_env: dict[str, str]
) -> None:
    result = li(
        li_env,
        "override",
        "session",
        "run-1",
        *REPAIR,
        "--justification",
        "tests pass; the exception was in cleanup",
        "--summary",
        "repaired by hand",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("session run-1: failed -> completed")
    row = failed_run.get_entity("session", "run-1")
    assert row is not None
    assert (row["status"], row["status_reason_code"], row["status_reason_summary"]) == (
        "completed",
        "run.completed.admin",
        "repaired by hand",
    )
    last = failed_run.list_transitions("session", "run-1")[-1]
    assert (last.previous_status, last.status, last.source, last.actor) == (
        "failed",
        "completed",
        "admin",
        "alice",
    )
    [event] = failed_run.list_admin_events("run-1")
    assert event.event_type == "status_transition_override"
    assert event.actor == "alice"
    assert event.justification == "tests pass; the exception was in cleanup"
    assert event.payload["previous_status"] == "failed"


def test_override_keeps_the_stored_exit_code_in_step(
    failed_run: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    failed_run.update_fields("session", "run-1", {"exit_code": 1})
    assert li_main(["override", "session", "run-1", *REPAIR, "--justification", "ok"]) == 0
    row = failed_run.get_entity("session", "run-1")
    assert row is not None
    assert (row["status"], row["exit_code"]) == ("completed", 0)


def test_override_json_output(failed_run: Store, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["override", "run", "run-1", *REPAIR, "--justification", "ok", "--json"]
    assert li_main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["entity_type"] == "session"  # the alias "run" was canonicalized
    assert (out["previous_status"], out["status"]) == ("failed", "completed")


def test_missing_justification_exits_2_and_changes_nothing(
    failed_run: Store, li_env: dict[str, str]
) -> None:
    before = snapshot(failed_run, "session", "run-1")
    result = li(li_env, "override", "session", "run-1", *REPAIR)
    assert result.returncode == 2
    assert "--justification" in result.stderr
    assert snapshot(failed_run, "session", "run-1") == before


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["session", "run-1", *REPAIR, "--justification", "   "], "--justification must not"),
        (
            ["session", "run-1", *REPAIR[:4], "--actor", "", "--justification", "x"],
            "--actor must not",
        ),
        (
            ["session", "run-1", *REPAIR[:2], "--reason", "play.merged.ok", *ACTOR_X],
            "does not fit session",
        ),
        (
            ["session", "run-1", "--to", "merged", *REPAIR[2:], "--justification", "x"],
            "not valid for session",
        ),
        (
            ["session", "run-1", *REPAIR[:2], "--reason", "run.made.up", *ACTOR_X],
            "not registered",
        ),
        (["gadget", "run-1", *REPAIR, "--justification", "x"], "unknown entity type"),
        (["session", "run-2", *REPAIR, "--justification", "x"], "no session with id 'run-2'"),
        (["session", "un-", *REPAIR, "--justification", "x"], "nor one starting or ending"),
    ],
)
def test_rejected_overrides_exit_2_and_change_nothing(
    failed_run: Store, capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    before = snapshot(failed_run, "session", "run-1")
    assert li_main(["override", *argv]) == 2
    assert fragment in capsys.readouterr().err
    assert snapshot(failed_run, "session", "run-1") == before


def test_override_other_entities(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    store.shows.create(topic="t", id="show-1")
    store.shows.create_play(show_id="show-1", name="p", id="play-1")
    argv = ["override", "play", "play-1", "--to", "blocked", "--reason", "play.blocked.dependency"]
    assert li_main([*argv, "--actor", "bob", "--justification", "upstream gone"]) == 0
    row = store.shows.get_play("play-1")
    assert row is not None
    assert row.status == "blocked"


def test_lost_race_exits_1_and_writes_nothing(
    failed_run: Store, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The record changes between the read and the write: the version guard refuses."""
    real_update = Store.update_status

    def update_after_someone_else(self: Store, *args: Any, **kwargs: Any) -> bool:
        real_update(
            self, "session", "run-1", new_status="failed", reason_code="run.failed.escalated"
        )
        return real_update(self, *args, **kwargs)

    monkeypatch.setattr(Store, "update_status", update_after_someone_else)
    argv = ["session", "run-1", *REPAIR, "--justification", "x"]
    assert override_cli.main(argv, Settings.from_env()) == 1
    assert "changed while overriding" in capsys.readouterr().err
    monkeypatch.undo()
    row = failed_run.get_entity("session", "run-1")
    assert row is not None
    assert row["status_reason_code"] == "run.failed.escalated"
    assert failed_run.list_admin_events("run-1") == []


def test_a_session_that_still_runs_is_refused_with_nothing_written(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its owner records how it ends (li wait; li reap when the owner is gone)."""
    store.sessions.create(id="live-1")
    before = snapshot(store, "session", "live-1")
    argv = ["override", "session", "live-1", "--to", "failed", "--reason", "run.failed.admin"]
    assert li_main([*argv, *ACTOR_X]) == 2
    assert "is still running" in capsys.readouterr().err
    assert snapshot(store, "session", "live-1") == before

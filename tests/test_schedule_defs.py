"""Schedule definitions: actions and policies (pure), and their store on SQLite and
PostgreSQL: history with reason codes, unique live names, soft delete, apply, and the
exactly-once key on due-time runs."""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import threading
from pathlib import Path
from typing import Any

import pytest

from lirun.errors import ConflictError, TransitionRejectedError, UsageError
from lirun.schedules import registry
from lirun.schedules.actions import Action, parse_action
from lirun.schedules.definition import Definition, Policies, check_name, diff, make_policies
from lirun.schedules.triggers import at_trigger, cron_trigger, every_trigger, next_due
from lirun.store import Store, open_store
from lirun.store.rows import ScheduleRow
from support.workerkit import due_at

NOW = 1_800_000_000  # 2027-01-15, a fixed clock


def run_action(tmp_path: Path, *cmd: str) -> Action:
    return parse_action(["run", "--cwd", str(tmp_path), *(cmd or ("echo", "hi"))])


def definition(tmp_path: Path, name: str = "nightly", **policies: Any) -> Definition:
    trigger = every_trigger("1h", anchor=NOW)
    return Definition(
        name, trigger, run_action(tmp_path), make_policies(policies, trigger), enabled=True
    )


def reasons(store: Store, row: ScheduleRow) -> list[tuple[str, str]]:
    return [(t.status, t.reason_code) for t in store.list_transitions("schedule", row.id)]


# --- actions -----------------------------------------------------------------------------------


def test_agent_action_becomes_a_task(tmp_path: Path) -> None:
    action = parse_action(
        ["agent", "claude/sonnet", "review it", "--timeout", "600", "--cwd", str(tmp_path),
         "--artifact", "report=out/r.md?", "--", "--max-turns", "3"]
    )  # fmt: skip
    assert action.kind == "agent"
    assert action.cwd == str(tmp_path)
    assert action.task is not None
    assert (action.task.agent, action.task.prompt, action.task.timeout) == (
        "claude/sonnet",
        "review it",
        600.0,
    )
    assert action.task.options == {"provider_args": ["--max-turns", "3"]}
    assert action.task.artifacts == ({"id": "report", "path": "out/r.md", "required": False},)
    assert Action.from_dict(action.to_dict()) == action


def test_run_action_takes_the_command_after_its_options(tmp_path: Path) -> None:
    action = parse_action(["run", "--timeout=5", "sh", "-c", "echo --cwd"], base=str(tmp_path))
    assert action.task is not None
    assert action.task.run == ("sh", "-c", "echo --cwd")
    assert action.cwd == str(tmp_path)
    dashed = parse_action(["run", "--", "--odd-program"], base=str(tmp_path))
    assert dashed.task is not None
    assert dashed.task.run == ("--odd-program",)


def test_run_action_takes_require_change_as_li_run_does(tmp_path: Path) -> None:
    action = parse_action(["run", "--require-change", "make", "deploy"], base=str(tmp_path))
    assert action.task is not None
    assert action.task.require_change
    assert action.task.run == ("make", "deploy")
    assert action.describe() == "run --require-change make deploy"
    assert Action.from_dict(action.to_dict()) == action
    plain = parse_action(["run", "make", "deploy"], base=str(tmp_path))
    assert plain.task is not None
    assert not plain.task.require_change


def test_flow_file_is_resolved_and_snapshotted(tmp_path: Path) -> None:
    flow = tmp_path / "nightly.yaml"
    flow.write_text("legs:\n  - {id: hello, run: [echo, hi]}\n")
    action = parse_action(["flow", "nightly.yaml"], base=str(tmp_path))
    assert action.file == str(flow)
    assert action.sha256 == hashlib.sha256(flow.read_bytes()).hexdigest()


def test_an_invalid_flow_or_show_file_is_refused_at_add_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "bad-flow.yaml").write_text("legs: []\n")
    with pytest.raises(UsageError, match=r"bad-flow.yaml:1: legs must be a non-empty list"):
        parse_action(["flow", "bad-flow.yaml"], base=str(tmp_path))
    (tmp_path / "bad-show.yaml").write_text("topic: x\nplays: []\nbogus: 1\n")
    with pytest.raises(UsageError, match=r"bad-show.yaml:\d+: "):
        parse_action(["show", "bad-show.yaml"], base=str(tmp_path))


@pytest.mark.parametrize(
    ("words", "says"),
    [([], "no action given"),
     (["deploy", "x"], "unknown action 'deploy'"),
     (["agent"], "no provider"),
     (["agent", "gpt", "hi"], "unknown provider"),
     (["agent", "claude"], "no prompt"),
     (["agent", "claude", "a", "b"], "quote the prompt"),
     (["agent", "claude", "hi", "--detach"], "runs always run in a worker"),
     (["agent", "claude", "hi", "--bogus", "1"], "unknown option '--bogus'"),
     (["agent", "claude", "hi", "--timeout", "soon"], "'soon' is not a duration"),
     (["agent", "claude", "hi", "--profile", "nope"], "no profile named 'nope'"),
     (["agent", "claude", "hi", "--", "--output-format", "text"], "cannot be passed"),
     (["run"], "no command"),
     (["run", "--timeout"], "needs a value"),
     (["run", "--playbook", "p", "x"], "unknown option '--playbook'"),
     (["run", "--require-change=yes", "x"], "--require-change takes no value"),
     (["agent", "claude", "hi", "--require-change"], "unknown option '--require-change'"),
     (["flow"], "exactly one FILE"),
     (["flow", "missing.yaml"], "does not exist"),
     (["show", "."], "is not a file"),
     (["run", "--cwd", "nowhere", "x"], "is not a directory")],
)  # fmt: skip
def test_invalid_actions_are_refused(tmp_path: Path, words: list[str], says: str) -> None:
    with pytest.raises(UsageError, match=says):
        parse_action(words, base=str(tmp_path))


# --- names and policies -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "-x", "a b", "x/y", "é", "a" * 65, ".hidden"])
def test_invalid_names(name: str) -> None:
    with pytest.raises(UsageError, match="nightly-review"):
        check_name(name)


def test_policy_defaults_and_at_runs_missed_once() -> None:
    every = every_trigger("1h", anchor=0)
    assert make_policies({}, every) == Policies()
    assert make_policies({}, at_trigger("2030-01-01T00:00:00Z", None)).missed == "run_once"
    policies = make_policies(
        {"overlap": "allow", "missed": "run-once", "max_runs": "3", "budget_usd": "2.5",
         "budget_window": "1d", "start_deadline": "30m", "retries": "0",
         "missed_grace": "2m", "notify": "echo done"},
        every,
    )  # fmt: skip
    assert (policies.overlap, policies.missed, policies.max_runs) == ("allow", "run_once", 3)
    assert (policies.budget_usd, policies.budget_window, policies.start_deadline) == (
        2.5,
        86400,
        1800,
    )
    assert (policies.retries, policies.missed_grace, policies.notify) == (0, 120, "echo done")
    assert Policies.from_dict(policies.to_dict()) == policies


@pytest.mark.parametrize(
    ("given", "says"),
    [({"overlap": "maybe"}, "expected one of skip, allow"),
     ({"max_runs": "0"}, ">= 1"), ({"retries": "-1"}, ">= 0"), ({"retries": "x"}, "whole"),
     ({"budget_usd": "0"}, "positive amount"), ({"budget_tokens": "1.5"}, "whole"),
     ({"budget_window": "1d"}, "needs --budget-usd"), ({"start_deadline": "soon"}, "1h30m"),
     ({"notify": " "}, "shell command"), ({"colour": "red"}, "unknown policy"),
     ({"start_deadline": -5}, "negative"), ({"missed_grace": True}, "not a duration"),
     ({"missed_grace": 0}, "zero")],
)  # fmt: skip
def test_invalid_policies(given: dict[str, Any], says: str) -> None:
    with pytest.raises(UsageError, match=says):
        make_policies(given, every_trigger("1h", anchor=0))


def test_diff_names_each_changed_field(tmp_path: Path) -> None:
    old = definition(tmp_path)
    new = Definition(
        old.name, every_trigger("1h", anchor=NOW + 99), old.action, Policies(retries=2), False
    )
    assert diff(old, new) == {"policies.retries": [0, 2], "enabled": [True, False]}
    moved = Definition(old.name, cron_trigger("0 * * * *", "UTC"), old.action)
    assert set(diff(old, moved)) == {"trigger"}


# --- the store, both backends ------------------------------------------------------------------


def test_history_of_every_change_has_its_reason(store: Store, tmp_path: Path) -> None:
    row = registry.add(store, definition(tmp_path), now=NOW, actor="ann")
    assert row.status == "enabled"
    assert row.enabled == 1
    assert row.next_due_at == NOW + 3600
    assert isinstance(row.next_due_at, int)
    assert row.trigger_json["kind"] == "every"
    assert row.tz == "UTC"
    row, changed = registry.set_enabled(store, "nightly", False, now=NOW + 10, actor="bob")
    assert changed
    assert row.status == "disabled"
    assert row.next_due_at is None
    assert row.enabled == 0
    assert registry.set_enabled(store, "nightly", False, now=NOW + 20)[1] is False
    row, _ = registry.set_enabled(store, "nightly", True, now=NOW + 7300)
    assert row.next_due_at == NOW + 3 * 3600  # due from the moment it is enabled again
    deleted = registry.delete(store, "nightly", actor="cy")
    assert deleted.status == "deleted"
    assert deleted.deleted_at is not None
    assert store.schedules.get("nightly") is None  # by name: live ones only
    assert store.schedules.get_by_id(row.id) == deleted  # by id: deleted ones too
    assert store.schedules.get_by_id("no-such-id") is None
    assert reasons(store, row) == [
        ("enabled", "schedule_definition.enabled.created"),
        ("disabled", "schedule_definition.disabled.user"),
        ("enabled", "schedule_definition.enabled.user"),
        ("deleted", "schedule_definition.deleted.user"),
    ]
    history = store.list_transitions("schedule", row.id)
    assert [t.actor for t in history] == ["ann", "bob", None, "cy"]
    assert history[0].metadata["definition"]["name"] == "nightly"


def test_names_are_unique_among_schedules_not_deleted(store: Store, tmp_path: Path) -> None:
    first = registry.add(store, definition(tmp_path), now=NOW)
    with pytest.raises(ConflictError, match="a schedule named 'nightly' already exists"):
        registry.add(store, definition(tmp_path), now=NOW)
    assert len(store.schedules.list_all()) == 1
    registry.delete(store, "nightly")
    second = registry.add(store, definition(tmp_path), now=NOW)
    assert second.id != first.id
    assert [r.status for r in store.schedules.list_all(include_deleted=True)] == [
        "deleted",
        "enabled",
    ]
    with pytest.raises(TransitionRejectedError):
        store.schedules.change(
            first.id, new_status="enabled", reason_code="schedule_definition.enabled.user"
        )


def test_missing_names_are_not_found(store: Store) -> None:
    from lirun.errors import NotFoundError

    with pytest.raises(NotFoundError, match="li schedule list"):
        registry.set_enabled(store, "ghost", True, now=NOW)


def test_a_due_run_exists_once_per_schedule_due_time_and_attempt(
    store: Store, tmp_path: Path
) -> None:
    sid = registry.add(store, definition(tmp_path), now=NOW).id
    due = NOW + 3600
    first = store.schedules.insert_due_run(schedule_id=sid, due_at=due, action_kind="run")
    assert first is not None
    assert first.due_at == due
    assert first.status == "queued"
    assert store.schedules.insert_due_run(schedule_id=sid, due_at=due, action_kind="run") is None
    retry = store.schedules.insert_due_run(
        schedule_id=sid, due_at=due, action_kind="run", attempt=2, retry_of=first.id
    )
    assert retry is not None
    assert retry.retry_of == first.id
    skipped = store.schedules.insert_due_run(
        schedule_id=sid, due_at=due + 3600, action_kind="run", status="skipped",
        reason_code="schedule.skipped.overlap",
    )  # fmt: skip
    assert skipped is not None
    assert skipped.ended_at is not None
    # fire / submit runs have no due time: NULLs are distinct in the unique key.
    for _ in range(2):
        store.schedules.create_run(action_kind="run", schedule_id=sid)
    runs = store.schedules.list_runs(sid)
    assert len(runs) == 5
    assert [t.reason_code for t in store.list_transitions("schedule_run", first.id)] == [
        "schedule.queued.created"
    ]


def test_racing_writers_make_one_row_per_due_time(db_url: str, tmp_path: Path) -> None:
    setup = open_store(db_url)
    sid = registry.add(setup, definition(tmp_path), now=NOW).id
    setup.close()
    won: list[str] = []
    start = threading.Barrier(4)

    def writer() -> None:
        own = open_store(db_url)
        try:
            start.wait()
            for due in range(NOW, NOW + 20):
                row = own.schedules.insert_due_run(schedule_id=sid, due_at=due, action_kind="run")
                if row is not None:
                    won.append(row.id)
        finally:
            own.close()

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    check = open_store(db_url)
    runs = check.schedules.list_runs(sid)
    check.close()
    assert len(won) == 20
    assert sorted(due_at(r) for r in runs) == list(range(NOW, NOW + 20))


def test_due_at_must_be_integer_seconds(store: Store, tmp_path: Path) -> None:
    from lirun.errors import ValidationError

    sid = registry.add(store, definition(tmp_path), now=NOW).id
    with pytest.raises(ValidationError, match="integer epoch seconds"):
        store.schedules.insert_due_run(schedule_id=sid, due_at=1.5, action_kind="run")  # type: ignore[arg-type]  # bad input


def test_apply_creates_updates_and_disables_what_is_missing(store: Store, tmp_path: Path) -> None:
    registry.add(store, definition(tmp_path, "keep"), now=NOW)
    registry.add(store, definition(tmp_path, "change"), now=NOW)
    registry.add(store, definition(tmp_path, "gone"), now=NOW)
    wanted = [
        definition(tmp_path, "keep"),
        Definition(
            "change", every_trigger("1h", anchor=NOW + 500), run_action(tmp_path),
            Policies(retries=2),
        ),
        definition(tmp_path, "new"),
    ]  # fmt: skip
    changes = registry.plan(store.schedules.list_all(), wanted, now=NOW + 100)
    assert [(c.op, c.name) for c in changes] == [
        ("unchanged", "keep"),
        ("update", "change"),
        ("create", "new"),
        ("disable", "gone"),
    ]
    registry.apply(store, changes, now=NOW + 100, source="/x/schedules.yaml", actor="ann")
    rows = {r.name: r for r in store.schedules.list_all()}
    assert rows["change"].policies_json["retries"] == 2
    assert rows["change"].trigger_json["anchor"] == NOW  # anchored on its creation
    assert rows["change"].next_due_at == NOW + 3600  # the pending due time is kept
    assert rows["gone"].status == "disabled"
    assert reasons(store, rows["change"])[-1] == ("enabled", "schedule_definition.enabled.updated")
    meta = store.list_transitions("schedule", rows["change"].id)[-1].metadata
    assert meta == {"file": "/x/schedules.yaml", "diff": {"policies.retries": [0, 2]}}
    assert reasons(store, rows["gone"])[-1] == ("disabled", "schedule_definition.disabled.applied")
    again = registry.plan(store.schedules.list_all(), wanted, now=NOW + 200)
    assert {c.op for c in again} == {"unchanged"}  # applying twice changes nothing
    deleting = registry.plan(store.schedules.list_all(), wanted[:1], now=NOW, missing="delete")
    registry.apply(store, deleting, now=NOW, source="f")
    assert [r.name for r in store.schedules.list_all()] == ["keep"]


def test_an_at_schedule_in_the_past_is_refused_at_add(store: Store, tmp_path: Path) -> None:
    trigger = at_trigger("2020-01-01T00:00:00Z", None)
    with pytest.raises(UsageError, match="in the past"):
        registry.add(store, Definition("once", trigger, run_action(tmp_path)), now=NOW)
    assert store.schedules.list_all(include_deleted=True) == []


def test_a_definition_round_trips_through_its_row(store: Store, tmp_path: Path) -> None:
    wanted = Definition(
        "berlin", cron_trigger("30 2 * * *", "Europe/Berlin"), run_action(tmp_path),
        make_policies({"budget_tokens": "1000", "budget_window": "1d"},
                      every_trigger("1h", anchor=0)),
    )  # fmt: skip
    row = registry.add(store, wanted, now=NOW)
    assert Definition.from_row(row) == wanted
    assert row.next_due_at == next_due(wanted.trigger, NOW)


def test_what_a_worker_reads_and_moves(store: Store, tmp_path: Path) -> None:
    sid = registry.add(store, definition(tmp_path, "a"), now=NOW).id
    later = Definition("b", every_trigger("1h", anchor=NOW + 60), run_action(tmp_path))
    registry.add(store, later, now=NOW + 60)
    registry.add(store, definition(tmp_path, "off"), now=NOW - 60)
    registry.set_enabled(store, "off", False, now=NOW)
    assert store.schedules.earliest_due() == NOW + 3600
    assert store.schedules.list_due(NOW + 3599) == []
    assert [r.name for r in store.schedules.list_due(NOW + 3660)] == ["a", "b"]
    assert store.schedules.advance_next_due(sid, expected=NOW + 3600, new=NOW + 7200)
    assert not store.schedules.advance_next_due(
        sid, expected=NOW + 3600, new=NOW + 7200
    )  # lost the CAS
    assert store.schedules.earliest_due() == NOW + 3660
    assert store.schedules.count_active_runs(sid) == 0
    run = store.schedules.insert_due_run(schedule_id=sid, due_at=NOW + 3600, action_kind="run")
    assert run is not None
    assert store.schedules.count_active_runs(sid) == 1
    store.update_status(
        "schedule_run", run.id, new_status="skipped", reason_code="schedule.skipped.overlap"
    )
    assert store.schedules.count_active_runs(sid) == 0


def test_apply_does_not_undo_what_a_worker_disabled(store: Store, tmp_path: Path) -> None:
    row = registry.add(store, definition(tmp_path, "capped", max_runs="1"), now=NOW)
    store.schedules.change(
        row.id, new_status="disabled", reason_code="schedule_definition.disabled.max_runs",
        source="system",
    )  # fmt: skip
    wanted = [definition(tmp_path, "capped", max_runs="1")]
    (change,) = registry.plan(store.schedules.list_all(), wanted, now=NOW)
    assert change.op == "unchanged"
    assert "li schedule enable capped" in change.why
    raised = [definition(tmp_path, "capped", max_runs="5")]
    (change,) = registry.plan(store.schedules.list_all(), raised, now=NOW)
    assert change.op == "update"  # a changed definition is applied, and enabled again
    registry.apply(store, [change], now=NOW, source="f")
    assert store.schedules.list_all()[0].status == "enabled"


def test_a_row_without_a_definition_is_replaced_by_apply(store: Store, tmp_path: Path) -> None:
    legacy = store.schedules.create(name="old", fields={"action_kind": "agent", "spec": "@daily"})
    registry.set_enabled(store, "old", False, now=NOW)
    with pytest.raises(UsageError, match="holds no definition"):
        registry.set_enabled(store, "old", True, now=NOW)
    (change,) = registry.plan(store.schedules.list_all(), [definition(tmp_path, "old")], now=NOW)
    assert change.op == "update"
    assert "definition" in change.changes
    registry.apply(store, [change], now=NOW, source="f")
    row = store.schedules.get("old")
    assert row is not None
    assert row.id == legacy.id
    assert row.status == "enabled"
    assert row.trigger_json["kind"] == "every"


def test_apply_does_not_overwrite_a_change_made_after_its_plan(
    store: Store, tmp_path: Path
) -> None:
    registry.add(store, definition(tmp_path, "busy"), now=NOW)
    wanted = [definition(tmp_path, "busy", retries="3")]
    changes = registry.plan(store.schedules.list_all(), wanted, now=NOW)
    registry.set_enabled(store, "busy", False, now=NOW)  # someone else, meanwhile
    lost = registry.apply(store, changes, now=NOW, source="f")
    assert [(c.op, c.name) for c in lost] == [("update", "busy")]
    row = store.schedules.get("busy")
    assert row is not None
    assert row.status == "disabled"
    assert row.policies_json["retries"] == 0


def test_an_agent_action_takes_a_stall_limit_and_a_run_action_none(tmp_path: Path) -> None:
    action = parse_action(["agent", "codex", "go", "--stall-timeout", "0", "--cwd", str(tmp_path)])
    assert action.task is not None
    assert action.task.stall_timeout == 0.0
    assert Action.from_dict(action.to_dict()) == action
    with pytest.raises(UsageError, match="unknown option '--stall-timeout'"):
        parse_action(["run", "--stall-timeout", "5", "true"], base=str(tmp_path))
    with pytest.raises(UsageError, match="negative; give 0 \\(off\\)"):
        parse_action(["agent", "codex", "go", "--stall-timeout", "-3"], base=str(tmp_path))


# --- who changed it ---------------------------------------------------------------------------


def test_the_actor_is_the_login_name_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOGNAME", "alice")
    assert registry.current_actor() == "alice"


def test_without_login_variables_the_actor_is_the_account_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.delenv(key, raising=False)
    assert registry.current_actor() == pwd.getpwuid(os.getuid()).pw_name


def test_a_schedule_row_holds_every_column_of_the_schedules_table(
    store: Store, tmp_path: Path
) -> None:
    """``ScheduleRow.from_row`` names each column: one the table gains fails here; the
    plain dict the JSON outputs print is the row's, JSON columns decoded."""
    row = registry.add(store, definition(tmp_path), now=NOW)
    raw = store.connector.read(store.sql("get_live_schedule"), {"name": row.name})
    assert set(raw[0]) == set(ScheduleRow._fields)
    as_stored = dict(raw[0])
    for key in ("action_json", "trigger_json", "policies_json"):
        as_stored[key] = json.loads(as_stored[key])
    assert row.as_dict() == as_stored

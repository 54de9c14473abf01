"""A retried run of an event schedule keeps its event (issue 32): with real ``li worker``
processes on SQLite and PostgreSQL, a poll schedule's and a chain schedule's run whose
agent is overloaded the first time (a reason a retry may fix) is tried again as
attempt 2 with the same ``LIRUN_EVENT_KEY``, ``LIRUN_EVENT``, rendered prompt and, for a
chain, parent run and depth; the event counts once, as fired, in ``li schedule show``
and the metric. The store's ``queue_retry`` carries every column that says what the run
was for, for each event source."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from lirun.schedules import registry
from lirun.schedules.actions import parse_action
from lirun.schedules.definition import Definition, make_policies
from lirun.schedules.runner import RunContext
from lirun.schedules.submit import submit_once
from lirun.schedules.triggers import parse_trigger
from lirun.store import Store
from lirun.store.rows import ScheduleRunRow
from lirun.ui.metrics import render
from support.cli import li_command
from support.providerkit import FAKE_PROVIDER, fixture_path
from support.workerkit import until, workers
from test_metrics import samples, value

OVERLOADED = (
    '{"type":"system","subtype":"init","session_id":"s","model":"m"}\n'
    '{"type":"result","subtype":"success","is_error":true,"api_error_status":529,'
    '"result":"API Error: 529 overloaded","session_id":"s"}\n'
)

# What each call of the agent saw: its prompt (on stdin, as the CLI reads it) and the
# event in its environment.
RECORD = """\
import json, os, sys
with open(sys.argv[1], "a") as file:
    seen = {"prompt": sys.stdin.read(), "key": os.environ.get("LIRUN_EVENT_KEY"),
            "event": os.environ.get("LIRUN_EVENT")}
    file.write(json.dumps(seen) + "\\n")
"""


def overloaded_once_agent(tmp_path: Path) -> tuple[Path, Path]:
    """An agent executable that records each call and is overloaded (529:
    run.failed.provider_overloaded, which a retry may fix) unless a marker file exists,
    creating it; (the executable, the file of its calls)."""
    (tmp_path / "overloaded.jsonl").write_text(OVERLOADED)
    (tmp_path / "record.py").write_text(RECORD)
    calls, marker = tmp_path / "calls.jsonl", tmp_path / "called-once"
    script = tmp_path / "agent"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --version ]; then F=x;\n'
        f'else "{sys.executable}" "{tmp_path / "record.py"}" "{calls}" "$@";\n'
        f'  if [ -e "{marker}" ]; then F="{fixture_path("claude/success.jsonl")}";\n'
        f'  else : > "{marker}"; F="{tmp_path / "overloaded.jsonl"}"; fi; fi\n'
        f'LIRUN_FAKE_FIXTURE="$F" LIRUN_FAKE_EXIT=0 exec "{sys.executable}" '
        f'"{FAKE_PROVIDER}" "$@"\n'
    )
    script.chmod(0o755)
    return script, calls


def li(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        li_command(*args), env=env, capture_output=True, text=True, timeout=60, check=False
    )


def calls_of(path: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def both_attempts(store: Store, name: str) -> tuple[ScheduleRunRow, ScheduleRunRow] | None:
    """The schedule's first run and its retry once both ended, else None."""
    row = store.schedules.get(name)
    assert row is not None
    runs = sorted(store.schedules.list_runs(row.id), key=lambda r: r.attempt)
    if len(runs) < 2 or any(r.ended_at is None for r in runs):
        return None
    assert len(runs) == 2, runs
    return runs[0], runs[1]


def assert_retried_with_its_event(first: ScheduleRunRow, retry: ScheduleRunRow) -> None:
    assert (first.attempt, first.status) == (1, "failed")
    assert first.status_reason_code == "run.failed.provider_overloaded"
    assert (retry.attempt, retry.status, retry.retry_of) == (2, "completed", first.id)
    carried = ("event_key", "event_json", "chain_parent_id", "chain_depth", "schedule_id")
    assert [getattr(retry, c) for c in carried] == [getattr(first, c) for c in carried]
    assert retry.event_key is not None
    assert retry.event_json is not None


def fired_metric(store: Store, db_url: str, name: str, source: str) -> float:
    found = samples(render(store, db_url).decode())
    return value(found, "lirun_schedule_events_fired_total", schedule=name, source=source)


def test_a_poll_schedules_retry_keeps_its_event(
    store: Store, db_url: str, li_env: dict[str, str], tmp_path: Path
) -> None:
    agent, calls = overloaded_once_agent(tmp_path)
    env = {**li_env, "LIRUN_CLAUDE_BIN": str(agent)}
    feed = tmp_path / "feed.json"
    feed.write_text("[]")
    added = li(
        env, "schedule", "add", "prs", "--poll", f"cat {feed}", "--key", "number",
        "--every", "1s", "--retries", "1",
        "--", "agent", "claude", "Review {{ event.number }}: {{ event.title }}",
        "--cwd", str(tmp_path),
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    with workers(env, tmp_path):
        until(lambda: (store.schedules.get("prs") or _NO).last_poll_ok_at, what="the baseline")
        feed.write_text(json.dumps([{"number": 7, "title": "Fix 7"}]))
        first, retry = until(lambda: both_attempts(store, "prs"), timeout=40, what="2 attempts")
    assert_retried_with_its_event(first, retry)
    assert retry.event_key == "7"
    assert json.loads(retry.event_json or "") == {"number": 7, "title": "Fix 7"}
    seen = calls_of(calls)
    assert len(seen) == 2, seen
    for call in seen:  # each attempt: the same event, rendered the same way
        assert call["key"] == "7"
        assert json.loads(str(call["event"])) == {"number": 7, "title": "Fix 7"}
        assert str(call["prompt"]).strip() == "Review 7: Fix 7"
    # one event, one run fired: a retry is an attempt of that run, not another event
    show = li(env, "schedule", "show", "prs")
    assert "1 seen, 1 fired a run" in show.stdout, show.stdout
    assert fired_metric(store, db_url, "prs", "poll") == 1
    status = li(env, "status", retry.id).stdout
    assert "event key" in status
    assert "Fix 7" in status


def test_a_chain_schedules_retry_keeps_its_parent_and_event(
    store: Store, db_url: str, li_env: dict[str, str], tmp_path: Path
) -> None:
    agent, calls = overloaded_once_agent(tmp_path)
    env = {**li_env, "LIRUN_CLAUDE_BIN": str(agent)}
    for args in (
        ["build", "--every", "1h", "--", "run", "--cwd", str(tmp_path), "true"],
        [
            "deploy", "--after", "build", "--retries", "1",
            "--", "agent", "claude", "deploy after {{ event.schedule }} run {{ event.id }}",
            "--cwd", str(tmp_path),
        ],
    ):  # fmt: skip
        added = li(env, "schedule", "add", *args)
        assert added.returncode == 0, added.stderr
    parent = li(env, "schedule", "fire", "build").stdout.strip()
    with workers(env, tmp_path):
        first, retry = until(lambda: both_attempts(store, "deploy"), timeout=40, what="2 attempts")
    assert_retried_with_its_event(first, retry)
    assert (retry.event_key, retry.chain_parent_id, retry.chain_depth) == (parent, parent, 1)
    assert json.loads(retry.event_json or "")["id"] == parent
    seen = calls_of(calls)
    assert len(seen) == 2, seen
    for call in seen:
        assert call["key"] == parent
        assert json.loads(str(call["event"]))["status"] == "completed"
        assert str(call["prompt"]).strip() == f"deploy after build run {parent}"
    assert "1 seen, 1 fired a run" in li(env, "schedule", "show", "deploy").stdout
    assert fired_metric(store, db_url, "deploy", "chain") == 1
    status = [line.split() for line in li(env, "status", retry.id).stdout.splitlines()]
    assert ["chain", "parent", "id", parent] in status
    assert ["chain", "depth", "1"] in status


class _NoSchedule:
    last_poll_ok_at = None


_NO = _NoSchedule()


def _ended_retryable(store: Store, run_id: str) -> ScheduleRunRow:
    for status, reason in (
        ("running", "schedule.running.started"),
        ("failed", "run.failed.provider_overloaded"),
    ):
        assert store.update_status("schedule_run", run_id, new_status=status, reason_code=reason)
    run = store.schedules.get_run(run_id)
    assert run is not None
    return run


def test_queue_retry_carries_what_the_run_was_for_from_each_source(
    store: Store, tmp_path: Path
) -> None:
    """Every column that says what a run was for is the retry's too (its id, status,
    lease, products and idempotency key are its own); the action the worker renders
    from the retry is the attempt's."""
    now = int(time.time())
    sources = {
        "poll": parse_trigger(poll="true", key="number", now=now),
        "webhook": parse_trigger(webhook=True, secret_env="S", now=now),
        "chain": parse_trigger(after="build", now=now),
    }
    registry.add(
        store,
        Definition(
            name="build",
            trigger=parse_trigger(every="1h", now=now),
            action=parse_action(["run", "true"], base=str(tmp_path)),
            policies=make_policies({}, None),
        ),
        now=now,
    )
    carried = (
        "schedule_id", "action_kind", "action_json", "due_at", "event_key", "event_json",
        "chain_parent_id", "chain_depth", "lease_epoch",
    )  # fmt: skip
    for source, trigger in sources.items():
        schedule = registry.add(
            store,
            Definition(
                name=f"on-{source}",
                trigger=trigger,
                action=parse_action(["run", "echo", "{{ event.n }}"], base=str(tmp_path)),
                policies=make_policies({"retries": 1}, trigger),
            ),
            now=now,
        )
        chained = {"chain_parent_id": "parent-run", "chain_depth": 3} if source == "chain" else {}
        run_id = store.events.record(
            schedule_id=schedule.id, event_key=f"k-{source}", event_json='{"n": 5}',
            source=source, action_kind="run", **chained,  # type: ignore[arg-type]
        ).run_id  # fmt: skip
        assert run_id is not None
        first = _ended_retryable(store, run_id)
        retry = store.schedules.queue_retry(first)
        assert retry is not None
        assert [getattr(retry, c) for c in carried] == [getattr(first, c) for c in carried]
        assert (retry.retry_of, retry.attempt, retry.status) == (first.id, 2, "queued")
        assert retry.event_key == f"k-{source}"
        assert retry.chain_depth == (3 if source == "chain" else 0)
        action = RunContext(store, retry).action
        assert action is not None
        assert action == RunContext(store, first).action
        assert action.task is not None
        assert "5" in str(action.to_dict())
    # an ad-hoc run: its own action, no event, and its key stays the first attempt's
    adhoc = submit_once(store, parse_action(["run", "true"], base=str(tmp_path)), key="once").run
    retry = store.schedules.queue_retry(_ended_retryable(store, adhoc.id))
    assert retry is not None
    assert (retry.event_key, retry.event_json, retry.chain_parent_id) == (None, None, None)
    assert (retry.chain_depth, retry.idempotency_key) == (0, None)
    assert retry.action_json == adhoc.action_json

"""Poll triggers against the store on SQLite and PostgreSQL, with real poll commands:
new items fire once, old ones never; the first poll is a baseline unless --backfill;
failures are recorded with their reason and fire nothing, and lose nothing; an event is
stored exactly once with its run (store/event_records.py, schedules/polling.py)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from lirun.errors import UsageError
from lirun.schedules import registry
from lirun.schedules.actions import parse_action
from lirun.schedules.definition import Definition, make_policies
from lirun.schedules.polling import poll_env
from lirun.schedules.submit import fire_now
from lirun.schedules.triggers import poll_trigger
from lirun.schedules.worker import fire_due
from lirun.store import Store
from lirun.store.rows import ScheduleRow

NOW = int(time.time())


class Feed:
    """A fake source: a JSON-lines file a test appends items to."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.write_text("")

    def add(self, *numbers: int) -> None:
        with self.path.open("a") as file:
            for n in numbers:
                file.write(json.dumps({"number": n, "title": f"pr {n}"}) + "\n")


def add_poll(
    store: Store, tmp_path: Path, command: str, *, backfill: bool = False, **policies: object
) -> ScheduleRow:
    trigger = poll_trigger(command, NOW, every="1s", key="number", backfill=backfill, timeout="2s")
    definition = Definition(
        name="prs",
        trigger=trigger,
        action=parse_action(["run", "echo", "{{ event.number }}"], base=str(tmp_path)),
        policies=make_policies(dict(policies), trigger),
    )
    return registry.add(store, definition, now=NOW)


def poll(store: Store) -> list[str]:
    """One poll of ``prs`` as a worker makes it: the run ids it queued."""
    row = store.schedules.get("prs")
    assert row is not None
    assert row.next_due_at is not None
    queued: list[str] = []
    fire_due(store, int(row.next_due_at), queued.append)
    return queued


def keys_of(store: Store, run_ids: list[str]) -> list[str]:
    return [str(r.event_key) for r in (store.schedules.get_run(i) for i in run_ids) if r]


def test_new_items_fire_once_and_the_first_poll_is_a_baseline(store: Store, tmp_path: Path) -> None:
    feed = Feed(tmp_path / "feed.jsonl")
    feed.add(1, 2)
    schedule = add_poll(store, tmp_path, f"cat {feed.path}")
    assert poll(store) == []  # the baseline: seen, nothing fired
    assert store.events.count(schedule.id) == (2, 0)
    assert poll(store) == []  # nothing new
    feed.add(3)
    fired = poll(store)
    assert keys_of(store, fired) == ["3"]
    run = store.schedules.get_run(fired[0])
    assert run is not None
    assert run.status == "queued"
    assert json.loads(run.event_json or "") == {"number": 3, "title": "pr 3"}
    assert poll(store) == []  # 3 is seen now
    feed.add(4, 5)
    assert sorted(keys_of(store, poll(store))) == ["4", "5"]
    row = store.schedules.get("prs")
    assert row is not None
    assert row.last_poll_reason == "schedule.poll.ok"
    assert row.last_poll_detail == "5 items, 2 new (2 queued)"
    assert store.events.count(schedule.id) == (5, 3)
    events = {e.event_key: e for e in store.events.list(schedule.id)}
    assert events["1"].baseline
    assert events["1"].schedule_run_id is None
    assert events["4"].schedule_run_id is not None
    assert not events["4"].baseline


def test_backfill_fires_what_the_first_poll_finds(store: Store, tmp_path: Path) -> None:
    feed = Feed(tmp_path / "feed.jsonl")
    feed.add(1, 2)
    add_poll(store, tmp_path, f"cat {feed.path}", backfill=True)
    assert sorted(keys_of(store, poll(store))) == ["1", "2"]
    assert poll(store) == []


def test_failed_polls_are_recorded_fire_nothing_and_lose_nothing(
    store: Store, tmp_path: Path
) -> None:
    feed = Feed(tmp_path / "feed.jsonl")
    feed.add(1)
    mode = tmp_path / "mode"
    mode.write_text("ok")
    script = tmp_path / "source.py"
    script.write_text(
        "import sys, time\n"
        f"mode = open({str(mode)!r}).read()\n"
        "if mode == 'exit': sys.exit(3)\n"
        "if mode == 'sleep': time.sleep(30)\n"
        "if mode == 'text': print('<html>')\n"
        "if mode == 'scalar': print('[1, 2]')\n"
        "if mode == 'nokey': print('{\"title\": \"x\"}')\n"
        f"if mode == 'ok': print(open({str(feed.path)!r}).read())\n"
    )
    schedule = add_poll(store, tmp_path, f"{sys.executable} {script}")
    assert poll(store) == []  # the baseline: 1
    feed.add(2)
    for what, reason, says in [
        ("exit", "schedule.poll.failed_exit", "exited 3"),
        ("sleep", "schedule.poll.timed_out", "ran past 2s"),
        ("text", "schedule.poll.bad_output", "line 1 is not JSON"),
        ("scalar", "schedule.poll.bad_output", "item 0 is int"),
        ("nokey", "schedule.poll.bad_output", "item 0 has no text or number at key 'number'"),
    ]:
        mode.write_text(what)
        began = time.monotonic()
        assert poll(store) == [], what
        assert time.monotonic() - began < 10, "the timeout did not stop the poll"
        row = store.schedules.get("prs")
        assert row is not None
        assert (row.last_poll_reason, what) == (reason, what)
        assert says in (row.last_poll_detail or ""), (what, row.last_poll_detail)
    assert store.events.count(schedule.id) == (1, 0)
    mode.write_text("ok")
    assert keys_of(store, poll(store)) == ["2"]  # the next good poll fires what is new


def test_an_event_is_stored_once_with_its_run(store: Store, tmp_path: Path) -> None:
    schedule = add_poll(store, tmp_path, "true")
    first = store.events.record(
        schedule_id=schedule.id, event_key="9", event_json="{}", action_kind="run"
    )
    again = store.events.record(
        schedule_id=schedule.id, event_key="9", event_json="{}", action_kind="run"
    )
    assert first[0] is True
    assert first[1] is not None
    assert again == (False, None, None)
    runs = store.schedules.list_runs(schedule.id)
    assert [(r.id, r.event_key) for r in runs] == [(first[1], "9")]


def test_a_batch_of_events_is_stored_whole_or_not_at_all(store: Store, tmp_path: Path) -> None:
    schedule = add_poll(store, tmp_path, "true")
    with pytest.raises(RuntimeError), store.events.batch() as batch:
        for key in ("1", "2"):
            batch.record(schedule_id=schedule.id, event_key=key, event_json="{}", action_kind="run")
        raise RuntimeError("the worker died mid-batch")
    assert store.events.count(schedule.id) == (0, 0)
    assert store.schedules.list_runs(schedule.id) == []
    with store.events.batch() as batch:
        made = [
            batch.record(schedule_id=schedule.id, event_key=k, event_json="{}", action_kind="run")
            for k in ("1", "1", "2")
        ]
    assert [r.stored for r in made] == [True, False, True]
    assert store.events.count(schedule.id) == (2, 2)


def test_max_runs_skips_the_events_past_it_and_disables(store: Store, tmp_path: Path) -> None:
    feed = Feed(tmp_path / "feed.jsonl")
    add_poll(store, tmp_path, f"cat {feed.path}", max_runs=1)
    poll(store)
    feed.add(1, 2)
    assert keys_of(store, poll(store)) == ["1"]
    row = store.schedules.get("prs")
    assert row is not None
    assert row.status == "disabled"
    skipped = [r for r in store.schedules.list_runs(row.id) if r.event_key == "2"]
    assert [r.status_reason_code for r in skipped] == ["schedule.skipped.max_runs"]


def test_a_poll_schedule_cannot_be_fired_by_hand(store: Store, tmp_path: Path) -> None:
    add_poll(store, tmp_path, "true")
    with pytest.raises(UsageError, match="cannot be fired by hand"):
        fire_now(store, "prs")
    row = store.schedules.get("prs")
    assert row is not None
    assert store.schedules.list_runs(row.id) == []


def test_the_poll_command_never_sees_the_database_password() -> None:
    env = poll_env("postgresql://ann:s3cret@db.example:5432/lirun")
    assert "s3cret" not in env.get("LIRUN_DB_URL", "")
    assert "db.example" in env["LIRUN_DB_URL"]
    assert "s3cret" not in "".join(env.values())

"""Poll triggers with real ``li worker`` processes and a fake ``gh`` on PATH that prints
the pull requests a test appends to a file: the documented example end to end on
SQLite (the event in the command's arguments and environment, ``li schedule runs``,
``show`` and ``li status``), and exactly once with three workers on PostgreSQL polling
one source while items keep coming and one worker is SIGKILLed in the middle of a poll."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lirun.record.reap_schedule_runs import LEASE_LAPSED
from lirun.store import Store, open_store
from support.cli import li_command
from support.pg import make_pg_url
from support.workerkit import until, workers

FAKE_GH = """\
import json, os, sys
import psutil
here = os.path.dirname(os.path.abspath(__file__))
kill = os.path.join(here, "kill-worker")
if os.path.exists(kill):
    os.unlink(kill)
    proc = psutil.Process()
    while proc is not None and "worker" not in proc.cmdline():  # li worker's argv
        proc = proc.parent()
    if proc is not None:
        proc.kill()  # SIGKILL: the worker dies holding a claimed poll
        raise SystemExit(1)
with open(os.path.join(here, "prs.jsonl")) as file:
    print(json.dumps([json.loads(line) for line in file if line.strip()]))
"""

RECORD = """\
import json, os, sys
out = os.path.join(sys.argv[1], "seen-" + os.environ["LIRUN_EVENT_KEY"])
event = json.loads(os.environ["LIRUN_EVENT"])
with open(out, "a") as file:
    file.write(json.dumps({"argv": sys.argv[2:], "event": event}) + "\\n")
"""


class FakeGitHub:
    def __init__(self, root: Path) -> None:
        self.bin = root / "bin"
        self.bin.mkdir()
        self.feed = self.bin / "prs.jsonl"
        self.feed.write_text("")
        (self.bin / "gh.py").write_text(FAKE_GH)
        gh = self.bin / "gh"
        gh.write_text(f'#!/bin/sh\nexec {sys.executable} "$(dirname "$0")/gh.py" "$@"\n')
        gh.chmod(0o755)
        self.out = root / "out"
        self.out.mkdir()
        (root / "record.py").write_text(RECORD)

    def add(self, *numbers: int) -> None:
        with self.feed.open("a") as file:
            for n in numbers:
                item = {"number": n, "title": f"Fix {n}", "url": f"https://x/pull/{n}"}
                file.write(json.dumps(item) + "\n")

    def seen(self) -> dict[str, list[dict[str, object]]]:
        found = {}
        for path in self.out.iterdir():
            lines = path.read_text().splitlines()
            found[path.name.removeprefix("seen-")] = [json.loads(x) for x in lines]
        return found


def environment(url: str, tmp_path: Path, gh: FakeGitHub) -> dict[str, str]:
    env = dict(os.environ)
    home = tmp_path / "li-home"
    home.mkdir(exist_ok=True)
    env.update(
        {
            "LIRUN_HOME": str(home),
            "LIRUN_DB_URL": url,
            "PYTHONUNBUFFERED": "1",
            "PATH": f"{gh.bin}{os.pathsep}{env.get('PATH', '')}",
        }
    )
    return env


def li(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        li_command(*args), env=env, capture_output=True, text=True, timeout=60, check=False
    )


def add_prs(env: dict[str, str], tmp_path: Path, *extra: str) -> None:
    done = li(
        env,
        "schedule", "add", "prs",
        "--poll", "gh pr list --json number,title,headRefName,url",
        "--key", "number", "--every", "1s", *extra,
        "--", "run", "--cwd", str(tmp_path), sys.executable, "record.py", str(tmp_path / "out"),
        "Review pull request {{ event.number }}: {{ event.title }} ({{ event.url }})",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.fixture
def gh(tmp_path: Path) -> FakeGitHub:
    return FakeGitHub(tmp_path)


def test_the_documented_example_fires_each_new_pull_request_once_with_its_event(
    tmp_path: Path, gh: FakeGitHub
) -> None:
    env = environment(str(tmp_path / "state.db"), tmp_path, gh)
    gh.add(1, 2)
    add_prs(env, tmp_path)
    store = open_store(env["LIRUN_DB_URL"])
    try:
        with workers(env, tmp_path):
            until(lambda: _polled_ok(store), what="the baseline poll")
            gh.add(3)
            until(lambda: "3" in gh.seen(), what="the run of pull request 3")
            time.sleep(2.5)  # more polls: nothing fires again
        seen = gh.seen()
        assert list(seen) == ["3"]
        assert seen["3"] == [
            {
                "argv": ["Review pull request 3: Fix 3 (https://x/pull/3)"],
                "event": {"number": 3, "title": "Fix 3", "url": "https://x/pull/3"},
            }
        ]
        runs = li(env, "schedule", "runs", "prs")
        assert runs.returncode == 0, runs.stderr
        assert "EVENT" in runs.stdout
        assert len([x for x in runs.stdout.splitlines()[1:] if " 3 " in x]) == 1
        show = li(env, "schedule", "show", "prs")
        assert "last poll" in show.stdout
        assert "schedule.poll.ok" in show.stdout
        assert "3 seen, 1 fired a run" in show.stdout
        detail = json.loads(li(env, "schedule", "show", "prs", "--json").stdout)
        assert detail["events"]["seen"] == 3
        run_id = json.loads(li(env, "schedule", "runs", "prs", "--json").stdout)[0]["id"]
        status = li(env, "status", run_id)
        assert "event key" in status.stdout
        assert "Fix 3" in status.stdout
    finally:
        store.close()


def _ended(store: Store, schedule_id: str) -> int:
    runs = store.schedules.list_runs(schedule_id, limit=1000)
    return len([r for r in runs if r.status in ("completed", "failed")])


def _polled_ok(store: Store) -> bool:
    row = store.schedules.get("prs")
    return row is not None and row.last_poll_ok_at is not None


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--poll", "gh pr list", "--key", "a..b"], "is not a field path"),
        (["--poll", "gh pr list", "--cron", "* * * * *"], "cannot take --cron"),
        (["--every", "1m", "--key", "number"], "--key belongs to a poll trigger"),
        (["--poll", "gh pr list", "--key", "n"], "reads vars"),
        (["--every", "1m"], "only an event schedule"),
    ],
)
def test_schedule_add_refuses_bad_poll_inputs_with_one_line(
    tmp_path: Path, gh: FakeGitHub, args: list[str], says: str
) -> None:
    env = environment(str(tmp_path / "state.db"), tmp_path, gh)
    prompt = "{{ vars.x }}" if says == "reads vars" else "{{ event.number }}"
    done = li(env, "schedule", "add", "bad", *args, "--", "run", "echo", prompt)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.fixture
def pg_url() -> Iterator[str]:
    yield from make_pg_url()


@pytest.mark.postgres
@pytest.mark.slow
def test_three_workers_on_postgresql_fire_each_new_item_exactly_once(
    pg_url: str, tmp_path: Path, gh: FakeGitHub
) -> None:
    env = environment(pg_url, tmp_path, gh)
    gh.add(0)
    add_prs(env, tmp_path)
    store = open_store(pg_url)
    try:
        with workers(env, tmp_path, "--concurrency", "2", "--lease", "2s", count=3) as procs:
            until(lambda: _polled_ok(store), what="the baseline poll")
            for n in range(1, 41):
                gh.add(n)
                if n == 20:
                    (gh.bin / "kill-worker").write_text("")
                time.sleep(0.1)
            row = store.schedules.get("prs")
            assert row is not None
            until(lambda: _ended(store, row.id) >= 40, timeout=60, what="40 runs ended")
            time.sleep(3)  # polls and runs after: nothing more
            killed = [p for p in procs if p.proc.poll() is not None]
        assert len(killed) == 1, "the fake gh did not kill a worker mid-poll"
        runs = store.schedules.list_runs(row.id, limit=1000)
        # A run the killed worker held when it died fails by its lease: fired once, run
        # at most once (the fake gh kills the worker whatever it runs at that moment).
        lapsed = {str(r.event_key) for r in runs if r.status_reason_code == LEASE_LAPSED}
        assert all(r.status == "completed" for r in runs if r.event_key not in lapsed)
        seen = gh.seen()
        assert sorted(set(seen) | lapsed, key=int) == [str(n) for n in range(1, 41)]
        assert all(len(lines) == 1 for lines in seen.values()), "an item ran twice"
        keys = [r.event_key for r in runs]
        assert len(keys) == len(set(keys)) == 40
        assert store.events.count(row.id) == (41, 40)
    finally:
        store.close()

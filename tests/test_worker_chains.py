"""Chains with real ``li worker`` processes: "when a build completes, deploy" end to end
on SQLite (the parent's record in the child's arguments and environment, ``li schedule
show`` / ``runs``, ``li status`` naming the parent and depth, ``li schedule fire``
refused), a parent that ended while no worker ran, and exactly once with two workers
on PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lirun.store import open_store
from support.cli import li_command
from support.pg import make_pg_url
from support.workerkit import until, workers

RECORD = """\
import json, os, sys
out = os.path.join(sys.argv[1], "deploy-" + os.environ["LIRUN_EVENT_KEY"])
with open(out, "a") as file:
    file.write(json.dumps({"argv": sys.argv[2:], "event": json.loads(os.environ["LIRUN_EVENT"])}))
    file.write("\\n")
"""


def environment(url: str, tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    home = tmp_path / "li-home"
    home.mkdir(exist_ok=True)
    env.update({"LIRUN_HOME": str(home), "LIRUN_DB_URL": url, "PYTHONUNBUFFERED": "1"})
    (tmp_path / "record.py").write_text(RECORD)
    (tmp_path / "out").mkdir(exist_ok=True)
    return env


def li(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        li_command(*args), env=env, capture_output=True, text=True, timeout=60, check=False
    )


def add_pair(env: dict[str, str], tmp_path: Path, build_exit: int = 0) -> None:
    done = li(
        env, "schedule", "add", "build", "--every", "1h",
        "--", "run", "--cwd", str(tmp_path), "sh", "-c", f"exit {build_exit}",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = li(
        env, "schedule", "add", "deploy", "--after", "build",
        "--", "run", "--cwd", str(tmp_path), sys.executable, "record.py", str(tmp_path / "out"),
        "deploy after {{ event.schedule }} {{ event.status }} run {{ event.id }}",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def seen(tmp_path: Path) -> dict[str, list[dict[str, object]]]:
    found = {}
    for path in (tmp_path / "out").iterdir():
        found[path.name.removeprefix("deploy-")] = [
            json.loads(x) for x in path.read_text().splitlines()
        ]
    return found


def fire(env: dict[str, str], name: str) -> str:
    done = li(env, "schedule", "fire", name)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_when_a_build_completes_deploy_end_to_end(tmp_path: Path) -> None:
    env = environment(str(tmp_path / "state.db"), tmp_path)
    add_pair(env, tmp_path)
    refused = li(env, "schedule", "fire", "deploy")
    assert refused.returncode == 2
    assert "--after" in refused.stderr
    parent = fire(env, "build")  # ends while no worker runs
    with workers(env, tmp_path):
        until(lambda: parent in seen(tmp_path), what="deploy after the build")
    (record,) = seen(tmp_path)[parent]
    assert record["argv"] == [f"deploy after build completed run {parent}"]
    event = record["event"]
    assert isinstance(event, dict)
    assert (event["id"], event["schedule"], event["status"]) == (parent, "build", "completed")
    assert event["exit_code"] == 0
    show = li(env, "schedule", "show", "deploy").stdout
    assert "after build completes" in show
    assert "1 seen, 1 fired a run" in show
    runs = li(env, "schedule", "runs", "deploy").stdout
    assert parent in runs
    run_id = json.loads(li(env, "schedule", "runs", "deploy", "--json").stdout)[0]["id"]
    status = [line.split() for line in li(env, "status", run_id).stdout.splitlines()]
    assert ["chain", "parent", "id", parent] in status
    assert ["chain", "depth", "1"] in status


@pytest.fixture
def pg_url() -> Iterator[str]:
    yield from make_pg_url()


@pytest.mark.postgres
@pytest.mark.slow
def test_two_workers_on_postgresql_fire_each_parent_once(pg_url: str, tmp_path: Path) -> None:
    env = environment(pg_url, tmp_path)
    add_pair(env, tmp_path)
    store = open_store(pg_url)
    try:
        with workers(env, tmp_path, "--concurrency", "2", count=2):
            parents = [fire(env, "build") for _ in range(6)]
            until(lambda: set(parents) <= set(seen(tmp_path)), timeout=40, what="6 deploys")
        assert all(len(seen(tmp_path)[p]) == 1 for p in parents)
        deploy = store.schedules.get("deploy")
        assert deploy is not None
        runs = store.schedules.list_runs(deploy.id)
        assert sorted(r.chain_parent_id or "" for r in runs) == sorted(parents)
    finally:
        store.close()


def test_a_parent_that_ended_while_no_worker_ran_fires_when_one_starts(tmp_path: Path) -> None:
    env = environment(str(tmp_path / "state.db"), tmp_path)
    add_pair(env, tmp_path)
    parent = fire(env, "build")
    store = open_store(env["LIRUN_DB_URL"])
    try:  # the run ended (its worker then died) before any sweep saw it
        for status, reason in (
            ("running", "schedule.running.started"),
            ("completed", "schedule.completed.ok"),
        ):
            store.update_status("schedule_run", parent, new_status=status, reason_code=reason)
    finally:
        store.close()
    assert seen(tmp_path) == {}
    with workers(env, tmp_path):
        until(lambda: parent in seen(tmp_path), what="deploy after the build")
    assert len(seen(tmp_path)[parent]) == 1

"""What needs a person about runs queued for workers (``ui/attention.py``): an ad-hoc run
(``li submit``) that failed is named by its id and action with a command that works, and
a run queued past a tenth of its start deadline with no worker claiming it is listed with
the command that starts one. The rules table-tested as pure functions, the store's rows on
both backends, then real ``li submit``, ``li worker`` and ``li attention`` processes, each
hinted command run as it is printed."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from lirun.schedules.actions import parse_action
from lirun.schedules.definition import Policies
from lirun.schedules.submit import submit
from lirun.store import Store
from lirun.store.rows import AttentionQueuedRunRow, AttentionScheduleRunRow
from lirun.ui.app import create_app
from lirun.ui.attention import UNCLAIMED_SHARE, Facts, needs_you
from lirun.ui.attention_facts import attention_items
from support.cli import li_command
from support.storekit import raw_write
from support.workerkit import status_is, until, workers

NOW = 1_800_000_000.0
TIMEOUT = 90
RUN_FALSE = {"kind": "run", "cwd": "/srv/my work", "task": {"run": ["make", "nightly"]}}


def _failed(**given: Any) -> AttentionScheduleRunRow:
    fields = dict.fromkeys(AttentionScheduleRunRow._fields)
    base = {"status": "failed", "status_reason_code": "run.failed.exit_nonzero",
            "updated_at": NOW - 5, "created_at": NOW - 9}  # fmt: skip
    return AttentionScheduleRunRow.from_row({**fields, **base, **given})


def _queued(age: float, **given: Any) -> AttentionQueuedRunRow:
    fields = dict.fromkeys(AttentionQueuedRunRow._fields)
    return AttentionQueuedRunRow.from_row(
        {**fields, "id": "q1", "created_at": NOW - age, "action_json": RUN_FALSE, **given}
    )


def test_a_failed_submitted_run_is_named_by_its_id_and_action() -> None:
    facts = Facts(schedule_runs=[_failed(id="r1", action_json=RUN_FALSE)])
    [item] = needs_you(facts, NOW)
    assert item.kind == "submitted_run"
    assert item.what.startswith("submitted run r1 (run make nightly) failed (run.failed.")
    assert "None" not in item.what
    assert item.do == "li logs r1"
    assert item.href == "/?kind=schedule_run&q=r1"  # it made nothing: the runs page shows it


@pytest.mark.parametrize(
    ("made", "href"),
    [
        ({"session_id": "s9"}, "/runs/s9"),
        ({"invocation_id": "f9"}, "/flows/f9"),
        ({"show_id": "sh9"}, "/shows/sh9"),
    ],
)
def test_a_failed_submitted_run_links_to_what_it_made(made: dict[str, str], href: str) -> None:
    [item] = needs_you(Facts(schedule_runs=[_failed(id="r1", **made)]), NOW)
    assert item.href == href


def test_submitted_runs_are_one_item_each_and_apart_from_a_schedules() -> None:
    runs = [
        _failed(id="a1", action_json=RUN_FALSE),
        _failed(id="a2", action_json={**RUN_FALSE, "task": {"run": ["false"]}}),
        _failed(id="s1", schedule_id="sid", schedule_name="tick"),
        _failed(id="s2", schedule_id="sid", schedule_name="tick", updated_at=NOW - 1),
    ]
    items = needs_you(Facts(schedule_runs=runs), NOW)
    assert [(i.kind, i.id, i.do) for i in items] == [
        ("schedule", "s2", "li logs s2; li schedule runs tick"),
        ("submitted_run", "a1", "li logs a1"),
        ("submitted_run", "a2", "li logs a2"),
    ]
    assert "2 runs failed" in items[0].what


def test_an_actions_text_is_escaped_and_cut() -> None:
    long = {"kind": "agent", "cwd": "/w", "task": {"agent": "claude", "prompt": "x" * 500}}
    shady = {"kind": "run", "cwd": "/w", "task": {"run": ["echo", "\x1b[2Jgone"]}}
    items = needs_you(Facts(schedule_runs=[_failed(id="l", action_json=long),
                                           _failed(id="e", action_json=shady)]), NOW)  # fmt: skip
    texts = {i.id: i.what for i in items}
    assert "\x1b" not in texts["e"]
    assert "\\x1b[2Jgone" in texts["e"]
    assert "xxx" in texts["l"]
    assert len(texts["l"]) < 200


@pytest.mark.parametrize(
    ("age", "given", "listed"),
    [
        (3600 * UNCLAIMED_SHARE - 1, {}, False),  # default deadline 1 h: within its tenth
        (3600 * UNCLAIMED_SHARE + 1, {}, True),
        # an ad-hoc run's own --start-deadline, kept in its action
        (7, {"action_json": {**RUN_FALSE, "policies": {"start_deadline": 60}}}, True),
        (5, {"action_json": {**RUN_FALSE, "policies": {"start_deadline": 60}}}, False),
        # a schedule's run: the schedule's policy, not the action's
        (
            7,
            {
                "schedule_id": "sid",
                "schedule_name": "tick",
                "policies_json": {"start_deadline": 60},
            },
            True,
        ),
        (
            7,
            {
                "schedule_id": "sid",
                "schedule_name": "tick",
                "action_json": {**RUN_FALSE, "policies": {"start_deadline": 60}},
            },
            False,
        ),
    ],
)
def test_a_queued_run_past_a_tenth_of_its_start_deadline_is_listed(
    age: float, given: dict[str, Any], listed: bool
) -> None:
    items = needs_you(Facts(queued_runs=[_queued(age, **given)]), NOW)
    assert [i.kind for i in items] == (["queued_run"] if listed else [])


def test_an_unclaimed_run_names_the_worker_that_would_run_it() -> None:
    [alone] = needs_you(Facts(queued_runs=[_queued(600)]), NOW)
    assert alone.do == "li worker --allow-root '/srv/my work'"
    assert alone.what.startswith("submitted run q1 (run make nightly) has been queued 600 s")
    assert "no worker is live to claim it" in alone.what
    assert alone.href == "/?kind=schedule_run&q=q1"
    [busy] = needs_you(Facts(queued_runs=[_queued(600)], live_workers=2), NOW)
    assert "none of the 2 live workers claimed it" in busy.what
    gc = {"kind": "gc", "cwd": "/srv", "retention": {}}
    [cleanup] = needs_you(Facts(queued_runs=[_queued(600, action_json=gc)]), NOW)
    assert cleanup.do == "li worker"  # gc runs in no directory
    tick = _queued(600, id="q2", schedule_id="sid", schedule_name="tick")
    [scheduled] = needs_you(Facts(queued_runs=[tick]), NOW)
    assert scheduled.what.startswith("run q2 of schedule tick has been queued")
    assert scheduled.href == "/schedules/tick"


# -- the store, both backends --------------------------------------------------------------


def _age(store: Store, run_id: str, status: str, age: float) -> None:
    at = time.time() - age
    raw_write(
        store,
        "UPDATE schedule_runs SET status = :s, created_at = :at, updated_at = :at WHERE id = :id",
        {"s": status, "at": at, "id": run_id},
    )


def test_the_store_gives_failed_submitted_runs_not_retried_and_unclaimed_ones(
    store: Store, db_url: str, tmp_path: Path
) -> None:
    action = parse_action(["run", "false"], base=str(tmp_path))
    failed = submit(store, action)
    retried = submit(store, action)
    early = submit(store, action)  # queued within its deadline's first tenth
    late = submit(store, action, policies=Policies(start_deadline=60))
    _age(store, failed.id, "failed", 30)
    _age(store, retried.id, "failed", 30)
    _age(store, late.id, "queued", 7)
    source = store.schedules.get_run(retried.id)
    assert source is not None
    retry = store.schedules.queue_retry(source)
    assert retry is not None
    _age(store, retry.id, "completed", 20)
    rows = store.lists.attention_rows(since=time.time() - 3600)
    assert [r.id for r in rows.schedule_runs] == [failed.id]
    assert rows.schedule_runs[0].action_json == action.to_dict()
    assert [r.id for r in rows.queued_runs] == [late.id, early.id]
    items = {(i.kind, i.id): i for i in attention_items(store, db_url, time.time())}
    assert set(items) == {("submitted_run", failed.id), ("queued_run", late.id)}
    assert items[("queued_run", late.id)].do == f"li worker --allow-root {tmp_path}"


def test_the_links_of_submitted_runs_open_pages(store: Store, db_url: str, tmp_path: Path) -> None:
    action = parse_action(["run", "false"], base=str(tmp_path))
    failed, queued = submit(store, action), submit(store, action)
    _age(store, failed.id, "failed", 30)
    _age(store, queued.id, "queued", 600)
    with TestClient(create_app(db_url, watch=False)) as client:
        items = client.get("/api/attention").json()["items"]
        assert {i["kind"] for i in items} == {"submitted_run", "queued_run"}
        for item in items:
            page = client.get(item["href"])
            assert page.status_code == 200, item
            assert item["id"] in page.text, item


# -- real processes: each hinted command run as printed -------------------------------------


def li(
    env: dict[str, str], *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        li_command(*args), env=env, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT
    )


def hinted(item: dict[str, Any]) -> list[str]:
    words = shlex.split(item["do"])
    assert words[0] == "li", item
    return li_command(*words[1:])


def attention(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    done = li(env, "attention", "--json")
    assert done.returncode in (0, 1), done.stderr
    return {item["kind"]: item for item in json.loads(done.stdout)}


def test_a_failed_submit_is_named_and_its_hint_exits_0(
    db_url: str, li_env: dict[str, str], tmp_path: Path
) -> None:
    """``li submit`` with no worker says so (exit 0); a worker runs it and it fails;
    ``li attention`` names it by id and action, and the command it names exits 0."""
    submitted = li(
        li_env, "submit", "--", "run", "sh", "-c", "echo it broke >&2; exit 1", cwd=tmp_path
    )
    assert submitted.returncode == 0, submitted.stderr
    run_id = submitted.stdout.strip()
    assert submitted.stderr == (
        f"li submit: run {run_id} is queued, but no worker is live to run it: start one "
        f"with li worker --allow-root {tmp_path}\n"
    )
    with workers(li_env, tmp_path, "--allow-root", str(tmp_path)):
        waited = li(li_env, "wait", run_id)
    assert waited.returncode == 1, waited.stdout + waited.stderr
    item = attention(li_env)["submitted_run"]
    assert item["id"] == run_id
    assert item["what"].startswith(f"submitted run {run_id} (run sh -c ")
    assert "None" not in item["what"] + item["href"] + item["do"]
    shown = subprocess.run(hinted(item), env=li_env, capture_output=True, text=True,
                           timeout=TIMEOUT)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "it broke" in shown.stdout  # li logs: what the run printed


def test_an_unclaimed_run_hints_the_worker_that_runs_it(
    db_url: str, li_env: dict[str, str], tmp_path: Path
) -> None:
    """A run queued past a tenth of its start deadline with no worker: ``li attention``
    lists it; the command it names, run as printed, runs the run and exits 0 on SIGTERM."""
    out = tmp_path / "ran"
    words = ["run", "sh", "-c", f"echo ran > {out}"]
    submitted = li(li_env, "submit", "--start-deadline", "60s", "--", *words, cwd=tmp_path)
    assert submitted.returncode == 0, submitted.stderr
    run_id = submitted.stdout.strip()
    assert "no worker is live" in submitted.stderr
    item = until(lambda: attention(li_env).get("queued_run"), timeout=40, what="the item")
    assert item["id"] == run_id
    assert item["do"] == f"li worker --allow-root {tmp_path}"
    worker = subprocess.Popen(
        hinted(item), env=li_env, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        from lirun.store import open_store

        store = open_store(db_url)
        try:
            row = until(lambda: status_is(store, run_id, "completed", "failed"), timeout=60)
        finally:
            store.close()
        assert row["status"] == "completed", row
        assert out.read_text() == "ran\n"
        worker.terminate()
        _, err = worker.communicate(timeout=TIMEOUT)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert worker.returncode == 0, err
    assert "queued_run" not in attention(li_env)
    assert os.path.exists(out)

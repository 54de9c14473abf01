"""--overlap per event key for webhooks (issue 32, item 5) through a real dashboard
server on both backends: two deliveries about the same subject (the value at --key,
while each has its own delivery id) run one at a time under ``skip`` (the second's run is
stored skipped, naming the run it overlapped), both under ``allow``; a subject whose run
ended runs again; concurrent deliveries about one subject run exactly one."""

from __future__ import annotations

import json
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lirun.schedules import registry
from lirun.schedules.actions import parse_action
from lirun.schedules.definition import Definition, make_policies
from lirun.schedules.firing import OVERLAP, overlap_refusal
from lirun.schedules.triggers import parse_trigger
from lirun.schedules.webhook_intake import receive
from lirun.store import Store, open_store
from lirun.store.rows import ScheduleRunRow
from support.cli import li_command
from support.uikit import serve
from test_webhook import SECRET, VAR, post, signed


def add_hook(store: Store, tmp_path: Path, name: str, overlap: str, key: str = "number") -> None:
    trigger = parse_trigger(now=1, webhook=True, secret_env=VAR, key=key)
    action = parse_action(["run", "--cwd", str(tmp_path), "echo", "{{ event.number }}"])
    policies = make_policies({"overlap": overlap}, trigger)
    registry.add(store, Definition(name, trigger, action, policies), now=1, actor="test")


@pytest.fixture
def server(
    store: Store, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    monkeypatch.setenv(VAR, SECRET)
    add_hook(store, tmp_path, "skip", "skip")
    add_hook(store, tmp_path, "allow", "allow")
    add_hook(store, tmp_path, "bydelivery", "skip", key="pull_request.number")
    with serve(db_url, token="dashboard-token-0123456789") as base:
        yield base


def deliver(server: str, hook: str, delivery: str, number: int) -> dict[str, Any]:
    body = json.dumps({"action": "synchronize", "number": number, "title": "t"}).encode()
    status, answer = post(f"{server}/hooks/{hook}", body, signed(body, delivery))
    assert status == (200 if answer.get("duplicate") else 202), answer
    return answer


def run_of(store: Store, answer: dict[str, Any]) -> ScheduleRunRow:
    run = store.schedules.get_run(answer["schedule_run_id"])
    assert run is not None
    return run


def end(store: Store, run_id: str) -> None:
    store.update_status(
        "schedule_run", run_id, new_status="running", reason_code="schedule.running.started"
    )
    store.update_status(
        "schedule_run", run_id, new_status="completed", reason_code="schedule.completed.ok"
    )


def test_the_overlap_decision_names_the_run_it_overlaps() -> None:
    skip = make_policies({"overlap": "skip"}, None)
    allow = make_policies({"overlap": "allow"}, None)
    assert overlap_refusal(allow, "12", "sr-1") is None
    code, summary = overlap_refusal(skip, "12", "sr-1") or ("", "")
    assert code == OVERLAP
    assert "sr-1" in summary
    assert "'12'" in summary


def test_a_second_delivery_about_an_active_subject_is_skipped_naming_the_first(
    store: Store, server: str
) -> None:
    first = deliver(server, "skip", "d-1", 12)
    second = deliver(server, "skip", "d-2", 12)
    other = deliver(server, "skip", "d-3", 13)
    assert (first["status"], second["status"], other["status"]) == ("queued", "skipped", "queued")
    assert second["duplicate"] is False
    skipped = run_of(store, second)
    assert (skipped.status, skipped.status_reason_code) == ("skipped", OVERLAP)
    assert first["schedule_run_id"] in (skipped.status_reason_summary or "")
    assert (skipped.event_key, skipped.subject_key) == ("d-2", "12")
    assert run_of(store, first).subject_key == "12"
    assert deliver(server, "skip", "d-2", 12)["status"] == "duplicate"  # a redelivery


def test_li_status_of_the_skipped_run_says_its_subject_and_the_run_it_overlapped(
    server: str, li_env: dict[str, str]
) -> None:
    first = deliver(server, "skip", "d-1", 12)
    second = deliver(server, "skip", "d-2", 12)
    done = subprocess.run(
        li_command("status", second["schedule_run_id"]),
        env=li_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert OVERLAP in done.stdout, done.stderr
    assert first["schedule_run_id"] in done.stdout
    assert re.search(r"subject key\s+12", done.stdout), done.stdout


def test_a_subject_whose_run_ended_runs_again(store: Store, server: str) -> None:
    first = deliver(server, "skip", "d-1", 12)
    end(store, first["schedule_run_id"])
    again = deliver(server, "skip", "d-2", 12)
    assert again["status"] == "queued"
    assert run_of(store, again).status == "queued"


def test_allow_runs_every_delivery_about_one_subject(store: Store, server: str) -> None:
    answers = [deliver(server, "allow", f"d-{n}", 12) for n in range(3)]
    assert [a["status"] for a in answers] == ["queued"] * 3
    assert {run_of(store, a).subject_key for a in answers} == {"12"}


def test_a_body_without_the_key_field_is_its_own_subject(store: Store, server: str) -> None:
    answers = [deliver(server, "bydelivery", f"d-{n}", 12) for n in range(2)]
    assert [a["status"] for a in answers] == ["queued", "queued"]
    assert [run_of(store, a).subject_key for a in answers] == ["d-0", "d-1"]


def test_concurrent_deliveries_about_one_subject_run_exactly_one(store: Store, server: str) -> None:
    subjects, per_subject = 10, 3
    answers: list[dict[str, Any]] = []
    lock = threading.Lock()
    start = threading.Barrier(subjects * per_subject)

    def one(number: int, copy: int) -> None:
        start.wait(30)
        answer = deliver(server, "skip", f"d-{number}-{copy}", number)
        with lock:
            answers.append({**answer, "number": number})

    threads = [
        threading.Thread(target=one, args=(n, c))
        for n in range(subjects)
        for c in range(per_subject)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert len(answers) == subjects * per_subject
    for number in range(subjects):
        statuses = sorted(a["status"] for a in answers if a["number"] == number)
        assert statuses == ["queued"] + ["skipped"] * (per_subject - 1), number
    row = store.schedules.get("skip")
    assert row is not None
    runs = store.schedules.list_runs(row.id)
    assert len(runs) == subjects * per_subject
    assert sum(r.status == "queued" for r in runs) == subjects


def test_deliveries_to_several_dashboards_at_once_run_one_per_subject(
    store: Store, db_url: str, tmp_path: Path
) -> None:
    """Each thread its own store, as each ``li ui`` on one database has: the overlap
    check and the run's insert are one transaction serialized per subject."""
    add_hook(store, tmp_path, "many", "skip")
    stores = [open_store(db_url) for _ in range(3)]
    statuses: dict[int, list[str]] = {number: [] for number in range(20)}
    start = threading.Barrier(len(stores))

    def one(index: int, mine: Store) -> None:
        for number, seen in statuses.items():
            body = json.dumps({"number": number}).encode()
            headers = {k.lower(): v for k, v in signed(body, f"d-{number}-{index}").items()}
            start.wait(30)  # the three deliveries about each number at once
            seen.append(receive(mine, "many", body, headers, {VAR: SECRET}).status)

    try:
        threads = [threading.Thread(target=one, args=(i, s)) for i, s in enumerate(stores)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    finally:
        for each in stores:
            each.close()
    for number, seen in statuses.items():
        assert sorted(seen) == ["queued", "skipped", "skipped"], number

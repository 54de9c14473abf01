"""Metrics for the ops stack (issue 23, item 4): ``li metrics`` and ``/metrics``.

Every number is read from the database, so a run's end moves the counters as soon as
its row is written, on both backends; ``/metrics`` is behind the dashboard's token.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from lirun.liveness import current_owner
from lirun.record.spool import pending_dir
from lirun.store import Store
from lirun.store.metric_reads import DURATION_BUCKETS
from lirun.store.queries import DIALECTS, load_queries
from lirun.ui.app import create_app
from lirun.ui.metrics import render
from support.execkit import git_repo, run_li

TOKEN = "a-token-of-sixteen-chars"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    """Every sample as ``(name, sorted labels) -> value``."""
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def scrape(li_env: dict[str, str], cwd: Path) -> Samples:
    proc = run_li("metrics", env=li_env, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    return samples(proc.stdout)


def value(found: Samples, name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def test_a_runs_end_moves_the_counters(li_env: dict[str, str], db_url: str, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    assert run_li("run", "--", "true", env=li_env, cwd=repo).returncode == 0
    before = scrape(li_env, repo)
    assert value(before, "lirun_runs_started_total", kind="session") == 1
    ok = {"kind": "session", "status": "completed", "reason": "run.completed.ok"}
    assert value(before, "lirun_runs_ended_total", **ok) == 1
    failed = {"kind": "session", "status": "failed", "reason": "run.failed.exit_nonzero"}
    assert value(before, "lirun_runs_ended_total", **failed) == 0

    assert run_li("run", "--", "sh", "-c", "sleep 1.2; exit 3", env=li_env, cwd=repo).returncode
    after = scrape(li_env, repo)
    assert value(after, "lirun_runs_started_total", kind="session") == 2
    assert value(after, "lirun_runs_ended_total", **ok) == 1
    assert value(after, "lirun_runs_ended_total", **failed) == 1
    count = "lirun_run_duration_seconds_count"
    assert value(after, count, kind="session") == value(before, count, kind="session") + 1
    # the slow run is over a second: above the first bucket, inside the second
    bucket = "lirun_run_duration_seconds_bucket"
    assert value(after, bucket, kind="session", le="1.0") == 1
    assert value(after, bucket, kind="session", le="5.0") == 2
    assert value(after, bucket, kind="session", le="+Inf") == 2
    assert value(after, "lirun_run_duration_seconds_sum", kind="session") >= 1.2


def test_usage_workers_backlog_and_spool(store: Store, db_url: str, lirun_home: Path) -> None:
    now = time.time()
    store.sessions.create(
        provider="claude", model="opus", input_tokens=100, output_tokens=20, cost_usd=0.25
    )
    store.sessions.create(provider="claude", model="opus", input_tokens=1, cost_usd=0.5)
    store.workers.register(
        owner=current_owner(), concurrency=1, transport="local", lease_seconds=30
    )
    store.schedules.insert_queued_run(
        action_kind="run", action={"run": ["true"]}, due_at=int(now) - 600
    )
    store.schedules.insert_queued_run(action_kind="run", action={"run": ["true"]})
    spool = pending_dir(db_url)
    spool.mkdir(parents=True)
    (spool / "r1.json").write_text("{}")
    found = samples(render(store, db_url, now=now + 5).decode())
    labels = {"provider": "claude", "model": "opus"}
    assert value(found, "lirun_cost_usd_total", **labels) == 0.75
    assert value(found, "lirun_tokens_total", **labels, type="input") == 101
    assert value(found, "lirun_tokens_total", **labels, type="output") == 20
    assert value(found, "lirun_runs_active", kind="session", status="running") == 2
    assert value(found, "lirun_runs_active", kind="schedule_run", status="queued") == 2
    assert value(found, "lirun_workers_live") == 1
    [age] = [v for (name, _), v in found.items() if name == "lirun_worker_heartbeat_age_seconds"]
    assert 4 <= age < 60
    assert value(found, "lirun_schedule_runs_queued") == 2
    assert value(found, "lirun_schedule_runs_overdue") == 1
    assert value(found, "lirun_spooled_outcomes_pending") == 1
    later = samples(render(store, db_url, now=now + 120).decode())
    assert value(later, "lirun_workers_live") == 0  # its heartbeat is past its lease
    assert value(later, "lirun_schedule_runs_overdue") == 2


def test_the_duration_query_binds_one_parameter_per_bucket(store: Store, db_url: str) -> None:
    wanted = {f":b{i}" for i in range(len(DURATION_BUCKETS))}
    for dialect in DIALECTS:
        text = load_queries(dialect)["metrics_durations"]
        assert set(re.findall(r":b\d+\b", text)) == wanted, dialect
    found = samples(render(store, db_url).decode())
    assert value(found, "lirun_runs_started_total", kind="session") == 0


def test_a_run_that_ends_before_it_starts_adds_no_seconds(store: Store, db_url: str) -> None:
    """A clock step back: its duration counts in every bucket and adds 0 to the sum, on
    both backends alike (the one query both run)."""
    ok = {"status": "completed", "reason_code": "run.completed.ok"}
    store.sessions.import_many(
        [
            {**ok, "created_at": 1000.0, "ended_at": 1002.5},
            {**ok, "created_at": 2000.0, "ended_at": 1990.0},
        ]
    )
    found = samples(render(store, db_url).decode())
    assert value(found, "lirun_run_duration_seconds_sum", kind="session") == 2.5
    assert value(found, "lirun_run_duration_seconds_count", kind="session") == 2
    first = str(DURATION_BUCKETS[0])
    assert value(found, "lirun_run_duration_seconds_bucket", kind="session", le=first) == 1
    assert value(found, "lirun_run_duration_seconds_bucket", kind="session", le="5.0") == 2


def test_metrics_needs_the_token_when_one_is_set(store: Store, db_url: str) -> None:
    with TestClient(create_app(db_url, token=TOKEN, watch=False)) as client:
        refused = client.get("/metrics")
        assert refused.status_code == 401
        wrong = client.get("/metrics", headers={"Authorization": "Bearer not-the-token-at-all"})
        assert wrong.status_code == 401
        shown = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert shown.status_code == 200
    assert shown.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert "lirun_runs_started_total" in shown.text or "lirun_runs_started" in shown.text


def test_metrics_on_a_missing_database_is_one_line_and_exit_2(
    li_env: dict[str, str], tmp_path: Path
) -> None:
    proc = run_li("--db", str(tmp_path / "nope.db"), "metrics", env=li_env, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "no lirun database" in proc.stderr
    assert not (tmp_path / "nope.db").exists()

"""The procrastinate transport on real PostgreSQL, with real serving processes.

Each test has its own schema (and so its own queue schema, ``<schema>_queue``). The handle
(``support.queuekit``) does a real compare-and-set on a row per run, so "ran" means "won
the compare-and-set", and every delivery is recorded.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest

from support.pgcluster import PgCluster
from support.queuekit import (
    add_runs,
    make_handle,
    new_queue_url,
    query,
    start_server,
    stop_server,
    wait_until,
)

if TYPE_CHECKING:  # the tests import it inside, where they use it
    from lirun.schedules.pgqueue import ProcrastinateTransport

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture
def pg_url() -> Iterator[str]:
    yield from new_queue_url()


def transport(url: str, **options: float) -> ProcrastinateTransport:
    from lirun.schedules.pgqueue import ProcrastinateTransport

    defaults = {"heartbeat_seconds": 1.0, "stalled_after": 3.0, "reconcile_seconds": 1.0}
    return ProcrastinateTransport(url, **{**defaults, **options})


def enqueue(url: str, run_ids: list[str]) -> None:
    t = transport(url)
    try:
        for run_id in run_ids:
            t.enqueue(run_id)
    finally:
        t.close()


def deliveries(url: str) -> dict[str, list[tuple[str, bool]]]:
    got: dict[str, list[tuple[str, bool]]] = {}
    for run_id, owner, won in query(url, "SELECT run_id, owner, won FROM qevents ORDER BY n"):
        got.setdefault(str(run_id), []).append((str(owner), bool(won)))
    return got


def winners(url: str) -> dict[str, list[str]]:
    return {r: [o for o, won in d if won] for r, d in deliveries(url).items()}


def count(url: str, sql: str, params: object = ()) -> int:
    return int(query(url, sql, params)[0][0])  # type: ignore[call-overload]


def test_queue_schema_names() -> None:
    from lirun.store.queue_records import queue_conninfo, queue_schema_for

    assert queue_schema_for(None) == "lirun_queue"
    assert queue_schema_for("team") == "team_queue"
    assert len(queue_schema_for("x" * 63)) == 63
    conninfo, schema = queue_conninfo("postgresql://u@h:5/db?schema=abc&sslmode=disable")
    assert schema == "abc_queue"
    assert "search_path=abc_queue" in conninfo
    assert "sslmode=disable" in conninfo
    assert "keepalives_idle" in conninfo


def test_three_serving_processes_run_each_run_exactly_once(pg_url: str, tmp_path: Path) -> None:
    run_ids = [f"run-{i:03d}" for i in range(60)]
    add_runs(pg_url, run_ids, hold=0.2)
    enqueue(pg_url, run_ids)
    enqueue(pg_url, run_ids[:10])  # their jobs still wait: the queueing lock makes these no-ops
    assert count(pg_url, "SELECT count(*) FROM procrastinate_jobs") == 60
    servers = [start_server(pg_url, f"w{i}", tmp_path / f"w{i}.log") for i in range(3)]
    try:
        assert wait_until(lambda: count(pg_url, "SELECT count(*) FROM qruns "
                                        "WHERE state = 'done'") == 60, 60)  # fmt: skip
    finally:
        codes = [stop_server(p) for p in servers]
    assert codes == [0, 0, 0], [(tmp_path / f"w{i}.log").read_text() for i in range(3)]
    got = deliveries(pg_url)
    assert sorted(got) == run_ids
    # one delivery per run id, and it won: nothing lost, nothing doubled
    assert {r: d for r, d in got.items() if len(d) != 1 or not d[0][1]} == {}
    assert len({d[0][0] for d in got.values()}) >= 2  # the work was shared
    assert count(pg_url, "SELECT count(*) FROM procrastinate_jobs") == 0  # done jobs deleted


def test_a_job_delivered_twice_runs_once(pg_url: str) -> None:
    """A retried job (the handle raised after winning) and a re-deferred finished one are
    delivered again; the compare-and-set makes both deliveries do nothing."""
    add_runs(pg_url, ["flaky"], fail_once=True)
    add_runs(pg_url, ["plain"])
    t = transport(pg_url)
    stop = threading.Event()
    handle = make_handle(pg_url, "solo")
    server = threading.Thread(
        target=t.serve, args=(handle,), kwargs={"concurrency": 2, "stop": stop}
    )
    server.start()
    try:
        t.enqueue("flaky")
        t.enqueue("plain")
        assert wait_until(lambda: len(deliveries(pg_url).get("flaky", [])) == 2, 30)
        done = "SELECT count(*) FROM qruns WHERE run_id = 'plain' AND state = 'done'"
        assert wait_until(lambda: count(pg_url, done) == 1, 30)
        t.enqueue("plain")  # its job is gone: a new one, delivered again
        assert wait_until(lambda: len(deliveries(pg_url).get("plain", [])) == 2, 30)
    finally:
        stop.set()
        server.join(30)
        t.close()
    assert not server.is_alive()
    got = deliveries(pg_url)
    assert got["flaky"] == [("solo", True), ("solo", False)]
    assert got["plain"] == [("solo", True), ("solo", False)]


def test_sigkill_mid_handle_the_stalled_job_is_retried_and_nothing_runs_twice(
    pg_url: str, tmp_path: Path
) -> None:
    """The queue's side of a worker killed mid-run: its job is found stalled (no
    heartbeat) and retried on another process. A run the killed worker had started stays
    its own (the retried handle loses the compare-and-set; failing it by lease is the
    worker's job); a run it had taken but not started is started by the retry."""
    add_runs(pg_url, ["long"], hold=3600)
    add_runs(pg_url, ["unstarted"], hang_on="victim")
    victim = start_server(pg_url, "victim", tmp_path / "victim.log", concurrency=2)
    other = None
    try:
        assert wait_until(lambda: "victim: serving" in (tmp_path / "victim.log").read_text(), 30)
        enqueue(pg_url, ["long", "unstarted"])
        assert wait_until(lambda: winners(pg_url).get("long") == ["victim"], 30)
        assert wait_until(lambda: count(pg_url, "SELECT count(*) FROM procrastinate_jobs "
                                        "WHERE status = 'doing'") == 2, 30)  # fmt: skip
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        other = start_server(pg_url, "other", tmp_path / "other.log")
        assert wait_until(lambda: len(deliveries(pg_url).get("long", [])) == 2, 30)
        assert wait_until(lambda: winners(pg_url).get("unstarted") == ["other"], 30)
    finally:
        for proc in (victim, other):
            if proc is not None:
                stop_server(proc)
    got = deliveries(pg_url)
    assert got["long"] == [("victim", True), ("other", False)]
    assert got["unstarted"] == [("other", True)]
    assert query(pg_url, "SELECT state, owner FROM qruns WHERE run_id = 'long'") == [
        ("running", "victim")
    ]
    assert count(pg_url, "SELECT count(*) FROM procrastinate_jobs WHERE status = 'doing'") == 0


def test_a_stalled_job_whose_run_was_offered_again_does_not_block_the_run(
    pg_url: str, tmp_path: Path
) -> None:
    """A worker killed after taking a run's job but before starting the run, while the
    run (still queued) was offered again (the sweep's second offer): the new job waits
    in ``todo``, so the stalled one cannot go back there, and, ``doing``, it holds the
    run's lock. The sweep deletes the stalled job and the waiting one starts the run."""
    add_runs(pg_url, ["unstarted"], hang_on="victim")
    victim = start_server(pg_url, "victim", tmp_path / "victim.log")
    other = None
    try:
        assert wait_until(lambda: "victim: serving" in (tmp_path / "victim.log").read_text(), 30)
        enqueue(pg_url, ["unstarted"])
        doing = "SELECT count(*) FROM procrastinate_jobs WHERE status = 'doing'"
        assert wait_until(lambda: count(pg_url, doing) == 1, 30)
        enqueue(pg_url, ["unstarted"])  # the second offer: a job waiting beside it
        todo = "SELECT count(*) FROM procrastinate_jobs WHERE status = 'todo'"
        assert count(pg_url, todo) == 1
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        other = start_server(pg_url, "other", tmp_path / "other.log")
        assert wait_until(lambda: winners(pg_url).get("unstarted") == ["other"], 30), query(
            pg_url, "SELECT id, status, worker_id FROM procrastinate_jobs"
        )
    finally:
        for proc in (victim, other):
            if proc is not None:
                stop_server(proc)
    assert count(pg_url, "SELECT count(*) FROM procrastinate_jobs") == 0
    assert "Traceback" not in (tmp_path / "other.log").read_text()


def test_serving_resumes_after_a_server_restart(pg_cluster: PgCluster, tmp_path: Path) -> None:
    for url in new_queue_url(pg_cluster.url):
        add_runs(url, ["before", "after"])
        # polling every 60 s: a run handled within seconds was woken by LISTEN/NOTIFY
        server = start_server(url, "w", tmp_path / "w.log", concurrency=1, poll=60, sweep=60)
        try:
            enqueue(url, ["before"])
            assert wait_until(lambda: winners(url).get("before") == ["w"], 30)  # noqa: B023
            pg_cluster.restart(down_for=2.0, mode="immediate")
            enqueue(url, ["after"])
            assert wait_until(lambda: winners(url).get("after") == ["w"], 15), (  # noqa: B023
                (tmp_path / "w.log").read_text()
            )
            assert server.poll() is None
        finally:
            assert stop_server(server) == 0, (tmp_path / "w.log").read_text()
        log = (tmp_path / "w.log").read_text()
        assert "li: warning: queue " in log  # it saw the outage, in one-line notes
        assert "Traceback" not in log


def test_close_ends_an_enqueue_that_waits_for_a_connection_the_outage_broke(
    pg_cluster: PgCluster,
) -> None:
    """A stopping worker closes its transport while its sweep (or a run thread) defers a
    job: the deferral ends within ``DEFER_CONNECT_SECONDS`` (5 s), whatever the database
    did, and none starts after ``close``. Here the enqueue pool's kept connections were
    broken by a restart; they fail psycopg_pool's check, and the pool pauses about 1 s
    before it looks again: a close in that pause left the deferral waiting out
    psycopg_pool's 30 s on the closed pool, and the worker did not end (issue 33, seen
    after a failover)."""
    from lirun.errors import DatabaseError

    for url in new_queue_url(pg_cluster.url):
        t = transport(url)
        t.enqueue("before")  # the pool is open, its connection kept
        # Both of the pool's connections open and idle (as after a worker's busy spell):
        # after the restart the deferral finds both broken, and psycopg_pool pauses
        # after the second.
        assert t._deferrer is not None
        pool = t._deferrer._pool
        first, second = pool.getconn(), pool.getconn()
        pool.putconn(first)
        pool.putconn(second)
        pg_cluster.restart(mode="immediate")
        thread = threading.Thread(target=_enqueue_quietly, args=(t, "late"), daemon=True)
        thread.start()
        time.sleep(0.3)  # both failed the check: the deferral is in the pool's pause
        began = time.monotonic()
        t.close()
        thread.join(15)
        took = time.monotonic() - began
        assert not thread.is_alive(), "enqueue still waits 15 s after close"
        assert took < 7, f"enqueue ended {took:.1f}s after close"
        with pytest.raises(DatabaseError, match="stopping"):
            t.enqueue("after")
        jobs = "SELECT count(*) FROM procrastinate_jobs WHERE queueing_lock = 'after'"
        assert count(url, jobs) == 0


def _enqueue_quietly(t: ProcrastinateTransport, run_id: str) -> None:
    from lirun.errors import DatabaseError

    with contextlib.suppress(DatabaseError):  # the pool closed under it: it says so
        t.enqueue(run_id)


def test_workers_starting_together_make_the_queue_schema_once(pg_url: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from lirun.schedules.pgqueue import prepare_queue_schema
    from lirun.store.queue_records import queue_conninfo

    conninfo, schema = queue_conninfo(pg_url)
    barrier = threading.Barrier(6)

    def make() -> None:
        barrier.wait()
        prepare_queue_schema(conninfo, schema)

    with ThreadPoolExecutor(6) as pool:
        for future in [pool.submit(make) for _ in range(6)]:
            future.result()  # none raised (no duplicate type, table or function)
    assert count(pg_url, "SELECT count(*) FROM pg_tables WHERE schemaname = %s "
                 "AND tablename = 'procrastinate_jobs'", [schema]) == 1  # fmt: skip
    comment = query(pg_url, "SELECT obj_description(to_regnamespace(%s)::oid)", [schema])
    assert str(comment[0][0]).startswith("procrastinate 3.")


def test_a_queue_schema_of_another_procrastinate_version_is_refused(pg_url: str) -> None:
    from lirun.errors import DatabaseError
    from lirun.schedules.pgqueue import prepare_queue_schema
    from lirun.store.queue_records import queue_conninfo

    conninfo, schema = queue_conninfo(pg_url)
    prepare_queue_schema(conninfo, schema)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f"COMMENT ON SCHEMA {schema} IS 'procrastinate 2.15.1'")
    with pytest.raises(DatabaseError, match=r"procrastinate 2\.15\.1.*apply procrastinate's migr"):
        prepare_queue_schema(conninfo, schema)
    with pytest.raises(DatabaseError, match="migrations"):
        transport(pg_url).enqueue("run-x")

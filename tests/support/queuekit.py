"""The procrastinate transport under test: a CAS table, serving processes, their events.

A test makes ``qruns`` (one row per run id: ``queued`` → ``running`` → ``done``) and
``qevents`` (one row per delivery: who got it and whether its compare-and-set won) in its
own schema. ``serve_main`` (run as ``python -m support.queuekit URL NAME ...``) serves the
queue with a handle that does the real compare-and-set on ``qruns``, the way the worker's
``handle`` does on ``schedule_runs``, and records every delivery. Per-run knobs in the
row: ``hold`` (seconds a winner holds the run before ``done``), ``hang_on`` (a process
name that hangs before its compare-and-set, to be killed there) and ``fail_once`` (the
winner raises once after winning, so the queue retries the job).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg

from support.pg import PG_URL, REQUIRE_PG, admin_execute, pg_unavailable

TESTS_DIR = Path(__file__).resolve().parent.parent

SETUP = """
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE {schema}.qruns (
    run_id text PRIMARY KEY, state text NOT NULL DEFAULT 'queued', owner text,
    hold double precision NOT NULL DEFAULT 0, hang_on text, fail_once boolean DEFAULT false,
    started timestamptz, finished timestamptz
);
CREATE TABLE {schema}.qevents (
    n bigserial PRIMARY KEY, run_id text NOT NULL, owner text NOT NULL, won boolean NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
"""


def conninfo(url: str) -> tuple[str, str]:
    """(plain conninfo, schema) of a lirun URL with ``?schema=``."""
    from lirun.store.pg_connect import split_schema

    rest, schema = split_schema(url)
    assert schema
    return rest, schema


def new_queue_url(base: str | None = None) -> Iterator[str]:
    """A URL with a fresh schema (and its CAS tables); drops it and its queue schema after."""
    if base is None:
        reason = pg_unavailable()
        if reason:
            import pytest

            if REQUIRE_PG:
                pytest.fail(f"PostgreSQL is required (LIRUN_TEST_REQUIRE_PG=1) but: {reason}")
            pytest.skip(f"PostgreSQL unavailable: {reason}")
        base = PG_URL
    schema = f"t_{uuid.uuid4().hex[:16]}"
    url = f"{base}{'&' if '?' in base else '?'}schema={schema}"
    with psycopg.connect(conninfo(url)[0], autocommit=True) as conn:
        conn.execute(SETUP.format(schema=schema))
    try:
        yield url
    finally:
        drop = (
            f'DROP SCHEMA IF EXISTS "{schema}" CASCADE; '
            f'DROP SCHEMA IF EXISTS "{schema}_queue" CASCADE'
        )
        try:
            if base == PG_URL:
                admin_execute(drop)
            else:
                with psycopg.connect(conninfo(url)[0], autocommit=True) as conn:
                    conn.execute(drop)
        except psycopg.Error:
            pass


def add_runs(url: str, run_ids: list[str], **knobs: object) -> None:
    plain, schema = conninfo(url)
    cols = ", ".join(["run_id", *knobs])
    marks = ", ".join(["%s"] * (1 + len(knobs)))
    with psycopg.connect(plain) as conn, conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {schema}.qruns ({cols}) VALUES ({marks})",
            [[run_id, *knobs.values()] for run_id in run_ids],
        )


def query(url: str, sql: str, params: object = ()) -> list[tuple[object, ...]]:
    plain, schema = conninfo(url)
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f"SET search_path = {schema}, {schema}_queue")
        return list(conn.execute(sql, params).fetchall())  # type: ignore[call-overload]


def wait_until(check: Callable[[], object], timeout: float, interval: float = 0.1) -> bool:
    """Poll ``check`` (a database fact; no event reaches the test across processes)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(interval)
    return bool(check())


def server_argv(
    url: str,
    name: str,
    *,
    concurrency: int = 2,
    heartbeat: float = 1.0,
    stalled: float = 3.0,
    sweep: float = 1.0,
    poll: float = 1.0,
) -> list[str]:
    return [
        sys.executable, "-m", "support.queuekit", url, name,
        "--concurrency", str(concurrency), "--heartbeat", str(heartbeat),
        "--stalled", str(stalled), "--sweep", str(sweep), "--poll", str(poll),
    ]  # fmt: skip


def server_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS_DIR), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    return env


def start_server(url: str, name: str, log: Path, **options: float) -> subprocess.Popen[bytes]:
    out = log.open("ab")
    return subprocess.Popen(
        server_argv(url, name, **options),  # type: ignore[arg-type]
        stdout=out, stderr=subprocess.STDOUT, env=server_env(), cwd=TESTS_DIR,
    )  # fmt: skip


def stop_server(proc: subprocess.Popen[bytes], timeout: float = 20) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(5)


def make_handle(url: str, name: str) -> Callable[[str], None]:
    plain, schema = conninfo(url)

    def handle(run_id: str) -> None:
        with psycopg.connect(plain) as conn:
            row = conn.execute(
                f"SELECT hold, hang_on, fail_once FROM {schema}.qruns WHERE run_id = %s", [run_id]
            ).fetchone()
            assert row is not None, run_id
            hold, hang_on, fail_once = row
            conn.commit()
            if hang_on == name:
                time.sleep(3600)  # to be killed here, before the compare-and-set
            won = conn.execute(
                f"UPDATE {schema}.qruns SET state = 'running', owner = %s, "
                "started = clock_timestamp() WHERE run_id = %s AND state = 'queued' RETURNING 1",
                [name, run_id],
            ).fetchone()
            conn.execute(
                f"INSERT INTO {schema}.qevents (run_id, owner, won) VALUES (%s, %s, %s)",
                [run_id, name, won is not None],
            )
            conn.commit()
            if won is None:
                return
            if fail_once:
                conn.execute(
                    f"UPDATE {schema}.qruns SET fail_once = false WHERE run_id = %s", [run_id]
                )
                conn.commit()
                raise RuntimeError(f"{run_id}: failing once after winning")
        time.sleep(hold)  # the run's work
        with psycopg.connect(plain) as conn:
            conn.execute(
                f"UPDATE {schema}.qruns SET state = 'done', finished = clock_timestamp() "
                "WHERE run_id = %s AND owner = %s AND state = 'running'",
                [run_id, name],
            )

    return handle


def serve_main(argv: list[str] | None = None) -> int:
    from lirun.cli.diagnostics import li_lines
    from lirun.schedules.pgqueue import ProcrastinateTransport

    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("name")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--heartbeat", type=float, default=1.0)
    parser.add_argument("--stalled", type=float, default=3.0)
    parser.add_argument("--sweep", type=float, default=1.0)
    parser.add_argument("--poll", type=float, default=1.0)
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    transport = ProcrastinateTransport(
        args.url, heartbeat_seconds=args.heartbeat, stalled_after=args.stalled,
        reconcile_seconds=args.sweep, poll_seconds=args.poll,
    )  # fmt: skip
    print(f"{args.name}: serving on {socket.gethostname()} as pid {os.getpid()}", flush=True)
    try:
        with li_lines(0):  # as `li worker` shows the queue's notes: one `li:` line each
            transport.serve(
                make_handle(args.url, args.name), concurrency=args.concurrency, stop=stop
            )
    finally:
        transport.close()
    print(f"{args.name}: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(serve_main())

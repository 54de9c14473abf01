"""A URL naming a standby and its primary (issue 33, item 1), on two real clusters with
streaming replication (``support.pgreplica``): with no ``target_session_attrs`` lirun
asks for the server that takes writes, so the standby named first is passed over, and
the same URL still finds the primary after a failover and after a failover back.
"""

from __future__ import annotations

import os
import subprocess
from functools import partial
from pathlib import Path

from lirun.schedules.actions import parse_action
from lirun.schedules.submit import submit
from lirun.store import open_store
from lirun.store.postgres import PostgresConnector
from support.cli import li_command
from support.pgreplica import ReplicaPair
from support.workerkit import status_is, until, workers


def li(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LIRUN_DB_URL"}
    return subprocess.run(
        li_command(*args), capture_output=True, text=True, timeout=90, cwd=cwd, env=env
    )


def statuses(url: str, *run_ids: str) -> list[str | None]:
    store = open_store(url, readonly=True)
    try:
        rows = [store.sessions.get(run_id) for run_id in run_ids]
    finally:
        store.close()
    return [row.status if row else None for row in rows]


def in_recovery(url: str) -> bool:
    """Whether lirun's connection for ``url`` went to a standby (the schema exists)."""
    connector = PostgresConnector(url, readonly=True)
    try:
        conn = connector.connect()
        try:
            row = conn.execute("SELECT pg_is_in_recovery() AS r").fetchone()
            assert row is not None
            return bool(row["r"])
        finally:
            conn.close()
    finally:
        connector.close()


def keyword_form(pair: ReplicaPair, schema: str) -> str:
    assert pair.standby is not None
    ports = f"{pair.standby.port},{pair.primary.port}"
    return f"host=127.0.0.1,127.0.0.1 port={ports} dbname=postgres user=postgres schema={schema}"


def test_a_standby_named_first_is_passed_over(pg_pair: ReplicaPair, tmp_path: Path) -> None:
    forms = {
        "url": pg_pair.url(standby_first=True, schema="sf_url"),
        "keyword": keyword_form(pg_pair, "sf_kw"),
    }
    for name, url in forms.items():
        done = li("--db", url, "run", "--run-id", f"sf-{name}", "--", "true", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        started = li(
            "--db", url, "run", "--detach", "--run-id", f"sf-{name}-2", "--", "sleep", "1",
            cwd=tmp_path,
        )  # fmt: skip
        assert started.returncode == 0, started.stderr
        waited = li("--db", url, "wait", f"sf-{name}-2", "--timeout", "30", cwd=tmp_path)
        assert waited.returncode == 0, waited.stderr
        schema = "sf_url" if name == "url" else "sf_kw"
        on_primary = f"{pg_pair.primary.url}?schema={schema}"
        assert statuses(on_primary, f"sf-{name}", f"sf-{name}-2") == ["completed"] * 2
        assert not in_recovery(url), name
    pg_pair.wait_replayed()  # and the standby holds them: it is the primary's copy
    assert pg_pair.standby is not None
    on_standby = f"{pg_pair.standby.url}?schema=sf_url"
    assert statuses(on_standby, "sf-url", "sf-url-2") == ["completed"] * 2
    # A URL that says which server it wants is taken at its word: here, the standby.
    assert in_recovery(forms["url"] + "&target_session_attrs=any")
    assert in_recovery(forms["keyword"] + " target_session_attrs=any")
    assert [p.name for p in tmp_path.iterdir()] == ["home"]


def test_the_same_url_follows_a_failover_and_back(pg_pair: ReplicaPair, tmp_path: Path) -> None:
    url = pg_pair.url(standby_first=True, schema="fo")
    first, second = pg_pair.standby, pg_pair.primary
    assert first is not None
    assert li("--db", url, "run", "--run-id", "fo-0", "--", "true", cwd=tmp_path).returncode == 0
    pg_pair.wait_replayed()

    assert pg_pair.failover() is first  # the standby named first is the primary now
    done = li("--db", url, "run", "--run-id", "fo-1", "--", "true", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert statuses(f"{first.url}?schema=fo", "fo-0", "fo-1") == ["completed"] * 2

    assert pg_pair.rejoin() is second  # rewound, and streaming from the new primary
    assert pg_pair.is_in_recovery(second)
    pg_pair.wait_replayed()
    assert pg_pair.failover() is second  # and back
    done = li("--db", url, "run", "--run-id", "fo-2", "--", "true", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert statuses(f"{second.url}?schema=fo", "fo-0", "fo-1", "fo-2") == ["completed"] * 3


def test_a_worker_and_its_queue_reach_the_primary(pg_pair: ReplicaPair, tmp_path: Path) -> None:
    """The schedule queue opens its own connections (procrastinate's pool, the queue
    schema's set-up): with the standby named first they must reach the primary too."""
    url = keyword_form(pg_pair, "wq")
    env = {**os.environ, "LIRUN_HOME": str(tmp_path / "home"), "LIRUN_DB_URL": url}
    store = open_store(url)
    try:
        with workers(env, tmp_path, count=1) as (worker,):
            queued = [
                submit(store, parse_action(["run", "echo", str(i)], base=str(tmp_path))).id
                for i in range(2)
            ]
            for run_id in queued:
                row = until(partial(status_is, store, run_id, "completed", "failed"), 60)
                assert row["status"] == "completed", worker.text()
        assert "ProcrastinateTransport" in worker.text()
    finally:
        store.close()

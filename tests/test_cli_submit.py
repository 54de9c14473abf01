"""``li submit`` as real processes: a run whose row is committed is a success whatever
fails after (exit 0, the id, one warning line); a failure before the commit is one line
and exit 2 with nothing queued; ``--key`` returns the run already submitted with the key,
also when two submits race (the unique key decides), and refuses bad keys.

The key tests run on both backends. The queue offer after the commit is PostgreSQL's
alone (SQLite's workers poll the table, so a submit asks nothing more of the database
after its commit); its faults are a connection-limiting proxy in front of the server and
a queue schema the installed procrastinate refuses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from lirun.store import open_store
from support.cli import li_command
from support.pg import admin_execute, make_pg_url
from support.tcpproxy import LimitingProxy
from support.workerkit import status_is, until, workers

TIMEOUT = 90


def li(
    env: dict[str, str], *args: str | bytes, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        li_command(*args),  # type: ignore[arg-type]
        env=env, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT,
    )  # fmt: skip


def keyed_runs(db_url: str, key: str) -> list[str]:
    store = open_store(db_url)
    try:
        sql = "SELECT id FROM schedule_runs WHERE idempotency_key = :key"
        return [r["id"] for r in store.connector.read(sql, {"key": key})]
    finally:
        store.close()


def all_runs(db_url: str) -> list[str]:
    store = open_store(db_url)
    try:
        return [r["id"] for r in store.connector.read("SELECT id FROM schedule_runs")]
    finally:
        store.close()


def one_clean_line(stderr: str, starts: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert len(stderr.splitlines()) == 1, stderr
    assert stderr.startswith(starts), stderr


def without_no_worker_note(stderr: str, run_id: str, cwd: Path) -> str:
    """``stderr`` without the line a submit with no live worker ends with (asserted)."""
    note = (
        f"li submit: run {run_id} is queued, but no worker is live to run it: start one "
        f"with li worker --allow-root {cwd}\n"
    )
    assert stderr.endswith(note), stderr
    return stderr[: -len(note)]


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh migrated PostgreSQL schema (dropped after, with its queue schema)."""
    for url in make_pg_url():
        open_store(url).close()
        yield url


@pytest.fixture
def env(lirun_home: Path) -> dict[str, str]:
    """The environment of ``li`` for the tests that name their database with --db."""
    return {**os.environ, "LIRUN_HOME": str(lirun_home), "PYTHONUNBUFFERED": "1"}


# -- after the commit: a success ------------------------------------------------------


def _stale_queue_schema(url: str) -> None:
    """The queue schema as another procrastinate minor version left it (refused)."""
    schema = url.rsplit("schema=", 1)[1]
    queue = f'"{schema}_queue"'
    admin_execute(
        f"CREATE SCHEMA {queue}; CREATE TABLE {queue}.procrastinate_jobs (id int);"
        f"COMMENT ON SCHEMA {queue} IS 'procrastinate 0.1.0'"
    )


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        ("proxy-1", "could not be checked"),  # the queue's first connection refused
        ("proxy-2", "within 5s"),  # the schema check passes, the queue's pool is refused
        ("stale-queue-schema", "made by procrastinate 0.1.0"),
    ],
)
def test_a_submit_whose_queue_offer_fails_exits_0_with_the_id(
    pg_url: str, env: dict[str, str], fault: str, says: str
) -> None:
    """The row is committed, then telling the workers fails: exit 0, the run's id (valid
    JSON with --json), one warning line on stderr, and the run stored once."""
    if fault == "stale-queue-schema":
        _stale_queue_schema(pg_url)
    limit = {"proxy-1": 1, "proxy-2": 2}.get(fault, 99)
    with LimitingProxy(pg_url, limit=limit) as proxy:
        began = time.monotonic()
        done = li(env, "--db", proxy.url, "submit", "--json", "--", "run", "true")
        took = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)
    assert run["schema"] == "lirun.schedule_run/1"
    assert run["status"] == "queued"
    # What cannot reach the database cannot tell whether a worker is live: it says nothing.
    warned = (
        done.stderr if limit < 99 else without_no_worker_note(done.stderr, run["id"], Path.cwd())
    )
    one_clean_line(warned, f"li: warning: run {run['id']} is queued, but the workers")
    assert says in done.stderr
    assert all_runs(pg_url) == [run["id"]]
    assert took < 20, f"a failed offer held the submit for {took:.1f}s"
    if limit < 99:
        assert proxy.refused >= 1, "the fault was not met: the proxy refused nothing"


def test_a_run_whose_offer_failed_is_run_by_a_worker(
    pg_url: str, env: dict[str, str], tmp_path: Path
) -> None:
    """The run whose queue job was never made is found by a worker's sweep and run once;
    a retry of the submit with its key returns it instead of queueing it again."""
    out = tmp_path / "ran"
    words = ["run", "sh", "-c", f"echo x >> {out}"]
    with LimitingProxy(pg_url, limit=1) as proxy:
        first = li(env, "--db", proxy.url, "submit", "--key", "k-1", "--", *words)
    assert first.returncode == 0, first.stderr
    assert "li: warning:" in first.stderr
    run_id = first.stdout.strip()
    again = li(env, "--db", pg_url, "submit", "--key", "k-1", "--", *words)
    assert (again.returncode, again.stdout.strip()) == (0, run_id), again.stderr
    store = open_store(pg_url)
    try:
        with workers({**env, "LIRUN_DB_URL": pg_url}, tmp_path):
            row = until(lambda: status_is(store, run_id, "completed", "failed"), timeout=30)
    finally:
        store.close()
    assert row["status"] == "completed", row
    assert out.read_text() == "x\n"
    assert all_runs(pg_url) == [run_id]


# -- before the commit: a failure, nothing queued ---------------------------------------


@pytest.fixture
def unusable_db(db_url: str, tmp_path: Path) -> Iterator[str]:
    """A database the submit cannot reach: a PostgreSQL behind a proxy that closes every
    connection; an SQLite file under a path that is a regular file."""
    if db_url.startswith("postgresql"):
        with LimitingProxy(db_url, limit=0) as proxy:
            yield proxy.url
        return
    (tmp_path / "plain").write_text("")
    yield str(tmp_path / "plain" / "state.db")


def test_a_submit_that_cannot_store_its_run_exits_2_in_one_line(
    db_url: str, li_env: dict[str, str], unusable_db: str
) -> None:
    done = li(li_env, "--db", unusable_db, "submit", "--key", "k", "--", "run", "true")
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    one_clean_line(done.stderr, "li submit: error: ")


def test_a_refused_postgresql_connection_exits_2_in_one_line(env: dict[str, str]) -> None:
    from support.pgcluster import free_port

    url = f"postgresql://postgres@127.0.0.1:{free_port()}/test"
    done = li(env, "--db", url, "submit", "--", "run", "true")
    assert done.returncode == 2, done.stderr
    one_clean_line(done.stderr, "li submit: error: ")


# -- --key --------------------------------------------------------------------------------


def test_a_retried_keyed_submit_returns_the_first_run(
    db_url: str, li_env: dict[str, str], tmp_path: Path
) -> None:
    words = ["--key", "build-1234", "--retries", "1", "--", "run", "make", "nightly"]
    first = li(li_env, "submit", "--json", *words, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    run = json.loads(first.stdout)
    assert without_no_worker_note(first.stderr, run["id"], tmp_path) == ""
    assert run["idempotency_key"] == "build-1234"
    for flag in ("--json", None):
        again = li(li_env, "submit", *([flag] if flag else []), *words, cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        shown = json.loads(again.stdout)["id"] if flag else again.stdout.strip()
        assert shown == run["id"]
        one_clean_line(again.stderr, f"li submit: run {run['id']} (queued) was submitted before")
    assert keyed_runs(db_url, "build-1234") == [run["id"]]
    assert all_runs(db_url) == [run["id"]]
    other = li(li_env, "submit", "--key", "build-1235", "--", "run", "make", "nightly")
    assert other.returncode == 0
    assert other.stdout.strip() != run["id"]


@pytest.mark.parametrize(
    "changed",
    [
        ["--", "run", "make", "other"],
        ["--retries", "2", "--", "run", "make", "nightly"],
    ],
)
def test_the_same_key_for_other_work_is_refused(
    db_url: str, li_env: dict[str, str], tmp_path: Path, changed: list[str]
) -> None:
    first = li(li_env, "submit", "--key", "k", "--", "run", "make", "nightly", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    done = li(li_env, "submit", "--key", "k", *changed, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    one_clean_line(done.stderr, "li submit: error: --key 'k' was given to run ")
    assert "another action or other options" in done.stderr
    assert all_runs(db_url) == [first.stdout.strip()]


def _popen(env: dict[str, str], args: Sequence[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        li_command(*args), env=env, cwd=cwd, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def test_two_submits_racing_with_one_key_make_one_run(
    db_url: str, li_env: dict[str, str], tmp_path: Path
) -> None:
    """Pairs of processes started together with one key each: both say the same id, and
    each key has one run."""
    pairs = []
    for n in range(4):
        args = ["submit", "--key", f"race-{n}", "--", "run", "true"]
        pairs.append((f"race-{n}", [_popen(li_env, args, tmp_path) for _ in range(2)]))
    for key, procs in pairs:
        outs = [p.communicate(timeout=TIMEOUT) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
        ids = {out.strip() for out, _err in outs}
        assert len(ids) == 1, outs
        assert keyed_runs(db_url, key) == list(ids)
        assert sum("was submitted before" in err for _out, err in outs) == 1, outs
    assert len(all_runs(db_url)) == 4


# A second process that inserts the keyed run and holds its transaction open until told:
# the submit racing it must wait for that commit, then return that run.
HOLDER = r"""
import sys, time
from lirun.schedules.actions import parse_action
from lirun.store import open_store
from lirun.store.records import to_json
store = open_store(sys.argv[1])
params = {
    "id": sys.argv[3], "schedule_id": None, "action_kind": "run",
    "action_json": to_json(parse_action(["run", "true"]).to_dict(), "action"),
    "attempt": 1, "due_at": None, "retry_of": None,
    "reason_code": "schedule.queued.created", "reason_summary": "",
    "idempotency_key": sys.argv[2], "now": time.time(), "lease_epoch": 0,
    "event_key": None, "event_json": None, "chain_parent_id": None, "chain_depth": 0,
}
with store.connector.write() as tx:
    assert tx.execute(store.sql("insert_queued_run"), params) == 1
    print("held", flush=True)
    sys.stdin.readline()
store.close()
"""


def test_a_submit_racing_an_uncommitted_holder_of_its_key_returns_its_run(
    db_url: str, li_env: dict[str, str], tmp_path: Path
) -> None:
    """The unique key decides, not a read before the insert: a submit that meets the key
    in another process's open transaction waits for it and returns that run."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, db_url, "held-key", "held-run-id"],
        env=li_env, cwd=tmp_path, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        racer = _popen(li_env, ["submit", "--key", "held-key", "--", "run", "true"], tmp_path)
        time.sleep(1.0)  # the racer is blocked on the holder's transaction
        assert racer.poll() is None, racer.communicate()
        assert holder.stdin is not None
        holder.stdin.write("commit\n")
        holder.stdin.flush()
        assert holder.wait(timeout=TIMEOUT) == 0
        out, err = racer.communicate(timeout=TIMEOUT)
    finally:
        if holder.poll() is None:
            holder.kill()
    assert racer.returncode == 0, err
    assert out.strip() == "held-run-id"
    assert "was submitted before" in err
    assert all_runs(db_url) == ["held-run-id"]


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("", "--key is empty"),
        ("x" * 201, "--key is 201 characters long; give at most 200"),
        ("a\nb", "unprintable character '\\n'"),
        ("a\x1b[31mb", "unprintable character '\\x1b'"),
        ("zero\u200bwidth", "unprintable character '\\u200b'"),
        (b"bad\xffbytes", "unprintable character '\\udcff'"),
    ],
)
def test_a_bad_key_is_refused_with_nothing_queued(
    db_url: str, li_env: dict[str, str], key: str | bytes, says: str
) -> None:
    done = li(li_env, "submit", "--key", key, "--", "run", "true")
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    one_clean_line(done.stderr, "li submit: error: --key ")
    assert says in done.stderr
    assert all_runs(db_url) == []


def test_submit_help_documents_the_key_and_the_exit_codes(env: dict[str, str]) -> None:
    done = li(env, "submit", "--help")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "--key KEY" in text
    assert "idempotency key" in text
    assert "exit codes:" in text.lower() or "exit status" in text.lower(), text
    assert "Once the run is stored nothing turns" in text
    assert "a bad\n       --key" in text or "a bad --key" in " ".join(text.split())

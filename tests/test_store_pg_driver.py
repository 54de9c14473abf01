"""The PostgreSQL connector's own edges (psycopg): rows with Python types, lists and
odd values bound as written, the URL's schema read as urllib reads it, a writer killed or
interrupted in the middle of a transaction, a silent server, a read cut off by a stop.

The behaviour tests of the store and of `li wait` run on both backends elsewhere.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import pytest

from lirun.errors import (
    DatabaseBusyError,
    DatabaseConnectionLostError,
    DatabaseError,
    DatabaseUnavailableError,
)
from lirun.store import open_store
from lirun.store.pg_connect import split_schema
from lirun.store.postgres import PostgresConnector
from support.pg import make_pg_url
from support.pgcluster import PgCluster
from support.storekit import write_lock_held


@pytest.fixture
def pg_only_url() -> Iterator[str]:
    yield from make_pg_url()


@pytest.fixture
def connector(pg_only_url: str) -> Iterator[PostgresConnector]:
    opened = PostgresConnector(pg_only_url)
    yield opened
    opened.close()


_EVERY_TYPE = """
SELECT 1::int2 AS i2, 5000000000::int8 AS i8, 0.1::float8 AS f8, 1.250::numeric AS num,
       true AS yes, 'c'::char(3) AS ch, 'é ✓'::text AS uni, NULL::text AS nothing,
       '{"a": [1, 2.5, null, "s"]}'::json AS js, '{"b": true}'::jsonb AS jb
"""


def test_rows_carry_python_values(connector: PostgresConnector) -> None:
    assert connector.read(_EVERY_TYPE) == [
        {
            "i2": 1, "i8": 5000000000, "f8": 0.1, "num": Decimal("1.250"), "yes": True,
            "ch": "c  ", "uni": "é ✓", "nothing": None, "js": {"a": [1, 2.5, None, "s"]},
            "jb": {"b": True},
        }
    ]  # fmt: skip


@pytest.mark.parametrize("value", [None, True, 0, -7, 2**40, 0.5, "", "text", "é ✓"])
def test_parameters_come_back_as_bound(connector: PostgresConnector, value: object) -> None:
    [row] = connector.read("SELECT :v AS v", {"v": value})
    assert type(row["v"]) is type(value)
    assert row["v"] == value


@pytest.mark.parametrize(
    "ids",
    [
        ["plain", 'quo"te', "back\\slash", "com,ma", "{brace}", "sp ace", "NULL", "", "é"],
        [],
    ],
)
def test_a_list_binds_every_element_as_written(
    connector: PostgresConnector, ids: list[str]
) -> None:
    sql = "SELECT unnest(CAST(:ids AS TEXT[])) AS v"
    assert [r["v"] for r in connector.read(sql, {"ids": connector.bind_list(ids)})] == ids


def test_a_nul_character_is_a_database_error(connector: PostgresConnector) -> None:
    with pytest.raises(DatabaseError, match="NUL"):
        connector.read("SELECT CAST(:v AS TEXT) AS v", {"v": "a\x00b"})
    assert connector.read("SELECT 1 AS one") == [{"one": 1}]  # the connection lives on


def test_a_server_error_is_typed_and_leaves_the_connection_usable(
    connector: PostgresConnector,
) -> None:
    with pytest.raises(DatabaseError, match="no_such_table") as caught:
        connector.read("SELECT * FROM no_such_table")
    assert type(caught.value) is DatabaseError
    with pytest.raises(DatabaseError), connector.write() as tx:
        tx.execute("SELECT :absent AS a")
    assert connector.read("SELECT 2 AS two") == [{"two": 2}]


def test_open_store_opens_the_psycopg_connector(pg_only_url: str) -> None:
    store = open_store(pg_only_url)
    try:
        assert type(store.connector) is PostgresConnector
    finally:
        store.close()


# -- what needs no server --------------------------------------------------------------


def _split_schema_with_urllib(url: str) -> tuple[str, str | None]:
    """The reference split_schema must agree with (it keeps the URL as written instead)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), None)
    rest = [(k, v) for k, v in query if k != "schema"]
    return urlunsplit(parts._replace(query=urlencode(rest, quote_via=quote))), schema


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u@h/db",
        "postgresql://u@h/db?schema=t_1",
        "postgresql://u:p%40ss@h:5433/db?connect_timeout=2&schema=t_1&sslmode=disable",
        "postgresql://u@h/db?schema=t%5F1",
        "postgres://h/db?sslmode=require&schema=s&schema=other",
        "postgresql:///db?host=/run/postgresql&schema=abc",
        "postgresql://h/db?application_name=a%20b",
        "postgresql://h/db?application_name=%zz%4%e2%9c%93+x&%73chema=s_%31",
    ],
)
def test_split_schema_reads_the_url_as_urllib_does(url: str) -> None:
    conninfo, schema = split_schema(url)
    expected_conninfo, expected_schema = _split_schema_with_urllib(url)
    assert schema == expected_schema
    assert parse_qsl(urlsplit(conninfo).query) == parse_qsl(urlsplit(expected_conninfo).query)
    assert conninfo.split("?")[0] == url.split("?")[0]  # kept as written (urllib drops //)


@pytest.mark.parametrize("bad", ["Upper", "x-y", "1st", "a" * 64, "", "x%3By"])
def test_split_schema_refuses_what_is_not_a_plain_identifier(bad: str) -> None:
    with pytest.raises(DatabaseUnavailableError, match="plain lower-case identifier"):
        split_schema(f"postgresql://u@h/db?schema={bad}")


# -- a writer killed or interrupted mid-transaction ------------------------------------

_HALF_WRITER = """
import sys, time
from lirun.store import open_store
store = open_store(sys.argv[1])
with store.connector.write() as tx:
    tx.query("SELECT id FROM sessions WHERE id = :id FOR UPDATE", {"id": "k-1"})
    tx.execute("UPDATE sessions SET status_reason_summary = 'half' WHERE id = :id", {"id": "k-1"})
    print(type(store.connector).__name__, flush=True)
    time.sleep(60)
"""


def test_a_writer_killed_mid_transaction_leaves_nothing_and_holds_nothing(
    pg_only_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(pg_only_url)
    try:
        store.sessions.create(id="k-1")
        writer = subprocess.Popen(
            [sys.executable, "-c", _HALF_WRITER, pg_only_url], stdout=subprocess.PIPE, text=True
        )
        try:
            assert writer.stdout is not None
            name = writer.stdout.readline().strip()
            assert name == "PostgresConnector"
            monkeypatch.setenv("LIRUN_WRITE_RETRY_SECONDS", "0.3")
            with pytest.raises(DatabaseBusyError):  # the killed writer really held the row
                store.update_status(
                    "session", "k-1", new_status="failed", reason_code="run.failed.exception"
                )
        finally:
            writer.send_signal(signal.SIGKILL)
            writer.wait(timeout=30)
        monkeypatch.setenv("LIRUN_WRITE_RETRY_SECONDS", "20")
        start = time.monotonic()
        assert store.update_status(
            "session", "k-1", new_status="completed", reason_code="run.completed.ok"
        )
        assert time.monotonic() - start < 5
        row = store.get_entity("session", "k-1")
        assert row is not None
        assert row["status_reason_summary"] == ""
        assert [t.status for t in store.list_transitions("session", "k-1")] == [
            "running",
            "completed",
        ]
    finally:
        store.close()


class Interrupted(Exception):
    pass


def _interrupt(signum: int, frame: object) -> None:
    raise Interrupted


def test_a_signal_stops_a_write_that_waits_for_a_lock(pg_only_url: str) -> None:
    """A write waiting for another process's lock ends at once when a signal handler
    raises; the statement is cancelled on the server, and the store works on."""
    store = open_store(pg_only_url)
    previous = signal.signal(signal.SIGALRM, _interrupt)
    try:
        store.sessions.create(id="s-1")
        with store.connector.write() as tx:
            backend = tx.query("SELECT pg_backend_pid() AS pid")[0]["pid"]
        with write_lock_held(pg_only_url):
            signal.setitimer(signal.ITIMER_REAL, 0.5)
            start = time.monotonic()
            with pytest.raises(Interrupted):
                store.update_status(
                    "session", "s-1", new_status="completed", reason_code="run.completed.ok"
                )
            assert time.monotonic() - start < 5
            # Cancelled, not left waiting for the lock on the server until its release.
            waiting = (
                "SELECT 1 AS w FROM pg_stat_activity WHERE pid = :pid AND wait_event_type = 'Lock'"
            )
            deadline = time.monotonic() + 5
            while store.connector.read(waiting, {"pid": backend}) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert store.connector.read(waiting, {"pid": backend}) == []
        assert store.update_status(
            "session", "s-1", new_status="completed", reason_code="run.completed.ok"
        )
        assert [t.status for t in store.list_transitions("session", "s-1")] == [
            "running",
            "completed",
        ]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        store.close()


def test_a_server_that_never_answers_times_out_at_connect_timeout() -> None:
    """A socket that accepts and then says nothing: the connect gives up at the URL's
    connect_timeout with a typed error."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        start = time.monotonic()
        with pytest.raises(DatabaseUnavailableError, match="timeout"):
            open_store(f"postgresql://u:pw@127.0.0.1:{port}/db?connect_timeout=2")
        assert 1.5 < time.monotonic() - start < 10


@pytest.mark.slow
def test_a_read_cut_off_by_a_server_stop_is_a_lost_connection_then_reconnects(
    pg_cluster: PgCluster,
) -> None:
    url = pg_cluster.new_url()
    writer = open_store(url)
    writer.sessions.create(id="s-1")
    writer.close()
    reader = open_store(url, readonly=True)
    stopper = threading.Timer(0.5, pg_cluster.stop)
    try:
        stopper.start()
        start = time.monotonic()
        with pytest.raises(DatabaseConnectionLostError):
            reader.connector.read("SELECT pg_sleep(20) AS slept")
        assert time.monotonic() - start < 15
        stopper.join()
        pg_cluster.start()
        row = reader.get_entity("session", "s-1")
        assert row is not None
        assert row["status"] == "running"
    finally:
        stopper.cancel()
        reader.close()

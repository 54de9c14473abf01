"""Every PostgreSQL connection is bounded (issue 33, item 1): a connect timeout, the
server's statement timeout, a client-side limit on every wait for an answer (a caller's
deadline cuts it), and a name in ``pg_stat_activity``. The decisions are pure and tested
as tables; the real server shows that the session carries them."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from lirun.errors import DatabaseBusyError, UsageError
from lirun.settings import Settings
from lirun.store import bounds
from lirun.store.bounds import answer_by, answer_limit, connect_seconds, unbounded
from lirun.store.pg_connect import connect_settings, session_options, statement_seconds
from support.pg import make_pg_url

NOW = 1000.0


@pytest.mark.parametrize(
    ("statement", "deadline", "expected"),
    [
        (60.0, None, 70.0),  # a live server cancels first; a frozen one is cut at +10 s
        (0.0, None, None),  # statement timeout off: no limit of the client's own
        (60.0, NOW + 5, 6.0),  # a caller's deadline: the time left plus the grace
        (60.0, NOW - 3, 1.0),  # past it: only the grace
        (0.0, NOW + 100, 101.0),
        (5.0, NOW + 100, 15.0),
    ],
)
def test_answer_limit(statement: float, deadline: float | None, expected: float | None) -> None:
    with answer_by(deadline):
        assert answer_limit(statement, NOW) == expected


def test_unbounded_lifts_every_limit() -> None:
    with answer_by(NOW + 1), unbounded():
        assert answer_limit(60.0, NOW) is None
        assert connect_seconds(10.0, NOW) == 10  # a connect stays bounded
    assert answer_limit(60.0, NOW) == 70.0


@pytest.mark.parametrize(
    ("configured", "deadline", "expected"),
    [
        (10.0, None, 10),
        (0.0, None, 0),  # no limit
        (0.5, None, 2),  # libpq's least
        (10.0, NOW + 2.5, 4),  # the time left plus the grace, whole seconds up
        (0.0, NOW + 5, 6),
        (10.0, NOW - 60, 2),
    ],
)
def test_connect_seconds(configured: float, deadline: float | None, expected: int) -> None:
    with answer_by(deadline):
        assert connect_seconds(configured, NOW) == expected


def test_connect_settings_keep_what_the_url_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounds, "_process_name", ["lirun"])
    monkeypatch.delenv("LIRUN_DB_CONNECT_TIMEOUT", raising=False)
    assert connect_settings({}) == {"application_name": "lirun", "connect_timeout": 10}
    bounds.name_connections("wait")
    assert connect_settings({}, part="listen")["application_name"] == "lirun-wait:listen"
    given = {"application_name": "mine", "connect_timeout": "3"}
    assert connect_settings(given) == {"connect_timeout": 3}
    monkeypatch.setenv("LIRUN_DB_CONNECT_TIMEOUT", "0")
    assert connect_settings({}) == {"application_name": "lirun-wait"}


def test_statement_timeout_is_never_shorter_than_a_lock_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LIRUN_DB_STATEMENT_TIMEOUT", "5")
    monkeypatch.setenv("LIRUN_WRITE_RETRY_SECONDS", "30")
    assert statement_seconds() == 31.0
    assert "-c statement_timeout=31000" in session_options("", None)
    monkeypatch.setenv("LIRUN_DB_STATEMENT_TIMEOUT", "2m")
    assert statement_seconds() == 120.0
    monkeypatch.setenv("LIRUN_DB_STATEMENT_TIMEOUT", "0")
    assert statement_seconds() == 0.0
    assert "-c statement_timeout=0" in session_options("", None)


@pytest.mark.parametrize("name", ["LIRUN_DB_CONNECT_TIMEOUT", "LIRUN_DB_STATEMENT_TIMEOUT"])
def test_a_bad_bound_is_refused_up_front(name: str) -> None:
    with pytest.raises(UsageError, match=name):
        Settings.from_env({name: "soon"})
    Settings.from_env({name: "30s"})


@pytest.fixture
def pg_only_url() -> Iterator[str]:
    yield from make_pg_url()


@pytest.mark.postgres
def test_a_session_carries_its_bounds_and_its_name(
    pg_only_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lirun.store.postgres import PostgresConnector

    monkeypatch.setattr(bounds, "_process_name", ["lirun-test"])
    monkeypatch.setenv("LIRUN_DB_STATEMENT_TIMEOUT", "45")
    connector = PostgresConnector(pg_only_url)
    try:
        row = connector.read(
            "SELECT current_setting('statement_timeout') AS st, "
            "current_setting('application_name') AS app"
        )[0]
        listener = connector.listen("lirun_test_channel")
        try:
            conn = listener._conn
            names = conn.execute("SELECT current_setting('application_name')").fetchone()
        finally:
            listener.close()
    finally:
        connector.close()
    assert (row["st"], row["app"]) == ("45s", "lirun-test")
    assert names is not None
    assert names["current_setting"] == "lirun-test:listen"


@pytest.mark.postgres
def test_a_live_server_cancels_a_slow_statement_and_unbounded_lets_it_run(
    pg_only_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lirun.store.postgres import PostgresConnector

    monkeypatch.setenv("LIRUN_DB_STATEMENT_TIMEOUT", "1")
    monkeypatch.setenv("LIRUN_WRITE_RETRY_SECONDS", "0")
    monkeypatch.setattr(bounds, "ANSWER_MARGIN_SECONDS", 0.5)  # the client cuts at 1.5 s
    connector = PostgresConnector(pg_only_url)
    try:
        started = time.monotonic()
        with pytest.raises(DatabaseBusyError, match="statement timeout"):
            connector.read("SELECT pg_sleep(3)")
        assert time.monotonic() - started < 1.5  # the server's timeout came first
        with unbounded(), connector.write() as tx:  # as a migration does
            tx.execute("SET LOCAL statement_timeout = 0")
            tx.query("SELECT pg_sleep(2)")  # past both limits, and not cut
        assert connector.read("SELECT 1 AS one") == [{"one": 1}]
    finally:
        connector.close()

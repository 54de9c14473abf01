"""Every PostgreSQL connection carries TCP keepalives and a user timeout (unless the URL
sets its own), so a cut link is a lost connection in seconds, not after ~15 minutes of
kernel retransmits: a worker must learn within its lease that it cannot renew it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lirun.store.pg_connect import tcp_settings
from support.pg import make_pg_url


def test_tcp_settings_fill_in_only_what_the_url_leaves_out() -> None:
    assert tcp_settings({}, user_timeout=True) == {
        "keepalives": "1",
        "keepalives_idle": "10",
        "keepalives_interval": "5",
        "keepalives_count": "3",
        "tcp_user_timeout": "20000",
    }
    kept = tcp_settings({"keepalives_idle": "60", "tcp_user_timeout": "0"}, user_timeout=True)
    assert "keepalives_idle" not in kept
    assert "tcp_user_timeout" not in kept
    assert "tcp_user_timeout" not in tcp_settings({}, user_timeout=False)  # libpq < 12


@pytest.fixture
def pg_only_url() -> Iterator[str]:
    yield from make_pg_url()


@pytest.mark.postgres
def test_psycopg_connections_carry_them(pg_only_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from lirun.store.postgres import PostgresConnector

    connector = PostgresConnector(pg_only_url + "&keepalives_idle=30")
    try:
        conn = connector.connect()
        try:
            params = conn.info.get_parameters()
        finally:
            conn.close()
    finally:
        connector.close()
    assert params["keepalives"] == "1"
    assert params["keepalives_count"] == "3"
    assert params["keepalives_idle"] == "30"  # the URL's own wins
    assert params["tcp_user_timeout"] == "20000"

"""The PostgreSQL server the tests use, and a fresh schema on it per test."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

PG_URL = os.environ.get("LIRUN_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
REQUIRE_PG = os.environ.get("LIRUN_TEST_REQUIRE_PG") == "1"

_pg_error: str | None = None
_pg_checked = False


def pg_unavailable() -> str | None:
    """None when PostgreSQL answers, else why not (checked once per session)."""
    global _pg_checked, _pg_error
    if not _pg_checked:
        _pg_checked = True
        try:
            import psycopg

            with psycopg.connect(PG_URL, connect_timeout=5) as conn:
                conn.execute("SELECT 1")
        except Exception as exc:
            _pg_error = f"{type(exc).__name__}: {exc}"
    return _pg_error


def admin_execute(sql: str) -> None:
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(sql)


def make_pg_url() -> Iterator[str]:
    reason = pg_unavailable()
    if reason:
        if REQUIRE_PG:
            pytest.fail(f"PostgreSQL is required (LIRUN_TEST_REQUIRE_PG=1) but: {reason}")
        pytest.skip(f"PostgreSQL unavailable: {reason}")
    schema = f"t_{uuid.uuid4().hex[:16]}"
    sep = "&" if "?" in PG_URL else "?"
    yield f"{PG_URL}{sep}schema={schema}"
    # and the PostgreSQL queue's schema, made by a worker or `li submit` on that URL
    admin_execute(
        f'DROP SCHEMA IF EXISTS "{schema}" CASCADE; DROP SCHEMA IF EXISTS "{schema}_queue" CASCADE'
    )

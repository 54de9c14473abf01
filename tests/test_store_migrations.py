"""Migrations: concurrent first opens, the version record, a newer schema, dialect parity."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lirun.errors import DatabaseUnavailableError, SchemaTooNewError
from lirun.store import Store, is_postgres_url, open_store
from lirun.store.postgres import split_schema
from lirun.store.queries import latest_version, load_migrations
from lirun.store.sql_script import split_statements
from support.pg import make_pg_url
from support.storekit import raw_write

_OPENER = """
import sys
from lirun.store import open_store
url, name = sys.argv[1], sys.argv[2]
print("ready", flush=True)
sys.stdin.readline()
store = open_store(url)
store.sessions.create(id=name)
store.close()
print("ok", flush=True)
"""


def versions(store: Store) -> list[tuple[int, str]]:
    rows = store.connector.read("SELECT version, name FROM schema_migrations ORDER BY version")
    return [(r["version"], r["name"]) for r in rows]


def schema_state(url: str) -> dict[str, Any]:
    """Tables, schema_migrations rows and row counts, read without lirun."""
    return _pg_state(url) if is_postgres_url(url) else _sqlite_state(url)


def _pg_state(url: str) -> dict[str, Any]:
    import psycopg

    conninfo, schema = split_schema(url)
    with psycopg.connect(conninfo, options=f"-c search_path={schema}") as conn:
        tables = [
            str(r[0])
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
                "ORDER BY table_name",
                (schema,),
            )
        ]
        counts = {t: conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchall() for t in tables}
        migrations = conn.execute("SELECT * FROM schema_migrations ORDER BY version").fetchall()
        return {"tables": tables, "migrations": migrations, "counts": counts}


def _sqlite_state(path: str) -> dict[str, Any]:
    conn = sqlite3.connect(path)
    try:
        tables = [
            r[0]
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY 1")
        ]
        return {
            "tables": tables,
            "user_version": conn.execute("PRAGMA user_version").fetchone()[0],
            "migrations": conn.execute("SELECT * FROM schema_migrations").fetchall(),
            "counts": {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchall() for t in tables},
        }
    finally:
        conn.close()


@pytest.mark.slow
def test_processes_opening_a_new_database_at_once_all_succeed(
    db_url: str, li_env: dict[str, str]
) -> None:
    if not is_postgres_url(db_url):
        assert not Path(db_url).exists()
    openers = [
        subprocess.Popen(
            [sys.executable, "-c", _OPENER, db_url, f"s-{i}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=li_env,
        )
        for i in range(4)
    ]
    for p in openers:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "ready"
    for p in openers:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    results = []
    for p in openers:
        out, err = p.communicate(timeout=60)
        results.append((p.returncode, out.strip(), err))
    assert results == [(0, "ok", "")] * 4
    store = open_store(db_url)
    try:
        assert versions(store) == all_versions(store.dialect)
        assert len(store.sessions.list_recent()) == 4
    finally:
        store.close()


def all_versions(dialect: str) -> list[tuple[int, str]]:
    return [(version, name) for version, name, _ in load_migrations(dialect)]


def test_schema_migrations_records_every_version(store: Store, db_url: str) -> None:
    latest = latest_version(store.dialect)
    assert versions(store) == all_versions(store.dialect)
    assert [v for v, _ in versions(store)] == list(range(1, latest + 1))
    if not is_postgres_url(db_url):
        assert schema_state(db_url)["user_version"] == latest
    store.close()
    again = open_store(db_url)  # reopening migrates nothing
    try:
        assert versions(again) == all_versions(again.dialect)
    finally:
        again.close()


def execute_without_lirun(url: str, statements: list[str]) -> None:
    """Build a database by hand, as an older lirun would have left it."""
    if not is_postgres_url(url):
        with sqlite3.connect(url) as conn:
            for statement in [*statements, "PRAGMA user_version = 1"]:
                conn.execute(statement)
        return
    import psycopg

    conninfo, schema = split_schema(url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'SET search_path TO "{schema}"')
        for statement in statements:
            conn.execute(statement.replace("%", "%%"))


def test_a_version_1_database_is_upgraded_on_open(db_url: str) -> None:
    dialect = "postgres" if is_postgres_url(db_url) else "sqlite"
    _version, _name, initial = load_migrations(dialect)[0]
    statements = [
        *split_statements(initial),
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
        "applied_at DOUBLE PRECISION NOT NULL)",
        "INSERT INTO schema_migrations VALUES (1, 'initial', 0)",
        "INSERT INTO sessions (id, status, created_at, updated_at) VALUES ('old', 'running', 0, 0)",
    ]
    execute_without_lirun(db_url, statements)
    store = open_store(db_url)
    try:
        assert versions(store) == all_versions(dialect)
        store.update_fields("session", "old", {"child_pid": 42, "child_start_time": 1.5})
        row = store.get_entity("session", "old")
        assert row is not None
        assert (row["child_pid"], row["child_start_time"]) == (42, 1.5)
    finally:
        store.close()


def test_a_newer_schema_is_refused_and_left_alone(store: Store, db_url: str) -> None:
    store.sessions.create(id="s-1")
    raw_write(
        store,
        "INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 0)",
    )
    store.close()
    before = schema_state(db_url)
    main_bytes = None if is_postgres_url(db_url) else Path(db_url).read_bytes()
    for readonly in (False, True):
        with pytest.raises(SchemaTooNewError) as caught:
            open_store(db_url, readonly=readonly)
        message = str(caught.value)
        assert "schema version 999" in message
        assert "upgrade lirun" in message
    assert schema_state(db_url) == before
    if main_bytes is not None:
        assert Path(db_url).read_bytes() == main_bytes


def test_a_newer_sqlite_user_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    open_store(path).close()
    latest = latest_version("sqlite")
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {latest + 1}")
    conn.close()
    before = path.read_bytes()
    newer = latest + 1
    with pytest.raises(SchemaTooNewError, match=rf"schema version {newer}, newer .* \({latest}\)"):
        open_store(path)
    assert path.read_bytes() == before


def test_readonly_open_refuses_an_unmigrated_database(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE other (x)")  # a database (not an empty file) without our schema
    conn.close()
    with pytest.raises(DatabaseUnavailableError, match="li db migrate"):
        open_store(path, readonly=True)
    with pytest.raises(DatabaseUnavailableError, match="no lirun database"):
        open_store(tmp_path / "absent.db", readonly=True)
    assert not (tmp_path / "absent.db").exists()


@pytest.fixture
def pg_url() -> Iterator[str]:
    yield from make_pg_url()


DESIGN_TABLES = {
    "sessions",
    "invocations",
    "shows",
    "plays",
    "teams",
    "schedules",
    "schedule_runs",
    "branches",
    "messages",
    "status_transitions",
    "admin_events",
    "schema_migrations",
}

# PostgreSQL numbers history and audit rows with a ``seq`` column (BIGSERIAL) to keep
# insertion order; SQLite gets the same from its implicit ``rowid``.
# PostgreSQL orders admin events by a bigserial; SQLite by rowid.
ORDER_COLUMNS = {("admin_events", "seq")}


def test_both_dialects_migrate_to_the_same_tables_and_columns(tmp_path: Path, pg_url: str) -> None:
    sqlite_path = tmp_path / "state.db"
    open_store(sqlite_path).close()
    conn = sqlite3.connect(sqlite_path)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    lite = {(t, r[1]) for t in tables for r in conn.execute(f'PRAGMA table_info("{t}")')}
    conn.close()

    open_store(pg_url).close()
    import psycopg

    conninfo, schema = split_schema(pg_url)
    with psycopg.connect(conninfo) as pg:
        rows = pg.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = %s",
            (schema,),
        ).fetchall()
    postgres = {(t, c) for t, c in rows}

    assert {t for t, _ in lite} >= DESIGN_TABLES
    assert lite == postgres - ORDER_COLUMNS
    assert postgres >= ORDER_COLUMNS

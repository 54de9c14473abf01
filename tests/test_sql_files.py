"""The SQL files: queries written once in common/ or per dialect, the same names in every
dialect, same migrations, bound values only."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from lirun.lifecycle import POLICIES
from lirun.store import queries
from lirun.store.queries import (
    COMMON,
    DIALECTS,
    QueryFilesError,
    _sql_dir,
    latest_version,
    load_migrations,
    load_queries,
    parse_queries,
    to_pyformat,
)
from lirun.store.records import SESSION_FIELDS, UPDATABLE_FIELDS
from lirun.store.sql_script import split_statements

# The only ``{slot}``s a query may have: identifiers from the closed registries in
# lifecycle.py / store/core.py, never values (Store.sql checks them: check_slots).
SLOTS = {"table", "columns", "values", "extra_set", "assignments"}
# The only templates; the header of queries.sql says why each is safe.
TEMPLATES = {"insert_row", "get_row", "match_ids", "lock_row", "cas_update_status", "update_fields"}


def test_both_dialects_define_the_same_query_names() -> None:
    sqlite, postgres = load_queries("sqlite"), load_queries("postgres")
    assert sqlite.keys() == postgres.keys()
    expected = {"cas_update_status", "insert_transition", "lock_row", "notify_transition"}
    assert expected <= set(sqlite)


def test_both_dialects_ship_the_same_files_and_migrations() -> None:
    names = [sorted(p.name for p in Path(_sql_dir(d)).glob("*.sql")) for d in DIALECTS]
    assert names[0] == names[1]
    sqlite, postgres = load_migrations("sqlite"), load_migrations("postgres")
    assert [(v, n) for v, n, _ in sqlite] == [(v, n) for v, n, _ in postgres]
    assert [v for v, _, _ in sqlite] == list(range(1, latest_version("sqlite") + 1))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_queries_only_have_identifier_slots(dialect: str) -> None:
    for name, sql in load_queries(dialect).items():
        assert sql, name
        slots = set(re.findall(r"\{(\w*)\}", sql))
        assert slots <= SLOTS, (name, slots)
        assert "%s" not in sql, name
        assert "?" not in sql, name  # named :params only
        assert not slots or name in TEMPLATES, (name, slots)


def test_every_template_is_documented_in_the_file_header() -> None:
    text = (Path(_sql_dir(COMMON)) / "queries.sql").read_text(encoding="utf-8")
    header = text.split("-- name:", 1)[0]
    for name in TEMPLATES:
        assert name in header, name
    for slot in SLOTS:
        assert "{" + slot + "}" in header, slot


def test_the_store_checks_exactly_the_slots_the_files_use() -> None:
    from lirun.store.queries import _SLOT_ITEM

    assert {"table", *_SLOT_ITEM} == SLOTS


def test_parse_queries_splits_on_headers_and_drops_comments() -> None:
    text = "-- file comment\n-- name: a\n-- why\nSELECT 1\n\n-- name: b_2\nSELECT :x\n"
    assert parse_queries(text) == {"a": "SELECT 1", "b_2": "SELECT :x"}


def _sql_tree(tmp_path: Path, files: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """``files`` (``dir/file.sql`` → text) as the SQL directory the loader reads."""
    for name in (COMMON, *DIALECTS):
        (tmp_path / name).mkdir()
    for relative, text in files.items():
        (tmp_path / relative).write_text(text, encoding="utf-8")
    monkeypatch.setattr(queries, "_sql_dir", lambda name: str(tmp_path / name))


def test_a_name_defined_twice_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    same = {
        "sqlite/a.sql": "-- name: same\nSELECT 1\n",
        "sqlite/b.sql": "-- name: same\nSELECT 2\n",
    }
    _sql_tree(tmp_path, same, monkeypatch)
    with pytest.raises(QueryFilesError, match="defined twice: \\['same'\\]"):
        queries.load_queries.__wrapped__("sqlite")


def test_common_and_dialect_queries_are_loaded_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {
        "common/a.sql": "-- name: shared\nSELECT 1\n",
        "sqlite/a.sql": "-- name: differs\nSELECT 'lite'\n",
        "postgres/a.sql": "-- name: differs\nSELECT 'pg'\n",
    }
    _sql_tree(tmp_path, files, monkeypatch)
    assert queries.load_queries.__wrapped__("sqlite") == {
        "shared": "SELECT 1",
        "differs": "SELECT 'lite'",
    }
    assert queries.load_queries.__wrapped__("postgres")["differs"] == "SELECT 'pg'"


def test_a_name_in_common_and_in_a_dialect_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {
        "common/a.sql": "-- name: shared\nSELECT 1\n",
        "sqlite/a.sql": "-- name: x\nSELECT 1\n",
        "postgres/a.sql": "-- name: x\nSELECT 2\n\n-- name: shared\nSELECT 2\n",
    }
    _sql_tree(tmp_path, files, monkeypatch)
    for dialect in DIALECTS:  # each dialect's load sees it, not only the guilty one's
        with pytest.raises(QueryFilesError, match="in common/ and in postgres/: \\['shared'\\]"):
            queries.load_queries.__wrapped__(dialect)


def test_a_dialect_lacking_a_query_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {
        "common/a.sql": "-- name: shared\nSELECT 1\n",
        "sqlite/a.sql": "-- name: x\nSELECT 1\n",
        "postgres/a.sql": "-- name: x\nSELECT 2\n\n-- name: only_pg\nSELECT 2\n",
    }
    _sql_tree(tmp_path, files, monkeypatch)
    for dialect in DIALECTS:
        with pytest.raises(QueryFilesError, match=r"sqlite/ lacks .*\['only_pg'\]"):
            queries.load_queries.__wrapped__(dialect)


def test_no_query_is_written_twice() -> None:
    """A query both dialects would run as it is belongs in common/ (whitespace aside)."""
    texts = [queries._read_queries(_sql_dir(d)) for d in DIALECTS]
    same = [n for n, sql in texts[0].items() if sql.split() == texts[1].get(n, "").split()]
    assert not same, f"the same in both dialects, move to sql/common/: {same}"


def test_extra_and_updatable_fields_are_columns_of_their_table() -> None:
    conn = sqlite3.connect(":memory:")
    for _, _, script in load_migrations("sqlite"):
        for statement in split_statements(script):
            conn.execute(statement)
    for entity_type, policy in POLICIES.items():
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({policy.table})")}
        assert policy.extra_fields <= columns, entity_type
        assert UPDATABLE_FIELDS[entity_type] <= columns, entity_type
        assert policy.ended_column is None or policy.ended_column in columns, entity_type
        assert not policy.exit_code_by_status or "exit_code" in columns, entity_type
    assert {row[1] for row in conn.execute("PRAGMA table_info(sessions)")} >= SESSION_FIELDS


def test_to_pyformat() -> None:
    assert to_pyformat("SELECT :a, :b_1 WHERE x LIKE '5%'") == (
        "SELECT %(a)s, %(b_1)s WHERE x LIKE '5%%'"
    )
    assert to_pyformat("SELECT CAST(:a AS TEXT), x::int") == "SELECT CAST(%(a)s AS TEXT), x::int"


def test_query_headers_and_migration_names_are_read_without_re() -> None:
    assert queries._header_name("--name:a_1") == "a_1"
    assert queries._header_name("--   name:   _x  ") == "_x"
    for line in ("-- name: 1a", "-- name: A", "-- name: a b", "-- name:", "- name: a", "-- nom: a"):
        assert queries._header_name(line) is None, line
    assert queries._migration_name("0003_records.sql") == (3, "records")
    for name in ("003_x.sql", "0003_X.sql", "0003_.sql", "0003-x.sql", "0003_x.sqlx", "x.sql"):
        assert queries._migration_name(name) is None, name

"""A migration script splits at the ``;`` that ends a statement, and nowhere else: not in
a string, a quoted name, a comment, a ``$$`` body or a trigger's ``BEGIN … END``."""

from __future__ import annotations

import pytest

from lirun.store import Store
from lirun.store.sql_script import split_statements

_POSTGRES_SCRIPT = """
-- a function whose body holds statements of its own
CREATE FUNCTION stamp_note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.body := NEW.body || ';stamped';
  RETURN NEW;
END;
$$;
CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);
CREATE TRIGGER notes_stamp BEFORE INSERT ON notes
  FOR EACH ROW EXECUTE FUNCTION stamp_note();
DO $body$ BEGIN PERFORM 1; END $body$;
"""

_SQLITE_SCRIPT = """
CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);
/* a trigger: its body is statements too; */
CREATE TRIGGER notes_stamp AFTER INSERT ON notes
BEGIN
  UPDATE notes SET body = body || CASE WHEN 1 THEN ';stamped' ELSE ';' END
   WHERE id = NEW.id;
END;
"""


def test_only_a_statement_ending_semicolon_splits() -> None:
    script = """
    SELECT 'a;b', "odd;name" FROM t; -- a comment; with a semicolon
    SELECT $1, $tag$ x; $$ y; $tag$;
    /* block; comment */ SELECT 'it''s;' ;
    SELECT CASE WHEN a THEN ';' END FROM t;
    """
    assert list(split_statements(script)) == [
        """SELECT 'a;b', "odd;name" FROM t""",
        "SELECT $1, $tag$ x; $$ y; $tag$",
        "SELECT 'it''s;'",
        "SELECT CASE WHEN a THEN ';' END FROM t",
    ]


def test_a_dollar_quoted_body_and_a_trigger_body_stay_whole() -> None:
    pg = list(split_statements(_POSTGRES_SCRIPT))
    assert len(pg) == 4
    assert pg[0].endswith("$$")
    assert "RETURN NEW;" in pg[0]
    assert pg[3] == "DO $body$ BEGIN PERFORM 1; END $body$"
    lite = list(split_statements(_SQLITE_SCRIPT))
    assert len(lite) == 2
    assert lite[1].startswith("CREATE TRIGGER")
    assert lite[1].endswith("END")


@pytest.mark.parametrize("script", ["", "  \n-- only a comment;\n", ";;"])
def test_nothing_to_run(script: str) -> None:
    assert list(split_statements(script)) == []


def test_the_statements_run_on_each_backend(store: Store) -> None:
    """Run as the migrations run (one by one, in one transaction): the bodies work."""
    postgres = store.connector.dialect == "postgres"
    with store.connector.write() as tx:
        for statement in split_statements(_POSTGRES_SCRIPT if postgres else _SQLITE_SCRIPT):
            tx.execute(statement)
        tx.execute("INSERT INTO notes (id, body) VALUES (1, 'hello')")
    assert store.connector.read("SELECT body FROM notes") == [{"body": "hello;stamped"}]

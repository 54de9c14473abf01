"""The store's side of the dashboard on both backends: migration 0007 numbers an existing
history in the order it was written, the runs page's reads, and the batched import."""

from __future__ import annotations

import time

import pytest

from lirun.errors import ConflictError, ValidationError
from lirun.store import Store, is_postgres_url, open_store
from lirun.store.queries import load_migrations
from lirun.store.sql_script import split_statements
from lirun.store.ui_reads import RunFilter, page_params


def test_migration_0007_numbers_an_existing_history_in_write_order(db_url: str) -> None:
    from test_store_migrations import execute_without_lirun

    dialect = "postgres" if is_postgres_url(db_url) else "sqlite"
    statements = [
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
        "applied_at DOUBLE PRECISION NOT NULL)",
    ]
    for version, name, script in load_migrations(dialect):
        if version < 7:
            statements += [*split_statements(script)]
            statements.append(f"INSERT INTO schema_migrations VALUES ({version}, '{name}', 0)")
    # Written in this order; their clocks disagree (another host's clock ran behind).
    for tid, created in (("t-b", 20.0), ("t-a", 10.0), ("t-c", 30.0)):
        statements.append(
            "INSERT INTO status_transitions (id, entity_type, entity_id, status, reason_code, "
            f"source, created_at) VALUES ('{tid}', 'session', 'old', 'running', "
            f"'run.running.started', 'system', {created})"
        )
    execute_without_lirun(db_url, statements)
    store = open_store(db_url)
    try:
        rows = store.ui.transitions_since(0)
        assert [(r.seq, r.created_at) for r in rows] == [(1, 20.0), (2, 10.0), (3, 30.0)]
        store.sessions.create(id="new", owner_pid=None)
        assert store.ui.last_transition_seq() == 4
    finally:
        store.close()


def test_import_checks_every_row_before_writing_any(store: Store) -> None:
    good = {
        "id": "i1",
        "status": "completed",
        "reason_code": "run.completed.ok",
        "created_at": time.time(),
    }
    with pytest.raises(ValidationError):
        store.sessions.import_many([good, {**good, "id": "i2", "reason_code": "show.completed.ok"}])
    with pytest.raises(ValidationError, match="unknown field"):
        store.sessions.import_many([{**good, "pid": 3}])
    assert store.get_entity("session", "i1") is None
    assert store.sessions.import_many([good]) == 1
    row = store.get_entity("session", "i1")
    assert row is not None
    assert row["exit_code"] == 0
    assert [t.status for t in store.list_transitions("session", "i1")] == ["completed"]
    with pytest.raises(ConflictError):
        store.sessions.import_many([good])


def test_runs_page_reads_every_kind_with_its_label(store: Store) -> None:
    show = store.shows.create(topic="t")
    play = store.shows.create_play(show_id=show.id, name="models")
    run = store.schedules.create_run(action_kind="agent")
    inv = store.invocations.create(skill="review", prompt="look")
    session = store.sessions.create(id="s", owner_pid=None, prompt="p", provider="codex")
    rows = store.ui.runs_page(limit=10)
    assert [(r.kind, r.id) for r in rows] == [
        ("run", session.id),
        ("invocation", inv.id),
        ("schedule_run", run.id),
        ("play", play.id),
    ]
    labels = {r.kind: (r.label, r.parent_id) for r in rows}
    assert labels["play"] == ("models", show.id)
    assert labels["invocation"] == ("review", None)
    assert [r.id for r in store.ui.runs_page(RunFilter(kinds=("play", "run")))] == [
        session.id,
        play.id,
    ]
    assert store.ui.runs_page(RunFilter(provider="codex"))[0].id == "s"


def test_an_unknown_kind_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="not a run kind"):
        page_params(RunFilter(kinds=("team",)), None, 10)
    assert page_params(RunFilter(), None, 10_000)["limit"] == 200


def test_free_text_is_literal_and_case_insensitive(store: Store) -> None:
    now = time.time()
    texts = ("Fix 100% of it", "a_b under", "back\\slash", "plain fix")
    store.sessions.import_many(
        {
            "id": f"t{i}",
            "status": "completed",
            "reason_code": "run.completed.ok",
            "prompt": text,
            "created_at": now + i,
        }
        for i, text in enumerate(texts)
    )

    def found(text: str) -> list[str]:
        return [r.id for r in store.ui.runs_page(RunFilter(text=text))]

    assert found("100%") == ["t0"]
    assert found("FIX") == ["t3", "t0"]
    assert found("a_b") == ["t1"]
    assert found("_") == ["t1"]
    assert found("%") == ["t0"]
    assert found("k\\s") == ["t2"]
    assert found("T2") == ["t2"]
    assert found("nothing") == []


@pytest.mark.postgres
def test_free_text_on_postgres_walks_the_newest_runs_first(pg_store: Store) -> None:
    """A LIKE '%...%' over an expression the planner takes to match about one row, so it
    read and sorted every run for a page of 50; the search walks (created_at, id) newest
    first and stops at the page."""
    store = pg_store
    from support.storekit import raw_write

    now = time.time()
    for first in range(0, 20_000, 10_000):
        store.sessions.import_many(
            {
                "id": f"b{i:06d}",
                "status": "completed",
                "reason_code": "run.completed.ok",
                "prompt": f"task {i}: refactor module {i % 97}",
                "created_at": now + i,
            }
            for i in range(first, first + 10_000)
        )
    raw_write(store, "ANALYZE sessions", {})
    params = page_params(RunFilter(text="module 42"), None, 51)
    plan = "\n".join(
        str(next(iter(r.values())))
        for r in store.connector.read("EXPLAIN " + store.sql("ui_runs_page"), params)
    )
    assert "Index Scan Backward using sessions_" in plan, plan
    assert "Seq Scan on sessions" not in plan, plan
    assert len(store.ui.runs_page(RunFilter(text="module 42"), limit=51)) == 51

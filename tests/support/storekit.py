"""Helpers for the store tests: lock holders, snapshots, history checks, and a store
opened for a few reads (``opened``)."""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from lirun.lifecycle import POLICIES
from lirun.store import Store, is_postgres_url, open_store
from lirun.store.rows import TransitionRow

# One reason per (entity, status) that fits the entity's domains.
REASON_FOR: dict[tuple[str, str], str] = {
    ("session", "running"): "run.running.started",
    ("session", "completed"): "run.completed.ok",
    ("session", "completed_empty"): "run.completed_empty.no_evidence",
    ("session", "failed"): "run.failed.exception",
    ("session", "timed_out"): "run.timed_out.deadline",
    ("session", "aborted"): "run.cancelled.sigint",
    ("session", "cancelled"): "run.cancelled.system",
    ("schedule_run", "waiting_dependency"): "schedule.waiting_dependency.upstream",
    ("schedule_run", "running"): "schedule.running.started",
    ("schedule_run", "retry_wait"): "schedule.retry_wait.backoff",
    ("schedule_run", "completed"): "schedule.completed.ok",
    ("schedule_run", "failed"): "schedule.failed.action",
    ("schedule_run", "skipped"): "schedule.skipped.overlap",
    ("show", "completed"): "show.completed.ok",
    ("show", "aborted"): "show.aborted.user",
    ("play", "prepared"): "play.prepared.ok",
    ("play", "running"): "play.running.started",
    ("play", "gated"): "play.gated.awaiting",
    ("play", "redoing"): "play.redoing.gate_failed",
    ("play", "merged"): "play.merged.ok",
    ("play", "blocked"): "play.blocked.dependency",
    ("team", "archived"): "team.archived.user",
    ("schedule", "enabled"): "schedule_definition.enabled.user",
    ("schedule", "disabled"): "schedule_definition.disabled.user",
    ("schedule", "deleted"): "schedule_definition.deleted.user",
}


@contextmanager
def opened(url: str) -> Iterator[Store]:
    """A store of the test's own for a few reads or writes, closed after the block."""
    store = open_store(url)
    try:
        yield store
    finally:
        store.close()


def invocation_sessions(url: str, invocation_id: str) -> list[dict[str, Any]]:
    """A flow invocation's leg sessions, read with a store of their own."""
    with opened(url) as store:
        return [row.as_dict() for row in store.waits.invocation_sessions(invocation_id)]


def reason_for(entity_type: str, status: str) -> str:
    key = ("session", status) if entity_type == "invocation" else (entity_type, status)
    return REASON_FOR[key]


_schedule_names = itertools.count()


def create_entity(store: Store, entity_type: str, entity_id: str | None = None) -> str:
    """Create one row of ``entity_type`` in its initial status; return its id."""
    if entity_type == "session":
        return store.sessions.create(id=entity_id).id
    if entity_type == "invocation":
        return store.invocations.create(skill="review", id=entity_id).id
    if entity_type == "schedule_run":
        return store.schedules.create_run(action_kind="agent", id=entity_id).id
    if entity_type == "show":
        return store.shows.create(topic="t", id=entity_id).id
    if entity_type == "play":
        return store.shows.create_play(show_id="show-1", name="p", id=entity_id).id
    if entity_type == "team":
        return store.teams.create(name="crew", id=entity_id).id
    if entity_type == "schedule":
        name = f"s-{next(_schedule_names)}"
        return store.schedules.create(name=name, fields={"action_kind": "run"}, id=entity_id).id
    raise AssertionError(entity_type)


def row_of(store: Store, entity_type: str, entity_id: str) -> dict[str, Any]:
    """The entity's stored row, which the test expects to be there."""
    row = store.get_entity(entity_type, entity_id)
    assert row is not None, f"no {entity_type} {entity_id}"
    return row


def snapshot(store: Store, entity_type: str, entity_id: str) -> dict[str, Any]:
    """Everything a status write may touch, read from storage."""
    return {
        "row": store.get_entity(entity_type, entity_id),
        "transitions": store.list_transitions(entity_type, entity_id),
        "events": store.list_admin_events(),
    }


def raw_write(store: Store, sql: str, params: dict[str, Any] | None = None) -> int:
    with store.connector.write() as tx:
        return tx.execute(sql, params or {})


def assert_linear(store: Store, entity_type: str, entity_id: str) -> list[TransitionRow]:
    """History starts at None, each step starts where the last ended, and ends at the row."""
    history = store.list_transitions(entity_type, entity_id)
    assert history, "no history"
    assert history[0].previous_status is None
    assert history[0].source == "system"
    for before, after in itertools.pairwise(history):
        assert after.previous_status == before.status, history
    row = store.get_entity(entity_type, entity_id)
    assert row is not None
    assert row["status"] == history[-1].status
    return history


def entity_types() -> list[str]:
    return sorted(POLICIES)


_HOLD_SQLITE = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE sessions SET updated_at = updated_at")
print("locked", flush=True)
sys.stdin.read()
"""

_HOLD_PG = """
import sys, psycopg
from lirun.store.postgres import split_schema
conninfo, schema = split_schema(sys.argv[1])
conn = psycopg.connect(conninfo, options=f"-c search_path={schema}")
conn.execute("LOCK TABLE sessions IN EXCLUSIVE MODE")
print("locked", flush=True)
sys.stdin.read()
"""


@contextmanager
def write_lock_held(url: str) -> Iterator[subprocess.Popen[str]]:
    """Another process holds the write lock until the block ends.

    SQLite: an open ``BEGIN IMMEDIATE`` with a pending write. PostgreSQL: ``LOCK TABLE
    sessions IN EXCLUSIVE MODE`` (blocks every writer of ``sessions``, never a reader).
    """
    code = _HOLD_PG if is_postgres_url(url) else _HOLD_SQLITE
    proc = subprocess.Popen(
        [sys.executable, "-c", code, url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "locked"
        yield proc
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)

"""What the bench scripts share: throwaway databases on each backend, session rows to
work on, and output lines."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

PG_URL = os.environ.get("LIRUN_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def out(name: str, value: float | int | str) -> None:
    """One ``name: value`` line, flushed (a reader may be watching a long bench)."""
    print(f"{name}: {round(value, 2) if isinstance(value, float) else value}", flush=True)


@contextmanager
def sqlite_url() -> Iterator[str]:
    """A fresh SQLite file in a temp dir removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="lirun-bench-") as tmp:
        yield os.path.join(tmp, "state.db")


@contextmanager
def postgres_url() -> Iterator[str]:
    """``$LIRUN_BENCH_PG_URL`` with a throwaway schema dropped afterwards."""
    import psycopg

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    try:
        yield f"{PG_URL}{'&' if '?' in PG_URL else '?'}schema={schema}"
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def running_sessions(url: str, prefix: str, n: int) -> list[str]:
    """``n`` running session rows ``<prefix>-<i>``, created with a store of their own."""
    from lirun.store import open_store

    store = open_store(url)
    try:
        return [store.sessions.create(id=f"{prefix}-{i}").id for i in range(n)]
    finally:
        store.close()


def completed_write() -> dict[str, Any]:
    """The ``update_status`` keywords that end a running session ``completed`` with exit
    code 0, as a supervised run does (for ``Store`` and the awaited ``StateDB`` alike)."""
    return {
        "new_status": "completed",
        "reason_code": "run.completed.ok",
        "expected_statuses": {"running"},
        "extra_fields": {"exit_code": 0},
    }


def complete(store: Any, sid: str) -> None:
    """End the running session ``sid`` ``completed`` (exit code 0)."""
    store.update_status("session", sid, **completed_write())

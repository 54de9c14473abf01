"""The small interface a backend implements: run named SQL, hand out write transactions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager

from lirun.hints import Any, Protocol
from lirun.store.sql_script import split_statements

NOTIFY_CHANNEL = "lirun_terminal"
Row = dict[str, Any]
Params = Mapping[str, Any]


class Tx(Protocol):
    """One write transaction. Leaving the context commits; an exception rolls back."""

    def query(self, sql: str, params: Params | None = None) -> list[Row]: ...

    def execute(self, sql: str, params: Params | None = None) -> int: ...


class Connector(Protocol):
    dialect: str
    url: str  # what open_store needs to open it again (may hold a password)
    readonly: bool
    supports_notify: bool

    @property
    def display_url(self) -> str:
        """The URL safe to print (passwords masked)."""
        ...

    def read(self, sql: str, params: Params | None = None) -> list[Row]:
        """Run a read outside any write transaction; never waits for a writer's lock."""
        ...

    def write(self, *, wait_seconds: float | None = None) -> AbstractContextManager[Tx]:
        """A write transaction; ``wait_seconds`` bounds the wait for another writer's lock
        (default: the backend's busy timeout)."""
        ...

    def bind_list(self, values: Sequence[str]) -> object:
        """``values`` as one parameter of this dialect's list queries (``:ids`` in wait.sql):
        a JSON array for SQLite's ``json_each``, a list for PostgreSQL's ``= ANY``."""
        ...

    def change_token(self) -> object:
        """A value that changes when another connection commits (None if unsupported)."""
        ...

    def close(self) -> None: ...


def apply_migrations(tx: Tx, dialect: str, current: int) -> None:
    """Run every migration of ``dialect`` newer than ``current`` and record each one."""
    import time

    from lirun.store.queries import load_migrations

    for version, name, script in load_migrations(dialect):
        if version <= current:
            continue
        for statement in split_statements(script):
            tx.execute(statement)
        tx.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (:v, :n, :t)",
            {"v": version, "n": name, "t": time.time()},
        )

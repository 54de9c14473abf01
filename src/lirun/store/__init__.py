"""StateDB: the durable run store over SQLite (default) or PostgreSQL.

The public API is async (ADR); a synchronous core (``Store``) does the work and is what
the CLI uses directly. Blocking calls run in a worker thread, so a busy SQLite lock never
blocks the event loop.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterable, Mapping

from lirun.hints import Any, TypeVar
from lirun.paths import default_db_location, resolve_db_url
from lirun.store.connector import Connector
from lirun.store.core import Store

T = TypeVar("T")

__all__ = ["StateDB", "Store", "is_postgres_url", "open_connector", "open_store"]


async def _to_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run a blocking store call on a worker thread; the one hop every async method takes.

    Long-lived workers fed through a queue and answering with ``call_soon_threadsafe``
    hop faster than ``asyncio.to_thread`` (a concurrent.futures pool, a future chained
    onto an asyncio one): bench/bench_startup.py holds StateDB to half a raw sqlite3
    loop's write rate. An idle worker takes the next call, so concurrent calls still run
    side by side (a read is never queued behind a write waiting for a lock).
    """
    import asyncio  # imported on first use: it costs ~40 ms that `li wait` must not pay
    import contextvars

    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    _idle_worker().put((call, loop, future))
    return await future


_idle: list[Any] = []  # queues of workers waiting for a call


def _idle_worker() -> Any:
    try:
        return _idle.pop()
    except IndexError:
        import queue
        import threading

        inbox: Any = queue.SimpleQueue()
        threading.Thread(target=_serve, args=(inbox,), name="lirun-store", daemon=True).start()
        return inbox


def _serve(inbox: Any) -> None:
    while True:
        call, loop, future = inbox.get()
        try:
            result, error = call(), None
        except BaseException as exc:  # handed to the awaiting coroutine, raised there
            result, error = None, exc
        del call
        # RuntimeError: the loop closed while the call ran; nobody waits for the answer.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle, future, result, error)
        _idle.append(inbox)


def _settle(future: Any, result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def is_postgres_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def open_connector(
    url: str | os.PathLike[str] | None = None, *, readonly: bool = False
) -> Connector:
    """Open (and on write, create and migrate) the database that ``url`` names."""
    resolved = resolve_db_url(url)
    if is_postgres_url(resolved):
        from lirun.store.postgres import PostgresConnector

        return PostgresConnector(resolved, readonly=readonly)
    from lirun.store.dbfile import sqlite_path_from_url
    from lirun.store.sqlite import SQLiteConnector

    path = sqlite_path_from_url(resolved)
    is_default = os.path.normpath(path) == os.path.normpath(default_db_location())
    return SQLiteConnector(path, readonly=readonly, create_parent=is_default)


def open_store(url: str | os.PathLike[str] | None = None, *, readonly: bool = False) -> Store:
    return Store(open_connector(url, readonly=readonly))


class StateDB:
    """Async facade: ``async with StateDB(url) as db: await db.update_status(...)``.

    ``url`` is a path, ``sqlite:///path`` or ``postgresql://…``; None means ``--db`` /
    ``$LIRUN_DB_URL`` / ``<home>/state.db``. The database opens on first use.
    """

    def __init__(
        self, url: str | os.PathLike[str] | None = None, *, readonly: bool = False
    ) -> None:
        self.url = resolve_db_url(url)
        self.readonly = readonly
        self._store: Store | None = None

    @classmethod
    def from_store(cls, store: Store) -> StateDB:
        db = cls(store.connector.url)
        db._store = store
        return db

    @property
    def sync(self) -> Store:
        """The synchronous core, opened on first access."""
        if self._store is None:
            self._store = open_store(self.url, readonly=self.readonly)
        return self._store

    @property
    def dialect(self) -> str:
        return self.sync.dialect

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._store is None:
            await _to_thread(lambda: self.sync)
        return await _to_thread(functools.partial(fn, *args, **kwargs))

    async def open(self) -> StateDB:
        await _to_thread(lambda: self.sync)
        return self

    async def __aenter__(self) -> StateDB:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._store is not None:
            store, self._store = self._store, None
            await _to_thread(store.close)

    # -- creation -----------------------------------------------------------------

    async def create_session(self, **fields: Any) -> dict[str, Any]:
        return await self._call(lambda: self.sync.create_session(**fields))

    async def create_invocation(
        self, *, skill: str, prompt: str | None = None, id: str | None = None
    ) -> dict[str, Any]:
        return await self._call(
            lambda: self.sync.create_invocation(skill=skill, prompt=prompt, id=id)
        )

    async def create_show(self, *, topic: str, id: str | None = None) -> dict[str, Any]:
        return await self._call(lambda: self.sync.create_show(topic=topic, id=id))

    async def create_play(
        self, *, show_id: str, name: str, session_id: str | None = None, id: str | None = None
    ) -> dict[str, Any]:
        return await self._call(
            lambda: self.sync.create_play(show_id=show_id, name=name, session_id=session_id, id=id)
        )

    async def create_schedule_run(
        self,
        *,
        action_kind: str,
        schedule_id: str | None = None,
        invocation_id: str | None = None,
        status: str = "queued",
        id: str | None = None,
    ) -> dict[str, Any]:
        return await self._call(
            lambda: self.sync.create_schedule_run(
                action_kind=action_kind,
                schedule_id=schedule_id,
                invocation_id=invocation_id,
                status=status,
                id=id,
            )
        )

    async def create_team(self, *, name: str, id: str | None = None) -> dict[str, Any]:
        return await self._call(lambda: self.sync.create_team(name=name, id=id))

    # -- reads --------------------------------------------------------------------

    async def get_entity(self, entity_type: str, entity_id: str) -> dict[str, Any] | None:
        return await self._call(lambda: self.sync.get_entity(entity_type, entity_id))

    async def get_session(self, session_id: str) -> dict[str, Any] | None:
        return await self.get_entity("session", session_id)

    async def get_invocation(self, invocation_id: str) -> dict[str, Any] | None:
        return await self.get_entity("invocation", invocation_id)

    async def get_play(self, play_id: str) -> dict[str, Any] | None:
        return await self.get_entity("play", play_id)

    async def get_show(self, show_id: str) -> dict[str, Any] | None:
        return await self.get_entity("show", show_id)

    async def get_schedule_run(self, run_id: str) -> dict[str, Any] | None:
        return await self.get_entity("schedule_run", run_id)

    async def get_team(self, team_id: str) -> dict[str, Any] | None:
        return await self.get_entity("team", team_id)

    async def list_transitions(self, entity_type: str, entity_id: str) -> list[dict[str, Any]]:
        return await self._call(lambda: self.sync.list_transitions(entity_type, entity_id))

    async def list_admin_events(self, target_id: str | None = None) -> list[dict[str, Any]]:
        return await self._call(lambda: self.sync.list_admin_events(target_id))

    async def list_messages(self, session_id: str) -> list[dict[str, Any]]:
        return await self._call(lambda: self.sync.list_messages(session_id))

    # -- writes -------------------------------------------------------------------

    async def append_message(self, session_id: str, *, role: str, content: Any) -> dict[str, Any]:
        return await self._call(
            lambda: self.sync.append_message(session_id, role=role, content=content)
        )

    async def update_fields(
        self, entity_type: str, entity_id: str, fields: Mapping[str, Any], *, touch: bool = True
    ) -> None:
        await self._call(
            lambda: self.sync.update_fields(entity_type, entity_id, fields, touch=touch)
        )

    async def update_status(
        self,
        entity_type: str,
        entity_id: str,
        *,
        new_status: str,
        reason_code: str,
        reason_summary: str = "",
        evidence_refs: list[dict[str, Any]] | None = None,
        source: str = "executor",
        actor: str | None = None,
        metadata: dict[str, Any] | None = None,
        expected_statuses: Iterable[str | None] | None = None,
        expected_updated_at: float | None = None,
        extra_fields: Mapping[str, Any] | None = None,
        override: bool = False,
        override_actor: str | None = None,
        override_justification: str | None = None,
    ) -> bool:
        """ADR D5: guarded, audited, atomic. See ``Store.update_status``."""
        return await self._call(
            self.sync.update_status,
            entity_type,
            entity_id,
            new_status=new_status,
            reason_code=reason_code,
            reason_summary=reason_summary,
            evidence_refs=evidence_refs,
            source=source,
            actor=actor,
            metadata=metadata,
            expected_statuses=expected_statuses,
            expected_updated_at=expected_updated_at,
            extra_fields=extra_fields,
            override=override,
            override_actor=override_actor,
            override_justification=override_justification,
        )

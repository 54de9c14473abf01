"""StateDB: the durable run store over SQLite (default) or PostgreSQL.

The public API is async; a synchronous core (``Store``) does the work and is what the CLI
uses directly. ``StateDB`` runs every call in a worker thread (``asyncio.to_thread``), so
a busy lock or a slow server never blocks the event loop.
"""

from __future__ import annotations

import os

from lirun.async_twin import (
    async_dict_of,
    async_dict_row,
    async_dict_rows,
    async_method,
    to_thread,
)
from lirun.paths import default_db_location, is_keyword_conninfo, resolve_db_url
from lirun.store.connector import Connector
from lirun.store.core import Store
from lirun.store.invocation_records import Invocations
from lirun.store.schedule_records import Schedules
from lirun.store.session_records import Sessions
from lirun.store.show_records import Shows
from lirun.store.team_records import Teams

__all__ = [
    "StateDB",
    "Store",
    "is_postgres_url",
    "open_connector",
    "open_existing",
    "open_store",
]


def is_postgres_url(url: str) -> bool:
    """A PostgreSQL URL (``postgresql://``, ``postgres://``) or libpq keyword string."""
    return url.startswith(("postgresql://", "postgres://")) or is_keyword_conninfo(url)


def open_connector(
    url: str | os.PathLike[str] | None = None, *, readonly: bool = False, create: bool = True
) -> Connector:
    """Open (and on write, create and migrate) the database that ``url`` names.
    ``create=False``: a SQLite file that does not exist is DatabaseMissingError, not
    created (a command that may only find nothing must leave nothing behind)."""
    resolved = resolve_db_url(url)
    if is_postgres_url(resolved):
        return _open_postgres(resolved, readonly)
    from lirun.store.dbfile import file_kind, sqlite_path_from_url
    from lirun.store.sqlite import SQLiteConnector

    path = sqlite_path_from_url(resolved)
    if not create and not readonly and file_kind(path) is None:
        from lirun.errors import DatabaseMissingError

        raise DatabaseMissingError(
            f"no lirun database at {path}; run a job first, or pass --db / set "
            "LIRUN_DB_URL to the database you mean"
        )
    is_default = os.path.normpath(path) == os.path.normpath(default_db_location())
    return SQLiteConnector(path, readonly=readonly, create_parent=is_default)


def _open_postgres(url: str, readonly: bool) -> Connector:
    """The psycopg connector, imported here: only a PostgreSQL URL pays for the driver."""
    try:
        import psycopg  # noqa: F401 (said once, here, when it is missing)
    except ImportError as exc:
        from lirun.errors import MissingDriverError

        why = (str(exc).strip().splitlines() or ["not installed"])[0]
        raise MissingDriverError(
            f"a PostgreSQL URL needs the psycopg driver, which cannot be imported ({why}); "
            "run: pip install 'lirun[postgres]'"
        ) from None
    from lirun.store.postgres import PostgresConnector

    return PostgresConnector(url, readonly=readonly)


def open_store(
    url: str | os.PathLike[str] | None = None, *, readonly: bool = False, create: bool = True
) -> Store:
    return Store(open_connector(url, readonly=readonly, create=create))


def open_existing(url: str | os.PathLike[str] | None, looking_for: str) -> Store:
    """The store for a command that changes a record it must first find (``li override``,
    ``li flow resume``, ``li show resume``): with no SQLite file there is no such record,
    so NotFoundError (exit 2) names ``looking_for`` and nothing is created."""
    from lirun.errors import DatabaseMissingError, NotFoundError

    try:
        return open_store(url, create=False)
    except DatabaseMissingError as exc:
        raise NotFoundError(f"no {looking_for}: {exc}") from None


class StateDB:
    """Async facade: ``async with StateDB(url) as db: await db.update_status(...)``.

    ``url`` is a path, ``sqlite:///path`` or ``postgresql://…``; None means ``--db`` /
    ``$LIRUN_DB_URL`` / ``<home>/state.db``. The database opens on first use.

    Rows come back as plain dicts (lists of dicts for lists), as they always have. Where
    the sync ``Store`` returns a typed row (``lirun.store.rows``: ``TransitionRow``, …),
    the method here converts it with the row's ``as_dict()``, so the async contract does
    not move when the store's rows do.
    """

    def __init__(
        self, url: str | os.PathLike[str] | None = None, *, readonly: bool = False
    ) -> None:
        self.url = resolve_db_url(url)
        self.readonly = readonly
        self._store: Store | None = None

    @classmethod
    def from_store(cls, store: Store) -> StateDB:
        """Internal: a facade over an already open Store (``close`` then closes it)."""
        db = cls(store.connector.url)
        db._store = store
        return db

    @property
    def sync(self) -> Store:
        """Internal: the synchronous core, opened on first access."""
        if self._store is None:
            self._store = open_store(self.url, readonly=self.readonly)
        return self._store

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql`` (opens the database if needed)."""
        return self.sync.dialect

    async def open(self) -> StateDB:
        """Open (and on write, create and migrate) the database now.

        Raises DatabaseError (DatabaseUnavailableError, SchemaTooNewError,
        MissingDriverError…) when it cannot be opened.
        """
        await to_thread(lambda: self.sync)
        return self

    async def __aenter__(self) -> StateDB:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the database; idempotent. The next call opens it again."""
        if self._store is not None:
            store, self._store = self._store, None
            await to_thread(store.close)

    # Every method below is a Store method (or a method of one of its repositories:
    # ``create_show`` is ``store.shows.create``), run in a worker thread: the signature
    # and the docstring (what it returns and raises) are declared once, there.

    # -- creation -----------------------------------------------------------------

    create_session = async_dict_of(Sessions.create, "sessions")
    create_invocation = async_dict_of(Invocations.create, "invocations")
    create_show = async_dict_of(Shows.create, "shows")
    create_play = async_dict_of(Shows.create_play, "shows")
    create_schedule_run = async_dict_of(Schedules.create_run, "schedules")
    create_team = async_dict_of(Teams.create, "teams")
    create_team_with_members = async_dict_of(Teams.create_with_members, "teams")
    add_team_members = async_method(Teams.add_members, "teams")
    send_team_message = async_dict_of(Teams.send_message, "teams")
    read_team_inbox = async_dict_rows(Teams.read_inbox, "teams")
    team_conversation = async_dict_rows(Teams.conversation, "teams")
    list_teams = async_dict_rows(Teams.list_all, "teams")
    resolve_team = async_method(Teams.resolve, "teams")

    # -- reads --------------------------------------------------------------------

    get_entity = async_method(Store.get_entity)
    list_transitions = async_dict_rows(Store.list_transitions)
    list_admin_events = async_dict_rows(Store.list_admin_events)
    get_schedule_run = async_dict_row(Schedules.get_run, "schedules")
    get_session = async_dict_row(Sessions.get, "sessions")
    get_invocation = async_dict_row(Invocations.get, "invocations")
    list_messages = async_dict_rows(Sessions.list_messages, "sessions")

    get_play = async_dict_row(Shows.get_play, "shows")
    get_show = async_dict_row(Shows.get, "shows")

    get_team = async_dict_row(Teams.get, "teams")

    # -- writes -------------------------------------------------------------------

    append_message = async_dict_of(Sessions.append_message, "sessions")
    update_fields = async_method(Store.update_fields)
    update_status = async_method(Store.update_status)

"""``Repository``: the base of the reads and writes of one aggregate.

``Store`` makes one repository per aggregate (``store.sessions``, ``store.shows``,
``store.schedules``, …) and per read model (``store.waits``, ``store.ui``, …), all over
its one connector, so they share its connection and every transaction. What several
aggregates share (an entity's insert with its first history row, the row lock, the
guarded status write, an id's resolution) a repository asks of ``store``.
"""

from __future__ import annotations

from lirun.store.connector import Connector
from lirun.store.status_write import StatusWrites


class Repository:
    """One aggregate's statements over the store's shared connector."""

    def __init__(self, store: StatusWrites) -> None:
        self.store = store

    @property
    def connector(self) -> Connector:
        return self.store.connector

    def sql(self, name: str, **slots: str) -> str:
        """The store's named statement of this dialect (``StoreBase.sql``)."""
        return self.store.sql(name, **slots)

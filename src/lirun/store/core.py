"""``Store``: the synchronous core of StateDB. The only place that knows which query to run.

One ``Store`` is one connection. It holds what every kind of record shares (the guarded
status write, ``get_entity``, ``resolve_id``, the history, ``update_fields``) and one
repository per aggregate over that same connection: ``store.sessions``,
``store.invocations`` (flows among them), ``store.shows`` (and their plays),
``store.schedules`` (and their runs), ``store.workers``, ``store.teams``; and the read
models of one consumer each: ``store.waits`` (``li wait``, ``li status``), ``store.lists``,
``store.ui``, ``store.metrics``, ``store.retention``. The columns callers may set live in
``records``; the rules of a status write in ``transitions``.
"""

from __future__ import annotations

from collections.abc import Mapping

from lirun.errors import AmbiguousIdError, NotFoundError, ValidationError
from lirun.hints import TYPE_CHECKING, Any
from lirun.lifecycle import canonical_entity_type, policy_for
from lirun.store.connector import Connector
from lirun.store.invocation_records import Invocations
from lirun.store.list_reads import ListReads
from lirun.store.metric_reads import MetricReads
from lirun.store.records import UPDATABLE_FIELDS, closed_fields, decode_row
from lirun.store.retention_records import Retention
from lirun.store.rows import AdminEventRow, TransitionRow
from lirun.store.schedule_records import Schedules
from lirun.store.session_records import Sessions
from lirun.store.show_records import Shows
from lirun.store.status_write import StatusWrites
from lirun.store.team_records import Teams
from lirun.store.transitions import next_version
from lirun.store.ui_reads import UIReads
from lirun.store.wait_reads import WaitReads
from lirun.store.worker_records import Workers

if TYPE_CHECKING:
    from lirun.store.event_records import Events


class Store(StatusWrites):
    """Synchronous operations over one connector. StateDB wraps it for asyncio.

    Every method may raise DatabaseError (DatabaseUnavailableError when the database
    cannot be reached, DatabaseBusyError when a lock outlasts the retry bound, …); each
    docstring names the errors it raises besides those.
    """

    def __init__(self, connector: Connector) -> None:
        super().__init__(connector)
        self.sessions = Sessions(self)
        self.invocations = Invocations(self)
        self.shows = Shows(self)
        self.schedules = Schedules(self)
        self.workers = Workers(self)
        self._events: Events | None = None
        self.teams = Teams(self)
        self.waits = WaitReads(self)
        self.lists = ListReads(self)
        self.ui = UIReads(self)
        self.metrics = MetricReads(self, self.workers)
        self.retention = Retention(self)

    @property
    def events(self) -> Events:
        """``store.events``: the events schedules saw (made on first use, so the fast
        path of `li wait` and `li status` never loads it)."""
        if self._events is None:
            from lirun.store.event_records import Events

            self._events = Events(self)
        return self._events

    # -- reads ----------------------------------------------------------------

    def resolve_id(self, entity_type: str, text: str) -> str:
        """The full id ``text`` names: the exact id, else the one id that starts with it or
        ends with it (a run id's random suffix such as ``2b5dd3``).

        NotFoundError when none matches; AmbiguousIdError (exit 2) listing the candidates
        when two or more do.
        """
        et = canonical_entity_type(entity_type)
        if not text.strip():
            raise ValidationError(f"the {et} id must not be empty")
        if self.get_entity(et, text) is not None:
            return text
        ids, total = self.match_ids(et, text)
        if total == 1:
            return ids[0]
        if total > 1:
            raise AmbiguousIdError(text, tuple(ids), total)
        raise NotFoundError(
            f"no {et} with id {text!r} (nor one starting or ending with it); "
            "`li status` lists recent runs"
        )

    def list_transitions(self, entity_type: str, entity_id: str) -> list[TransitionRow]:
        """The status history of one entity, oldest first (``[]`` if none)."""
        rows = self.connector.read(
            self.sql("list_transitions"),
            {"entity_type": canonical_entity_type(entity_type), "entity_id": entity_id},
        )
        return [TransitionRow.from_row(decode_row(r)) for r in rows]

    def list_admin_events(self, target_id: str | None = None) -> list[AdminEventRow]:
        """Admin events (overrides, rejected transitions), all or for one target."""
        if target_id is None:
            rows = self.connector.read(self.sql("list_admin_events"))
        else:
            rows = self.connector.read(
                self.sql("list_admin_events_for_target"), {"target_id": target_id}
            )
        return [AdminEventRow.from_row(decode_row(r)) for r in rows]

    # -- writes other than status -------------------------------------------------

    def update_fields(
        self, entity_type: str, entity_id: str, fields: Mapping[str, Any], *, touch: bool = True
    ) -> None:
        """Set non-status columns (closed per entity type). ``touch`` bumps ``updated_at``.

        ValidationError for a column not updatable on that type; NotFoundError for no row.
        """
        et = canonical_entity_type(entity_type)
        values = closed_fields(fields, UPDATABLE_FIELDS[et], f"update_fields({et})")
        if not values:
            return
        with self.connector.write() as tx:
            current = self.lock_row(tx, policy_for(et), entity_id)
            if touch:
                values["updated_at"] = next_version(current["updated_at"])
            assignments = ", ".join(f"{k} = :{k}" for k in values)
            tx.execute(
                self.sql("update_fields", table=policy_for(et).table, assignments=assignments),
                {**values, "id": entity_id},
            )

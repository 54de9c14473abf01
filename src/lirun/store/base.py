"""``StoreBase``: the one connector every aggregate's records share, and the primitives
they all build on: the named statements of the dialect, the row lock, an entity's insert
with its first history row, a history row, an admin event.

``Store`` is this base with the guarded status write (``StatusWrites``), and holds one
repository per aggregate (``store.sessions``, ``store.shows``, …, ``repository.py``),
which call these primitives on the store they were made by.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from lirun.errors import DatabaseConnectionLostError, NotFoundError
from lirun.hints import Any
from lirun.lifecycle import EntityPolicy, policy_for, validate_status
from lirun.reasons import creation_reason, validate_reason
from lirun.store.connector import NOTIFY_CHANNEL, Connector, Tx
from lirun.store.queries import check_slots, load_queries
from lirun.store.records import decode_row, new_id, to_json
from lirun.store.transitions import HistoryEntry

# How many candidates an ambiguous id lists (the rest are counted: "and N more").
ID_CANDIDATES = 10


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def id_fragment_params(fragment: str, limit: int = ID_CANDIDATES) -> dict[str, Any]:
    """Parameters of the queries that match ids starting or ending with ``fragment``."""
    escaped = _escape_like(fragment)
    return {
        "prefix_pattern": escaped + "%",
        "suffix_pattern": "%" + escaped,
        "fragment": fragment,
        "length": len(fragment),
        "limit": int(limit),
    }


class StoreBase:
    """One connector, its dialect's named statements, and the writes every aggregate shares."""

    def __init__(self, connector: Connector) -> None:
        self.connector = connector
        self.dialect = connector.dialect
        self._queries = load_queries(connector.dialect)

    @property
    def url(self) -> str:
        """The URL that opens this database again (it may hold a password: never print it)."""
        return self.connector.url

    @property
    def display_url(self) -> str:
        """The URL safe to print (passwords masked)."""
        return self.connector.display_url

    @property
    def readonly(self) -> bool:
        return self.connector.readonly

    @property
    def is_server(self) -> bool:
        """True for a database server that processes on several machines share
        (PostgreSQL), False for the embedded SQLite file of one machine."""
        return self.dialect == "postgres"

    def sql(self, name: str, **slots: str) -> str:
        """The named statement of this dialect, its identifier slots filled (see
        ``check_slots``: only a table of ``lifecycle.POLICIES`` and column names of the
        closed field sets ever reach a slot; values are always bound parameters)."""
        text = self._queries[name]
        return text.format(**check_slots(slots)) if slots else text

    def close(self) -> None:
        """Close the connection; idempotent."""
        self.connector.close()

    def insert_in(
        self,
        tx: Tx,
        entity_type: str,
        fields: Mapping[str, Any],
        now: float,
        *,
        status: str | None = None,
        reason: str | None = None,
        source: str = "system",
        actor: str | None = None,
        metadata_json: str | None = None,
    ) -> None:
        """Insert a row of ``entity_type`` (``status``: its initial one unless given) and
        its creation history row (``reason``: the creation reason of that status unless
        given), inside ``tx`` (so a caller can create several rows in one transaction). The
        caller has validated the status and the reason."""
        policy = policy_for(entity_type)
        status = status or policy.initial
        reason = reason or creation_reason(policy.entity_type, status)
        row = {
            **fields,
            "status": status,
            "status_reason_code": reason,
            "created_at": now,
            "updated_at": now,
        }
        insert = self.sql(
            "insert_row",
            table=policy.table,
            columns=", ".join(row),
            values=", ".join(f":{k}" for k in row),
        )
        tx.execute(insert, row)
        entry = HistoryEntry(
            row["id"], None, status, reason, source=source, actor=actor, metadata_json=metadata_json
        )
        self.append_transition(tx, policy, entry, now)

    def insert(
        self, entity_type: str, fields: dict[str, Any], *, status: str | None = None
    ) -> dict[str, Any]:
        policy = policy_for(entity_type)
        status = status or policy.initial
        validate_status(policy.entity_type, status)
        reason = creation_reason(policy.entity_type, status)
        validate_reason(reason, policy.entity_type, status)  # the first history row obeys too
        now = time.time()
        with self.connector.write() as tx:
            self.insert_in(tx, policy.entity_type, fields, now, status=status)
        created = self.get_entity(policy.entity_type, fields["id"])
        if created is None:  # committed, then gone: the database failed over to a server
            raise DatabaseConnectionLostError(  # the commit had not reached (issue 33)
                f"{entity_type} {fields['id']} was written, but the database no longer holds "
                "it (it failed over to a server the commit had not reached); try again"
            )
        return created

    def get_entity(self, entity_type: str, entity_id: str) -> dict[str, Any] | None:
        """The row, JSON columns decoded, or None; ValidationError for an unknown entity type."""
        table = policy_for(entity_type).table
        rows = self.connector.read(self.sql("get_row", table=table), {"id": entity_id})
        return decode_row(rows[0]) if rows else None

    def match_ids(
        self, entity_type: str, fragment: str, *, limit: int = ID_CANDIDATES
    ) -> tuple[list[str], int]:
        """Ids of ``entity_type`` that start or end with ``fragment`` (case-sensitive,
        literally), newest first, at most ``limit``; and how many match in all."""
        table = policy_for(entity_type).table
        rows = self.connector.read(
            self.sql("match_ids", table=table), id_fragment_params(fragment, limit)
        )
        return [str(r["id"]) for r in rows], int(rows[0]["total"]) if rows else 0

    def lock_row(self, tx: Tx, policy: EntityPolicy, entity_id: str) -> dict[str, Any]:
        rows = tx.query(self.sql("lock_row", table=policy.table), {"id": entity_id})
        if not rows:
            raise NotFoundError(f"no {policy.entity_type} with id {entity_id!r}")
        return rows[0]

    def append_transition(
        self,
        tx: Tx,
        policy: EntityPolicy,
        entry: HistoryEntry,
        now: float,
        transition_id: str | None = None,
    ) -> None:
        entity_id, status = entry.entity_id, entry.status
        tx.execute(
            self.sql("insert_transition"),
            {
                "id": transition_id or new_id(),
                "entity_type": policy.entity_type,
                "entity_id": entity_id,
                "previous_status": entry.previous_status,
                "status": status,
                "reason_code": entry.reason_code,
                "reason_summary": entry.reason_summary,
                "evidence_refs": entry.evidence_json,
                "source": entry.source,
                "actor": entry.actor,
                "created_at": now,
                "metadata": entry.metadata_json,
            },
        )
        if self.connector.supports_notify:
            # Every transition, creation included (the dashboard follows them all); `li
            # wait` wakes for terminal ones only. Small: listeners re-read the row.
            import json

            payload = json.dumps(
                {
                    "type": policy.entity_type,
                    "id": entity_id,
                    "status": status,
                    "terminal": status in policy.terminal,
                }
            )
            tx.query(self.sql("notify_transition"), {"channel": NOTIFY_CHANNEL, "payload": payload})

    def admin_event(
        self,
        tx: Tx,
        event_type: str,
        policy: EntityPolicy,
        entity_id: str,
        actor: str | None,
        justification: str | None,
        payload: dict[str, Any],
    ) -> None:
        tx.execute(
            self.sql("insert_admin_event"),
            {
                "id": new_id(),
                "event_type": event_type,
                "target_type": policy.entity_type,
                "target_id": entity_id,
                "actor": actor,
                "justification": justification,
                "payload": to_json(payload, "payload"),
                "created_at": time.time(),
            },
        )

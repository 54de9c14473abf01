"""``Store``: the synchronous core of StateDB. The only place that knows which query to run.

The columns callers may set live in ``records`` (``SESSION_FIELDS``, ``UPDATABLE_FIELDS``,
re-exported here); the rules of a status write in ``transitions``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from typing import Any

from lirun.errors import (
    AmbiguousIdError,
    NotFoundError,
    TransitionRejectedError,
    ValidationError,
)
from lirun.lifecycle import EntityPolicy, canonical_entity_type, policy_for, validate_status
from lirun.reasons import creation_reason, validate_reason
from lirun.store.connector import NOTIFY_CHANNEL, Connector, Tx
from lirun.store.queries import load_queries
from lirun.store.records import (
    SESSION_FIELDS,
    UPDATABLE_FIELDS,
    closed_fields,
    column_values,
    decode_row,
    entity_id_or_new,
    new_id,
    require_text,
    to_json,
)
from lirun.store.retry import retry_write
from lirun.store.transitions import (
    StatusWrite,
    decide,
    next_version,
    takes_validated,
    validate_status_write,
)

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


def liveness_defaults(given: Mapping[str, Any]) -> dict[str, Any]:
    """Owner identity (and a lease with a heartbeat) for a running row that lacks them."""
    from lirun.liveness import DEFAULT_LEASE_SECONDS, current_owner

    defaults: dict[str, Any] = {}
    if "owner_pid" not in given:
        defaults.update(current_owner())
    if given.get("heartbeat_at") is not None and given.get("lease_seconds") is None:
        defaults["lease_seconds"] = DEFAULT_LEASE_SECONDS
    return defaults


class _GuardLost(Exception):
    """The compare-and-set UPDATE matched no row: roll the transaction back, report False."""


class Store:
    """Synchronous operations over one connector. StateDB wraps it for asyncio.

    Every method may raise DatabaseError (DatabaseUnavailableError when the database
    cannot be reached, DatabaseBusyError when a lock outlasts the retry bound, …); each
    docstring names the errors it raises besides those.
    """

    def __init__(self, connector: Connector) -> None:
        self.connector = connector
        self.dialect = connector.dialect
        self._queries = load_queries(connector.dialect)

    def sql(self, name: str, **slots: str) -> str:
        text = self._queries[name]
        return text.format(**slots) if slots else text

    def close(self) -> None:
        """Close the connection; idempotent."""
        self.connector.close()

    # -- creation -------------------------------------------------------------

    def _insert(
        self, entity_type: str, fields: dict[str, Any], *, status: str | None = None
    ) -> dict[str, Any]:
        policy = policy_for(entity_type)
        status = status or policy.initial
        validate_status(policy.entity_type, status)
        reason = creation_reason(policy.entity_type, status)
        validate_reason(reason, policy.entity_type, status)  # the first history row obeys too
        now = time.time()
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
        with self.connector.write() as tx:
            tx.execute(insert, row)
            self._append_transition(
                tx, policy, row["id"], None, status, reason, "", None, "system", None, None, now
            )
        created = self.get_entity(policy.entity_type, row["id"])
        assert created is not None
        return created

    def create_session(
        self,
        *,
        id: str | None = None,
        status: str = "running",
        run_id: str | None = None,
        branch_id: str | None = None,
        invocation_id: str | None = None,
        artifacts_path: str | os.PathLike[str] | None = None,
        artifact_contract: Mapping[str, Any] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        **more: Any,
    ) -> dict[str, Any]:
        """Create an execution row; extra columns (run_dir, owner_pid, …) come as keywords.

        A running row records this process as its owner unless ``owner_pid`` is given
        (``owner_pid=None`` records none): if the creator dies, a reaper can tell.
        """
        fields = closed_fields(
            {
                "run_id": run_id,
                "branch_id": branch_id,
                "invocation_id": invocation_id,
                "artifacts_path": artifacts_path,
                "artifact_contract_json": artifact_contract,
                "cwd": cwd,
                **more,
            },
            SESSION_FIELDS,
            "create_session",
        )
        fields.setdefault("started_at", time.time())
        fields["id"] = entity_id_or_new(id or run_id)
        if status == "running":
            fields.update(liveness_defaults(more))
        return self._insert("session", fields, status=status)

    def create_invocation(
        self, *, skill: str, prompt: str | None = None, id: str | None = None
    ) -> dict[str, Any]:
        """Create an invocation row (``running``); ValidationError for an empty skill or bad id."""
        require_text(skill=skill)
        fields = column_values({"skill": skill, "prompt": prompt})
        return self._insert("invocation", {"id": entity_id_or_new(id), **fields})

    def create_show(self, *, topic: str, id: str | None = None) -> dict[str, Any]:
        """Create a show row; ValidationError for an empty topic or bad id."""
        require_text(topic=topic)
        return self._insert("show", {"id": entity_id_or_new(id), **column_values({"topic": topic})})

    def create_play(
        self, *, show_id: str, name: str, session_id: str | None = None, id: str | None = None
    ) -> dict[str, Any]:
        """Create a play row (``pending``); ValidationError for an empty show_id/name or bad id."""
        require_text(show_id=show_id, name=name)
        fields = column_values({"show_id": show_id, "name": name, "session_id": session_id})
        return self._insert("play", {"id": entity_id_or_new(id), **fields})

    def create_schedule_run(
        self,
        *,
        action_kind: str,
        schedule_id: str | None = None,
        invocation_id: str | None = None,
        status: str = "queued",
        id: str | None = None,
    ) -> dict[str, Any]:
        """Create a schedule run row (``queued`` unless ``status``); ValidationError for
        an empty action_kind, a bad id or a status the lifecycle does not know.
        """
        require_text(action_kind=action_kind)
        fields = column_values(
            {"action_kind": action_kind, "schedule_id": schedule_id, "invocation_id": invocation_id}
        )
        return self._insert("schedule_run", {"id": entity_id_or_new(id), **fields}, status=status)

    def create_team(self, *, name: str, id: str | None = None) -> dict[str, Any]:
        """Create a team row; ValidationError for an empty name or bad id."""
        require_text(name=name)
        return self._insert("team", {"id": entity_id_or_new(id), **column_values({"name": name})})

    # -- reads ----------------------------------------------------------------

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

    def list_transitions(self, entity_type: str, entity_id: str) -> list[dict[str, Any]]:
        """The status history of one entity, oldest first (``[]`` if none)."""
        rows = self.connector.read(
            self.sql("list_transitions"),
            {"entity_type": canonical_entity_type(entity_type), "entity_id": entity_id},
        )
        return [decode_row(r) for r in rows]  # type: ignore[misc]

    def list_admin_events(self, target_id: str | None = None) -> list[dict[str, Any]]:
        """Admin events (overrides, rejected transitions), all or for one target."""
        if target_id is None:
            rows = self.connector.read(self.sql("list_admin_events"))
        else:
            rows = self.connector.read(
                self.sql("list_admin_events_for_target"), {"target_id": target_id}
            )
        return [decode_row(r) for r in rows]  # type: ignore[misc]

    def list_messages(self, session_id: str) -> list[dict[str, Any]]:
        """The session's messages in order (``seq``)."""
        rows = self.connector.read(self.sql("list_messages"), {"session_id": session_id})
        return [decode_row(r) for r in rows]  # type: ignore[misc]

    def has_assistant_text(self, session_id: str) -> bool:
        """Whether the session has at least one non-empty assistant message."""
        return bool(self.connector.read(self.sql("has_assistant_text"), {"session_id": session_id}))

    def list_sessions(
        self, *, status: str | None = None, since: float | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        """Recent sessions, newest first, optionally by status and start time."""
        rows = self.connector.read(
            self.sql("list_sessions"), {"status": status, "since": since, "limit": int(limit)}
        )
        return [decode_row(r) for r in rows]  # type: ignore[misc]

    def list_running_sessions(self) -> list[dict[str, Any]]:
        """Every session still ``running`` (what a reaper judges)."""
        rows = self.connector.read(self.sql("list_running_sessions"))
        return [decode_row(r) for r in rows]  # type: ignore[misc]

    def find_session_by_engine_uid(
        self, uid: str, *, exclude_id: str = ""
    ) -> dict[str, Any] | None:
        """The newest other session with this engine session uid, or None."""
        rows = self.connector.read(
            self.sql("find_session_by_engine_uid"), {"uid": uid, "exclude_id": exclude_id}
        )
        return decode_row(rows[0]) if rows else None

    def get_branch(self, branch_id: str) -> dict[str, Any] | None:
        """The branch row (its latest session and engine uid), or None."""
        rows = self.connector.read(self.sql("get_branch"), {"id": branch_id})
        return decode_row(rows[0]) if rows else None

    # -- writes other than status -------------------------------------------------

    def upsert_branch(
        self,
        branch_id: str,
        *,
        session_id: str,
        provider: str | None = None,
        engine_session_uid: str | None = None,
    ) -> dict[str, Any]:
        """Create the branch or move it to ``session_id``; returns the branch row."""
        params = {
            "id": branch_id,
            "session_id": session_id,
            "provider": provider,
            "engine_session_uid": engine_session_uid,
            "now": time.time(),
        }
        with self.connector.write() as tx:
            tx.execute(self.sql("upsert_branch"), params)
        branch = self.get_branch(branch_id)
        assert branch is not None
        return branch

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
            current = self._lock_row(tx, policy_for(et), entity_id)
            if touch:
                values["updated_at"] = next_version(current["updated_at"])
            assignments = ", ".join(f"{k} = :{k}" for k in values)
            tx.execute(
                self.sql("update_fields", table=policy_for(et).table, assignments=assignments),
                {**values, "id": entity_id},
            )

    def heartbeat(self, session_id: str) -> None:
        """The owner is alive now; a row without a lease gets the default one.

        NotFoundError when the session does not exist.
        """
        from lirun.liveness import DEFAULT_LEASE_SECONDS

        params = {"id": session_id, "now": time.time(), "lease": DEFAULT_LEASE_SECONDS}
        with self.connector.write() as tx:
            if tx.execute(self.sql("heartbeat"), params) != 1:
                raise NotFoundError(f"no session with id {session_id!r}")

    def append_message(self, session_id: str, *, role: str, content: Any) -> dict[str, Any]:
        """Append a message (``content`` JSON-encoded unless a string); returns it with
        its ``seq``. ValidationError for an empty role, NotFoundError for no session.
        """
        if not isinstance(role, str) or not role:
            raise ValidationError("role must be a non-empty string such as 'assistant'")
        text = content if isinstance(content, str) else to_json(content, "content")
        msg: dict[str, Any] = {
            "id": new_id(),
            "session_id": session_id,
            "role": role,
            "content": text or "",
        }
        with self.connector.write() as tx:
            self._lock_row(tx, policy_for("session"), session_id)
            msg["seq"] = tx.query(self.sql("next_message_seq"), {"session_id": session_id})[0][
                "seq"
            ]
            msg["created_at"] = time.time()
            tx.execute(self.sql("insert_message"), msg)
            tx.execute(
                self.sql("set_message_bounds"), {"msg_id": msg["id"], "session_id": session_id}
            )
        return msg

    # -- status -------------------------------------------------------------------

    def _lock_row(self, tx: Tx, policy: EntityPolicy, entity_id: str) -> dict[str, Any]:
        rows = tx.query(self.sql("lock_row", table=policy.table), {"id": entity_id})
        if not rows:
            raise NotFoundError(f"no {policy.entity_type} with id {entity_id!r}")
        return rows[0]

    def _append_transition(
        self,
        tx: Tx,
        policy: EntityPolicy,
        entity_id: str,
        previous: str | None,
        status: str,
        reason_code: str,
        reason_summary: str,
        evidence_json: str | None,
        source: str,
        actor: str | None,
        metadata_json: str | None,
        now: float,
        transition_id: str | None = None,
    ) -> None:
        tx.execute(
            self.sql("insert_transition"),
            {
                "id": transition_id or new_id(),
                "entity_type": policy.entity_type,
                "entity_id": entity_id,
                "previous_status": previous,
                "status": status,
                "reason_code": reason_code,
                "reason_summary": reason_summary,
                "evidence_refs": evidence_json,
                "source": source,
                "actor": actor,
                "created_at": now,
                "metadata": metadata_json,
            },
        )

    def _admin_event(
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

    @takes_validated(validate_status_write)
    def update_status(self, write: StatusWrite) -> bool:
        """The one guarded status write (ADR D5). False when a guard did not match.

        Its parameters (``entity_type, entity_id, *, new_status, reason_code, …``) are
        declared once, on ``transitions.validate_status_write``, which checks them before
        any I/O; ``help`` and mypy show them here.

        Status, reason, history row (and admin event for an override) commit together.
        Leaving a terminal status without ``override`` commits a
        ``status_transition_rejected`` audit row, then raises TransitionRejectedError.
        ValidationError for an unknown status, a reason code not allowed for it, a bad
        source, evidence or metadata, or an override without actor and justification;
        NotFoundError when the row does not exist.
        """
        entity_id = write.entity_id
        # Made before the first try: a retry after an ambiguous COMMIT finds it and stops.
        transition_id = new_id()

        def attempt(wait_seconds: float, tries: int) -> tuple[bool | None, str | None]:
            return self._status_tx(
                write, entity_id, transition_id, wait_seconds=wait_seconds, retried=tries > 0
            )

        applied, previous = retry_write(attempt, where=self.connector.display_url)
        if applied is not None:
            return applied
        # Raised only after the audit row has committed.
        raise TransitionRejectedError(
            write.policy.entity_type, entity_id, previous, write.new_status
        )

    def _status_tx(
        self,
        write: StatusWrite,
        entity_id: str,
        transition_id: str,
        *,
        wait_seconds: float,
        retried: bool,
    ) -> tuple[bool | None, str | None]:
        """One try of a status write: (applied, previous); applied None means rejected."""
        try:
            with self.connector.write(wait_seconds=wait_seconds) as tx:
                if retried and tx.query(self.sql("find_transition"), {"id": transition_id}):
                    return True, None  # an earlier try committed after all
                current = self._lock_row(tx, write.policy, entity_id)
                previous = current["status"]
                verdict = decide(write, previous, current["updated_at"])
                if verdict == "skip":
                    return False, previous
                if verdict == "apply":
                    self._apply(
                        tx, write, entity_id, previous, current["updated_at"], transition_id
                    )
                    return True, previous
                self._reject(tx, write, entity_id, previous)
                return None, previous
        except _GuardLost:
            return False, None

    def _reject(self, tx: Tx, write: StatusWrite, entity_id: str, previous: str | None) -> None:
        self._admin_event(
            tx,
            "status_transition_rejected",
            write.policy,
            entity_id,
            write.actor,
            None,
            {
                "previous_status": previous,
                "attempted_status": write.new_status,
                "reason_code": write.reason_code,
                "source": write.source,
            },
        )

    def _apply(
        self,
        tx: Tx,
        write: StatusWrite,
        entity_id: str,
        previous: str | None,
        version: float,
        transition_id: str,
    ) -> None:
        """Override audit, row, history and notification: all in the caller's transaction."""
        policy = write.policy
        if write.override:
            self._admin_event(
                tx,
                "status_transition_override",
                policy,
                entity_id,
                write.override_actor,
                write.override_justification,
                {
                    "previous_status": previous,
                    "new_status": write.new_status,
                    "reason_code": write.reason_code,
                },
            )
        now = next_version(version)
        params = {
            "id": entity_id,
            "new_status": write.new_status,
            "reason_code": write.reason_code,
            "reason_summary": write.reason_summary,
            "evidence_refs": write.evidence_json,
            "now": now,
            "previous_status": previous,
            **{f"x_{k}": v for k, v in write.extra.items()},
        }
        extra_set = "".join(f", {k} = :x_{k}" for k in write.extra)
        # The UPDATE re-asserts the status read under the lock (NULL-safe) so that the
        # compare-and-set holds in storage, not only in Python.
        sql = self.sql("cas_update_status", table=policy.table, extra_set=extra_set)
        if tx.execute(sql, params) != 1:
            raise _GuardLost  # rolls back the override audit row too
        self._append_transition(
            tx,
            policy,
            entity_id,
            previous,
            write.new_status,
            write.reason_code,
            write.reason_summary,
            write.evidence_json,
            write.source,
            write.actor,
            write.metadata_json,
            now,
            transition_id,
        )
        if write.new_status in policy.terminal and self.connector.supports_notify:
            payload = json.dumps({"type": policy.entity_type, "id": entity_id})
            tx.query(self.sql("notify_terminal"), {"channel": NOTIFY_CHANNEL, "payload": payload})

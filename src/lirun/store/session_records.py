"""Executions (the ``sessions`` table) and what hangs off one: its messages and the
branch a resumed conversation follows. ``store.sessions``.

A session is created ``running`` with this process as its owner, so a reaper can tell
when the creator died; its status moves only through the guarded ``update_status``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping

from lirun.errors import NotFoundError, ValidationError
from lirun.hints import Any
from lirun.lifecycle import policy_for
from lirun.store.bulk_import import import_sessions
from lirun.store.records import (
    SESSION_FIELDS,
    check_evidence,
    closed_fields,
    decode_row,
    entity_id_or_new,
    new_id,
    to_json,
)
from lirun.store.repository import Repository
from lirun.store.rows import BranchRow, MessageRow, SessionRow
from lirun.store.transitions import next_version


def liveness_defaults(given: Mapping[str, Any]) -> dict[str, Any]:
    """Owner identity (and a lease with a heartbeat) for a running row that lacks them."""
    from lirun.liveness import DEFAULT_LEASE_SECONDS, current_owner

    defaults: dict[str, Any] = {}
    if "owner_pid" not in given:
        defaults.update(current_owner())
    if given.get("heartbeat_at") is not None and given.get("lease_seconds") is None:
        defaults["lease_seconds"] = DEFAULT_LEASE_SECONDS
    return defaults


class Sessions(Repository):
    """``store.sessions``: executions, their messages and their branches."""

    def create(
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
    ) -> SessionRow:
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
            "sessions.create",
        )
        fields.setdefault("started_at", time.time())
        fields["id"] = entity_id_or_new(id or run_id)
        if status == "running":
            fields.update(liveness_defaults(more))
        return SessionRow.from_row(self.store.insert("session", fields, status=status))

    def get(self, session_id: str) -> SessionRow | None:
        """The execution with this id, or None."""
        rows = self.connector.read(self.sql("get_row", table="sessions"), {"id": session_id})
        return SessionRow.from_row(decode_row(rows[0])) if rows else None

    def list_recent(
        self, *, status: str | None = None, since: float | None = None, limit: int = 50
    ) -> list[SessionRow]:
        """Recent sessions, newest first, optionally by status and start time."""
        rows = self.connector.read(
            self.sql("list_sessions"), {"status": status, "since": since, "limit": int(limit)}
        )
        return [SessionRow.from_row(decode_row(r)) for r in rows]

    def list_running(self) -> list[SessionRow]:
        """Every session still ``running`` (what a reaper judges)."""
        rows = self.connector.read(self.sql("list_running_sessions"))
        return [SessionRow.from_row(decode_row(r)) for r in rows]

    def find_by_engine_uid(self, uid: str, *, exclude_id: str = "") -> SessionRow | None:
        """The newest other session with this engine session uid, or None."""
        rows = self.connector.read(
            self.sql("find_session_by_engine_uid"), {"uid": uid, "exclude_id": exclude_id}
        )
        return SessionRow.from_row(decode_row(rows[0])) if rows else None

    def heartbeat(self, session_id: str) -> None:
        """The owner is alive now; a row without a lease gets the default one.

        NotFoundError when the session does not exist.
        """
        from lirun.liveness import DEFAULT_LEASE_SECONDS

        params = {"id": session_id, "now": time.time(), "lease": DEFAULT_LEASE_SECONDS}
        with self.connector.write() as tx:
            if tx.execute(self.sql("heartbeat"), params) != 1:
                raise NotFoundError(f"no session with id {session_id!r}")

    def append_evidence(
        self, session_id: str, entries: list[dict[str, Any]], *, source: str = "teardown"
    ) -> None:
        """Add evidence to an execution's record after its outcome was written: what
        happened to processes it left behind that were still being ended then (design.md
        D5: the status, reason and history row stay as written). The addition is audited
        as an ``evidence_appended`` admin event naming ``source`` and what was added.

        ValidationError for entries that are not a list of dictionaries, NotFoundError
        when the session does not exist.
        """
        added = check_evidence(entries) or []
        if not added:
            return
        policy = policy_for("session")
        with self.connector.write() as tx:
            current = self.store.lock_row(tx, policy, session_id)
            rows = tx.query(self.sql("get_row", table=policy.table), {"id": session_id})
            held = decode_row(rows[0]).get("status_evidence_refs") or []
            params = {
                "id": session_id,
                "evidence_refs": to_json([*held, *added], "evidence_refs"),
                "now": next_version(current["updated_at"]),
            }
            tx.execute(self.sql("append_session_evidence"), params)
            payload = {"status": current["status"], "source": source, "evidence": added}
            self.store.admin_event(tx, "evidence_appended", policy, session_id, None, None, payload)

    def append_message(self, session_id: str, *, role: str, content: Any) -> MessageRow:
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
            self.store.lock_row(tx, policy_for("session"), session_id)
            msg["seq"] = tx.query(self.sql("next_message_seq"), {"session_id": session_id})[0][
                "seq"
            ]
            msg["created_at"] = time.time()
            tx.execute(self.sql("insert_message"), msg)
            tx.execute(
                self.sql("set_message_bounds"), {"msg_id": msg["id"], "session_id": session_id}
            )
        return MessageRow.from_row(msg)

    def list_messages(self, session_id: str) -> list[MessageRow]:
        """The session's messages in order (``seq``)."""
        rows = self.connector.read(self.sql("list_messages"), {"session_id": session_id})
        return [MessageRow.from_row(r) for r in rows]

    def has_assistant_text(self, session_id: str) -> bool:
        """Whether the session has at least one non-empty assistant message."""
        return bool(self.connector.read(self.sql("has_assistant_text"), {"session_id": session_id}))

    def get_branch(self, branch_id: str) -> BranchRow | None:
        """The branch row (its latest session and engine uid), or None."""
        rows = self.connector.read(self.sql("get_branch"), {"id": branch_id})
        return BranchRow.from_row(rows[0]) if rows else None

    def upsert_branch(
        self,
        branch_id: str,
        *,
        session_id: str,
        provider: str | None = None,
        engine_session_uid: str | None = None,
    ) -> BranchRow:
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

    def import_many(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Many finished executions at once (``bulk_import.import_sessions``)."""
        return import_sessions(self, rows)

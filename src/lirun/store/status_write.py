"""The guarded status write (design.md D5), ``store.update_status``: lock the row, decide, then
apply the status, its history row and the terminal columns in one transaction, or refuse
and audit. The rules themselves are pure functions in ``transitions``."""

from __future__ import annotations

from lirun.errors import TransitionRejectedError
from lirun.store.base import StoreBase
from lirun.store.connector import Tx
from lirun.store.records import new_id
from lirun.store.retry import retry_write
from lirun.store.transitions import (
    HistoryEntry,
    StatusWrite,
    decide,
    next_version,
    takes_validated,
    terminal_columns,
    validate_status_write,
)


class _GuardLost(Exception):
    """The compare-and-set UPDATE matched no row: roll the transaction back, report False."""


class StatusWrites(StoreBase):
    """``update_status`` and its transaction."""

    @takes_validated(validate_status_write)
    def update_status(self, write: StatusWrite) -> bool:
        """The one guarded status write (design.md D5). False when a guard did not match.

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
        # Made before the first try: a retry after an ambiguous COMMIT finds it and stops.
        transition_id = new_id()

        def attempt(wait_seconds: float, tries: int) -> tuple[bool | None, str | None]:
            return self._status_tx(
                write, transition_id, wait_seconds=wait_seconds, retried=tries > 0
            )

        applied, previous = retry_write(attempt, where=self.connector.display_url)
        if applied is not None:
            return applied
        # Raised only after the audit row has committed.
        raise TransitionRejectedError(
            write.policy.entity_type, write.entity_id, previous, write.new_status
        )

    def _status_tx(
        self,
        write: StatusWrite,
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
                current = self.lock_row(tx, write.policy, write.entity_id)
                previous = current["status"]
                verdict = decide(write, previous, current["updated_at"])
                if verdict == "skip":
                    return False, previous
                if verdict == "apply":
                    self._apply(tx, write, previous, current["updated_at"], transition_id)
                    return True, previous
                self._reject(tx, write, previous)
                return None, previous
        except _GuardLost:
            return False, None

    def _reject(self, tx: Tx, write: StatusWrite, previous: str | None) -> None:
        self.admin_event(
            tx,
            "status_transition_rejected",
            write.policy,
            write.entity_id,
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
        previous: str | None,
        version: float,
        transition_id: str,
    ) -> None:
        """Override audit, row (with ``terminal_columns``), history and its notification: all
        in the caller's transaction."""
        policy = write.policy
        if write.override:
            self.admin_event(
                tx,
                "status_transition_override",
                policy,
                write.entity_id,
                write.override_actor,
                write.override_justification,
                {
                    "previous_status": previous,
                    "new_status": write.new_status,
                    "reason_code": write.reason_code,
                },
            )
        now = next_version(version)
        extra = {**write.extra, **terminal_columns(write, previous, now)}
        params = {
            "id": write.entity_id,
            "new_status": write.new_status,
            "reason_code": write.reason_code,
            "reason_summary": write.reason_summary,
            "evidence_refs": write.evidence_json,
            "now": now,
            "previous_status": previous,
            **{f"x_{k}": v for k, v in extra.items()},
        }
        extra_set = "".join(f", {k} = :x_{k}" for k in extra)
        # The UPDATE re-asserts the status read under the lock (NULL-safe) so that the
        # compare-and-set holds in storage, not only in Python.
        sql = self.sql("cas_update_status", table=policy.table, extra_set=extra_set)
        if tx.execute(sql, params) != 1:
            raise _GuardLost  # rolls back the override audit row too
        self.append_transition(
            tx, policy, HistoryEntry.of_write(write, previous), now, transition_id
        )

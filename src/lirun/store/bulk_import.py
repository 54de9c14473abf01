"""Many finished executions at once (``sql/<dialect>/bulk.sql``), for
``store.sessions.import_many``: what a benchmark or an import from another store needs,
one statement per table per batch instead of a transaction per row. Each row is checked
as ``store.sessions.create`` would check it and gets its creation transition, so the
history rule holds for imported rows too."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from lirun.hints import Any
from lirun.store.repository import Repository

IMPORT_FIELDS = (
    "id",
    "status",
    "reason_code",
    "reason_summary",
    "provider",
    "model",
    "prompt",
    "created_at",
    "ended_at",
    "duration_s",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "run_dir",
    "artifacts_path",
)


def _checked(row: Mapping[str, Any]) -> dict[str, Any]:
    from lirun.errors import ValidationError
    from lirun.lifecycle import EXIT_CODE_BY_STATUS, policy_for, validate_status
    from lirun.reasons import validate_reason
    from lirun.store.records import entity_id_or_new, new_id

    unknown = set(row) - set(IMPORT_FIELDS)
    if unknown:
        raise ValidationError(f"sessions.import_many: unknown field(s) {sorted(unknown)}")
    out = {name: row.get(name) for name in IMPORT_FIELDS}
    out["id"] = entity_id_or_new(out["id"])
    status, reason = str(out["status"]), str(out["reason_code"])
    validate_status("session", status)
    validate_reason(reason, "session", status)
    if not isinstance(out["created_at"], int | float):
        raise ValidationError("sessions.import_many: created_at must be epoch seconds")
    terminal = status in policy_for("session").terminal
    out["exit_code"] = EXIT_CODE_BY_STATUS.get(status) if terminal else None
    out["transition_id"] = new_id()
    return out


def import_sessions(repo: Repository, rows: Iterable[Mapping[str, Any]]) -> int:
    """Insert executions (fields: ``IMPORT_FIELDS``) and their creation transitions in
    one transaction; returns how many. ValidationError for a bad row (nothing is
    written); ConflictError for an id that exists."""
    batch = [_checked(row) for row in rows]
    if not batch:
        return 0
    import json

    payload = json.dumps(batch)
    with repo.connector.write() as tx:
        base = tx.query(repo.sql("ui_last_seq"))[0]["seq"]
        tx.execute(repo.sql("bulk_insert_sessions"), {"rows": payload})
        tx.execute(repo.sql("bulk_insert_session_transitions"), {"rows": payload, "base": base})
    return len(batch)

"""Encoding of row values: JSON columns, evidence lists, closed field sets."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from lirun.errors import ValidationError
from lirun.hints import Any
from lirun.lifecycle import PLAY_FIELDS
from lirun.store.connector import Row
from lirun.store.rows import SessionRow

JSON_COLUMNS = frozenset(
    {
        "artifact_contract_json",
        "artifact_verification_json",
        "status_evidence_refs",
        "evidence_refs",
        "metadata",
        "metadata_json",
        "payload",
        "command_json",
        "action_json",
        "provider_options_json",
        "flow_json",
        "spec_json",
        "final_gate_json",
        "depends_on_json",
        "gate_json",
        "trigger_json",
        "policies_json",
    }
)


SCALARS = (str, int, float, bool)


def new_id() -> str:
    """A random (version 4) UUID as text, as ``str(uuid.uuid4())`` gives it, without
    importing ``uuid`` (which imports ``platform``) on every run."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def to_json(value: Any, what: str) -> str | None:
    """Serialize a JSON column value; a value that is not JSON is a ValidationError."""
    if value is None:
        return None
    import json  # first use only: json imports re, which `li wait` must not pay for

    try:
        return json.dumps(value, separators=(",", ":"), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{what} must be JSON-serializable: {exc}") from exc


def check_evidence(evidence_refs: Any) -> list[dict[str, Any]] | None:
    """Evidence is a list of dictionaries (design.md D2); anything else is a ValidationError."""
    if evidence_refs is None:
        return None
    if not isinstance(evidence_refs, list) or not all(
        isinstance(item, dict) for item in evidence_refs
    ):
        raise ValidationError("evidence_refs must be a list of dictionaries, e.g. [{'kind': ...}]")
    return evidence_refs


def check_metadata(metadata: Any) -> Mapping[str, Any] | None:
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ValidationError("metadata must be a dictionary")
    return metadata


def closed_fields(
    fields: Mapping[str, Any] | None, allowed: Iterable[str], what: str
) -> dict[str, Any]:
    """Keep ``fields`` only if every key is allowed; JSON columns are encoded."""
    if not fields:
        return {}
    if not isinstance(fields, Mapping):
        raise ValidationError(f"{what} must be a dictionary")
    allowed_set = frozenset(allowed)
    unknown = sorted(set(fields) - allowed_set)
    if unknown:
        raise ValidationError(
            f"{what} does not accept {', '.join(unknown)}; allowed: "
            f"{', '.join(sorted(allowed_set)) or 'nothing'}"
        )
    return {key: column_value(key, value) for key, value in fields.items()}


def column_values(fields: Mapping[str, Any]) -> dict[str, Any]:
    return {key: column_value(key, value) for key, value in fields.items()}


def column_value(key: str, value: Any) -> Any:
    """A value ready to bind: JSON columns encoded, paths as text, other types refused."""
    if key in JSON_COLUMNS:
        return to_json(value, key)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if value is None or isinstance(value, SCALARS):
        return value
    raise ValidationError(
        f"{key} must be a string, number or None, not {type(value).__name__} ({value!r:.60})"
    )


def decode_row(row: Row) -> dict[str, Any]:
    """A row as a dict with JSON columns parsed (``seq`` bookkeeping removed)."""
    out = {}
    for key, value in row.items():
        if key == "seq" and ("entity_type" in row or "event_type" in row):
            continue
        if key in JSON_COLUMNS and isinstance(value, str):
            import json

            value = json.loads(value)
        out[key] = value
    return out


# What an execution did (migration 0003): written when its legs end, shown by li status.
RECORD_FIELDS = frozenset(
    {
        "prompt",
        "provider_options_json",
        "provider_version",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "cost_usd",
        "num_turns",
        "duration_s",
        "reply_text",
        "child_exit_code",
        "provider_error",
        "provider_retries",
    }
)
# Columns a caller may set when creating a session or later with update_fields.
SESSION_FIELDS = RECORD_FIELDS | frozenset(
    {
        "run_id",
        "progression_id",
        "started_at",
        "ended_at",
        "invocation_id",
        "branch_id",
        "resumed_from",
        "run_dir",
        "artifacts_path",
        "artifact_contract_json",
        "artifact_verification_json",
        "exit_code",
        "engine_session_uid",
        "provider",
        "model",
        "command_json",
        "cwd",
        "owner_pid",
        "owner_start_time",
        "owner_host",
        "owner_boot_id",
        "child_pid",
        "child_start_time",
        "heartbeat_at",
        "lease_seconds",
        "metadata_json",
        # a flow's leg (migration 0005): its instance id, and a retry's link (design.md §4.10)
        "flow_leg",
        "attempt",
        "retry_of",
    }
)
UPDATABLE_FIELDS: dict[str, frozenset[str]] = {
    "session": SESSION_FIELDS - {"run_id"},
    "invocation": frozenset({"ended_at", "exit_code", "prompt"}),
    "schedule_run": frozenset({"started_at", "ended_at", "attempt", "exit_code", "invocation_id"}),
    "show": frozenset(
        {
            "ended_at",
            "integration_head",
            "final_gate_json",
            "owner_pid",
            "owner_start_time",
            "owner_host",
            "owner_boot_id",
            "heartbeat_at",
            "lease_seconds",
        }
    ),
    "play": PLAY_FIELDS,
    "team": frozenset({"archived_at"}),
    "schedule": frozenset({"next_due_at"}),
}


def entity_id_or_new(value: str | None) -> str:
    """A caller-chosen id (a non-empty string) or a new one."""
    if value is None or value == "":
        return new_id()
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"id must be a non-empty string, not {value!r}")
    return value


def require_text(**values: Any) -> None:
    """Text columns a creator needs (NOT NULL in the schema) must be non-empty strings."""
    for name, value in values.items():
        if not isinstance(value, str) or not value.strip():
            raise ValidationError(f"{name} must be a non-empty string, not {value!r}")


def is_command(row: Mapping[str, Any]) -> bool:
    """An execution row of a command (``li run``, a command leg or play, a gate, a
    schedule's ``run`` action), not of an agent."""
    return row.get("provider") == "command"


def present_run(row: SessionRow) -> dict[str, Any]:
    """A run's row as ``li status --json`` and the dashboard show it.

    ``reply`` is the tail of what the child printed (the ``reply_text`` column): an
    agent's reply, or a command's stdout; ``artifact_dir`` is the ``artifacts_path``
    column. Their old keys stay one shape version, deprecated (docs/json.md): the column
    ``artifacts_path``, and ``reply_text`` for an agent, ``output_text`` for a command."""
    shown = row.as_dict()
    shown["artifact_dir"] = shown.get("artifacts_path")
    if "reply_text" in shown:
        shown["reply"] = shown["reply_text"]
        if is_command(shown):
            shown["output_text"] = shown.pop("reply_text")
    return shown

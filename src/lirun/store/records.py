"""Encoding of row values: JSON columns, evidence lists, closed field sets."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from lirun.errors import ValidationError
from lirun.store.connector import Row

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
    }
)


def new_id() -> str:
    return str(uuid.uuid4())


def to_json(value: Any, what: str) -> str | None:
    """Serialize a JSON column value; a value that is not JSON is a ValidationError."""
    if value is None:
        return None
    try:
        return json.dumps(value, separators=(",", ":"), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{what} must be JSON-serializable: {exc}") from exc


def check_evidence(evidence_refs: Any) -> list[dict[str, Any]] | None:
    """Evidence is a list of dictionaries (ADR D2); anything else is a ValidationError."""
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
    return {
        key: to_json(value, key) if key in JSON_COLUMNS else value for key, value in fields.items()
    }


def decode_row(row: Row | None) -> dict[str, Any] | None:
    """A row as a dict with JSON columns parsed (``seq`` bookkeeping removed)."""
    if row is None:
        return None
    out = {}
    for key, value in row.items():
        if key == "seq" and ("entity_type" in row or "event_type" in row):
            continue
        if key in JSON_COLUMNS and isinstance(value, str):
            value = json.loads(value)
        out[key] = value
    return out

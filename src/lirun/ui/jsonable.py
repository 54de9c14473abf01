"""JSON for the API: dataclasses, Markup and sets become plain JSON values."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, str):
        return str(value)  # Markup is a str: sent as its text
    return value


def to_json(data: Any) -> str:
    return json.dumps(_plain(data), default=str, sort_keys=True)

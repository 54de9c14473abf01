"""A checkpoint file: an orchestration's state as JSON, replaced whole at every step.

A flow writes ``checkpoint.json`` (state root) after every leg ends: written to a
temporary file, fsync'd, renamed over the old one and the directory fsync'd, so a reader
(or a machine that lost power) sees the previous or the next checkpoint, never half of
one. It holds the flow file's digest, the variables and, per leg instance, its session
id, status, reason, attempts and outputs. Resume reads the database, not this file; the
file is for people and tools on the machine that ran the flow.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lirun.record.rundir import write_atomically

__all__ = ["CHECKPOINT_VERSION", "read_checkpoint", "write_checkpoint"]

CHECKPOINT_VERSION = 1


def write_checkpoint(path: Path, data: Mapping[str, Any], *, entries: str = "legs") -> None:
    """Atomically replace ``path`` with ``data`` as JSON (fsync'd, then renamed); the
    mapping under ``entries`` (a flow's legs) is written one entry a line."""
    payload = _encode({"version": CHECKPOINT_VERSION, **data}, entries)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, (payload + "\n").encode("utf-8"))


def _encode(data: Mapping[str, Any], entries: str) -> str:
    """JSON with one entry a line: readable and greppable, and encoded by the C encoder
    (``indent=`` falls back to a pure-Python one, which cost a 1,000-leg flow most of
    its time, the checkpoint being rewritten after every leg)."""
    rows = data.get(entries)
    head = {key: value for key, value in data.items() if key != entries}
    text = json.dumps(head, default=str)
    if not isinstance(rows, Mapping):
        return text
    lines = [f"  {json.dumps(str(k))}: {json.dumps(v, default=str)}" for k, v in rows.items()]
    body = "{\n" + ",\n".join(lines) + "\n}" if lines else "{}"
    return (text[:-1] + ", " if head else "{") + f"{json.dumps(entries)}: {body}}}"


def read_checkpoint(path: Path) -> dict[str, Any]:
    """The checkpoint as written; OSError / ValueError when it is missing or not JSON."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return data

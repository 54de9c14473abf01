"""The flow's files in its run directory: ``checkpoint.json`` and ``flow.log``.

``checkpoint.json`` (state root) is rewritten after every leg ends: written to a temporary
file, fsync'd, renamed over the old one and the directory fsync'd, so a reader (or a
machine that lost power) sees the previous or the next checkpoint, never half of one. It
holds the flow file's digest, the variables and, per leg instance, its session id,
status, reason, attempts and outputs. Resume reads the database, not this file; the file
is for people and tools on the machine that ran the flow.

``flow.log`` (artifact root) gets one line per leg event, flushed as it happens.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lirun.record.rundir import write_atomically

__all__ = ["FlowLog", "read_checkpoint", "write_checkpoint"]

CHECKPOINT_VERSION = 1


def write_checkpoint(path: Path, data: Mapping[str, Any]) -> None:
    """Atomically replace ``path`` with ``data`` as JSON (fsync'd, then renamed)."""
    payload = _encode({"version": CHECKPOINT_VERSION, **data})
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, (payload + "\n").encode("utf-8"))


def _encode(data: Mapping[str, Any]) -> str:
    """JSON with one leg a line: readable and greppable, and encoded by the C encoder
    (``indent=`` falls back to a pure-Python one, which cost a 1,000-leg flow most of
    its time, the checkpoint being rewritten after every leg)."""
    legs = data.get("legs")
    head = {key: value for key, value in data.items() if key != "legs"}
    text = json.dumps(head, default=str)
    if not isinstance(legs, Mapping):
        return text
    lines = [f"  {json.dumps(str(k))}: {json.dumps(v, default=str)}" for k, v in legs.items()]
    body = "{\n" + ",\n".join(lines) + "\n}" if lines else "{}"
    return (text[:-1] + ", " if head else "{") + f'"legs": {body}}}'


def read_checkpoint(path: Path) -> dict[str, Any]:
    """The checkpoint as written; OSError / ValueError when it is missing or not JSON."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return data


class FlowLog:
    """Appends one timestamped line per leg event; also hands it to ``echo`` (stderr)."""

    def __init__(self, path: Path, echo: Any = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._echo = echo
        self._lock = threading.Lock()

    def line(self, text: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
        with self._lock:
            if not self._handle.closed:
                self._handle.write(f"{stamp}Z {text}\n")
                self._handle.flush()
        if self._echo is not None:
            self._echo(text)

    def close(self) -> None:
        with self._lock:
            self._handle.close()

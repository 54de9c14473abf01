"""``flow.log`` (a flow's artifact root): one line per leg event, flushed as it happens."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["FlowLog"]


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

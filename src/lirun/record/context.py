"""``PersistContext``: one execution's durable record handle, shared by teardown and the
facts it gathers (its own module so that ``facts`` and ``teardown`` need not import
each other).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lirun.logs import get_logger
from lirun.record.evidence import StartSnapshot
from lirun.record.rundir import RunDir
from lirun.store import Store

__all__ = ["PersistContext"]

log = get_logger(__name__)


@dataclass(slots=True)
class PersistContext:
    """One execution's durable record handle, from ``setup_persist`` to ``teardown_persist``.

    ``snapshot_status`` is the row's status as teardown last read it (the CAS guard).
    ``start_snapshot`` is the cwd when the run started (design.md §4.9), the baseline of the
    completion evidence. The linked-engine lookup knobs and ``sleep``/``clock`` are
    injectable for tests.
    """

    store: Store
    session_id: str
    run: RunDir
    artifact_contract: dict[str, Any] | None
    owned: bool
    started_at: float
    cwd: str | None = None
    start_snapshot: StartSnapshot | None = None
    snapshot_status: str | None = "running"
    linked_lookup_retries: int = 3
    linked_lookup_interval: float = 0.1
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time
    closed: bool = False

    @property
    def run_dir(self) -> str:
        return str(self.run.state_root)

    @property
    def artifact_dir(self) -> str:
        return str(self.run.artifact_dir)

    def close(self) -> None:
        """Close the database handle if this context opened it; idempotent, never raises."""
        if self.owned and not self.closed:
            try:
                self.store.close()
            except Exception:
                log.debug("closing the state database failed", exc_info=True)
        self.closed = True

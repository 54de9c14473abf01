"""Whether a running record's owner still runs it, for the run, flow and show pages:
the same judgment ``li status`` prints (``record.ownership``), with the command that
reaps or takes over a record whose owner is gone."""

from __future__ import annotations

import time
from typing import Any

from lirun.liveness import boot_id, host_name, process_start_time
from lirun.record.ownership import OwnedRecord, judge

__all__ = ["liveness"]


def liveness(kind: str, row: OwnedRecord) -> dict[str, Any] | None:
    """The owner verdict of a running session or flow, or an active show; else None."""
    found = judge(
        kind,
        row,
        now=time.time(),
        host=host_name(),
        boot_id=boot_id(),
        process_start_time_of=process_start_time,
    )
    return None if found is None else found.to_dict()

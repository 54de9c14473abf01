"""The facts of the needs-you page (``attention.Facts``): the store's rows, the owners of
running records judged as ``li reap`` judges them, live workers, and the outcomes
pending in this database's spool. Reads only; never delivers or reaps."""

from __future__ import annotations

import json
from typing import Any

from lirun.liveness import boot_id, host_name, judge_owner, process_start_time
from lirun.paths import resolve_db_url
from lirun.record.ownership import OwnedRecord
from lirun.record.spool import pending_files
from lirun.schedules.live import live_workers
from lirun.store.rows import ShowRow
from lirun.ui.attention import DEFAULT_WINDOW_SECONDS, Facts, Item, needs_you


def _dead_owners(store: Any, shows: list[ShowRow], now: float) -> list[dict[str, Any]]:
    host, boot = host_name(), boot_id()
    running: list[tuple[str, OwnedRecord]] = [
        *(("session", r) for r in store.sessions.list_running()),
        *(("invocation", r) for r in store.invocations.list_running_flows()),
        *(("show", r) for r in shows),
    ]
    dead = []
    for kind, row in running:
        verdict = judge_owner(
            row, now=now, host=host, boot_id=boot, process_start_time_of=process_start_time
        )
        if verdict is not None:
            since = row.heartbeat_at or row.updated_at
            dead.append({"kind": kind, "id": row.id, "summary": verdict.summary, "since": since})
    return dead


def _pending(url: str | None) -> list[dict[str, Any]]:
    out = []
    for path in pending_files(resolve_db_url(url)):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("run_id"):
            keys = ("run_id", "status", "reason_code", "spooled_at", "cause")
            out.append({k: data.get(k) for k in keys})
    return out


def gather(store: Any, url: str | None, now: float, since: float | None = None) -> Facts:
    """The facts as of ``now``; failures before ``since`` (default: a week ago) age out."""

    rows = store.lists.attention_rows(
        since=now - DEFAULT_WINDOW_SECONDS if since is None else since
    )
    return Facts(
        plays=rows.plays,
        flows=rows.flows,
        schedule_runs=rows.schedule_runs,
        schedules=store.schedules.list_all(),
        queued_runs=rows.queued_runs,
        live_workers=len(live_workers(store, now)),
        dead_owners=_dead_owners(store, rows.running_shows, now),
        pending=_pending(url),
    )


def attention_items(
    store: Any, url: str | None, now: float, since: float | None = None
) -> list[Item]:
    """What needs a person now (``attention.needs_you`` over the gathered facts)."""
    return needs_you(gather(store, url, now, since), now)

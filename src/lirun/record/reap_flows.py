"""Finalize flow invocations whose owner is provably dead (design.md §4.6, for flows).

A flow's invocation row carries its owner's identity and heartbeat as a running session
does, so ``judge`` decides it the same way. Its running legs (sessions owned by the same
dead process) are reaped first, then the invocation is written ``failed`` with the same
orphaned / stale reason, its evidence naming the legs, through the CAS-guarded write: a
concurrent reaper or a late owner loses harmlessly.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lirun.record.reap import (
    Orphan,
    Running,
    finalize_orphan,
    judge,
    local_facts,
    orphans_among,
    reap_sessions,
)
from lirun.store.core import Store

__all__ = ["find_orphan_flows", "reap_flow_if_orphaned", "reap_flows"]


def find_orphan_flows(store: Store, *, now: float | None = None) -> list[Orphan]:
    """Running flow invocations whose owner is dead or whose lease lapsed."""
    # Judged as a running session is, by the owner columns they share.
    return orphans_among(store.invocations.list_running_flows(), now)


def _reap_one(store: Store, invocation_id: str, now: float | None) -> dict[str, Any] | None:
    facts = local_facts(now)
    flow = store.invocations.get(invocation_id)
    verdict = judge(flow, facts) if flow is not None else None  # judged as a session is
    if flow is None or verdict is None:
        return None
    legs = reap_sessions(
        store, [leg.id for leg in store.invocations.list_running_legs(invocation_id)], now=now
    )
    evidence = [*verdict.evidence]
    if legs:
        evidence.append({"kind": "orphaned_legs", "sessions": [leg["id"] for leg in legs]})
    store.invocations.sum_flow_usage(invocation_id)
    summary = f"flow owner gone: {verdict.summary}"
    return finalize_orphan(store, "invocation", flow, verdict, summary=summary, evidence=evidence)


def reap_flows(
    store: Store, rows: Iterable[Running], *, now: float | None = None
) -> list[dict[str, Any]]:
    """Finalize each flow invocation of ``rows`` still running with a dead owner (and its
    running legs); one report per invocation judged dead."""
    reports = []
    for row in rows:
        result = _reap_one(store, row.id, now)
        if result is not None:
            reports.append(result)
    return reports


def reap_flow_if_orphaned(store: Store, invocation_id: str) -> bool:
    """True when the invocation is no longer running (reaped now, or ended meanwhile)."""
    _reap_one(store, invocation_id, None)
    flow = store.invocations.get(invocation_id)
    return flow is not None and flow.status != "running"

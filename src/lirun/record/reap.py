"""Finalize running executions whose owner is provably dead (design.md §4.6).

The decision is ``liveness.judge_owner``; this module gathers this machine's facts,
re-reads each row just before writing, and writes through the CAS-guarded
``update_status`` so that concurrent reapers (several `li wait`, `li reap`) and a
late teardown cannot clobber one another: the first write wins, the others lose
their compare-and-set harmlessly.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from lirun.errors import LirunError
from lirun.liveness import (
    OWNER_DEATH_NOTE,
    Owned,
    OwnedGroup,
    OwnerVerdict,
    boot_id,
    host_name,
    judge_owner,
    orphaned_group,
    process_start_time,
)
from lirun.record import credential
from lirun.record.spool import apply_pending_run
from lirun.store.core import Store
from lirun.store.rows import SessionRow

REAPED_STATUS = "failed"


@dataclass(frozen=True, slots=True)
class LocalFacts:
    """What this machine knows right now; the judge needs nothing else."""

    now: float
    host: str
    boot_id: str
    start_time_of: Callable[[int], float | None]


class Running(Owned, Protocol):
    """A record the reaper judges as it is read (a session's, a flow invocation's or a
    waited-on target's row): its id and status besides its owner's facts."""

    @property
    def id(self) -> str: ...
    @property
    def status(self) -> str: ...


class Orphan(NamedTuple):
    row: Running
    verdict: OwnerVerdict


def local_facts(now: float | None = None) -> LocalFacts:
    return LocalFacts(
        now=time.time() if now is None else now,
        host=host_name(),
        boot_id=boot_id(),
        start_time_of=process_start_time,
    )


def judge(row: Running, facts: LocalFacts) -> OwnerVerdict | None:
    """The verdict for a running session row; None for any other status."""
    if row.status != "running":
        return None
    return judge_owner(
        row,
        now=facts.now,
        host=facts.host,
        boot_id=facts.boot_id,
        process_start_time_of=facts.start_time_of,
    )


def orphans_among(rows: Iterable[Running], now: float | None = None) -> list[Orphan]:
    """Those of ``rows`` (running sessions or flow invocations) whose owner is dead or
    whose lease lapsed, in the order given."""
    facts = local_facts(now)
    found = []
    for row in rows:
        verdict = judge(row, facts)
        if verdict is not None:
            found.append(Orphan(row, verdict))
    return found


def find_orphans(store: Store, *, now: float | None = None) -> list[Orphan]:
    """Running sessions whose owner is dead or whose lease lapsed, oldest first."""
    # Judged as a flow invocation or a show is, by the owner columns they share.
    return orphans_among(store.sessions.list_running(), now)


def finalize_orphan(
    store: Store,
    entity_type: str,
    row: Running,
    verdict: OwnerVerdict,
    *,
    summary: str,
    evidence: list[dict[str, Any]],
) -> dict[str, Any] | None:
    """Write the running ``row`` ``failed`` with the verdict's reason through the
    CAS-guarded update; its report (``reaped`` False when another writer came first),
    None when the row was deleted meanwhile (nothing left to finalize)."""
    try:
        won = store.update_status(
            entity_type,
            row.id,
            new_status=REAPED_STATUS,
            reason_code=verdict.reason_code,
            reason_summary=summary,
            evidence_refs=evidence,
            source="system",
            expected_statuses={"running"},
        )
    except LookupError:
        return None
    return report(row, verdict, reaped=won)


def report(row: Running, verdict: OwnerVerdict, *, reaped: bool) -> dict[str, Any]:
    """What ``li reap`` prints of one record judged dead (a ``--json`` line)."""
    return {
        "id": row.id,
        "reason_code": verdict.reason_code,
        "reason_summary": verdict.summary,
        "evidence": verdict.evidence,
        "reaped": reaped,
    }


def _stop_orphaned_group(
    row: OwnedGroup, verdict: OwnerVerdict, facts: LocalFacts
) -> list[dict[str, Any]]:
    """SIGTERM the child process group a dead owner left behind; evidence of it.

    A record that says "failed: owner gone" must not have an agent still editing the
    repository unsupervised behind it.
    """
    pgid = orphaned_group(
        row,
        verdict,
        host=facts.host,
        boot_id=facts.boot_id,
        process_start_time_of=facts.start_time_of,
    )
    if pgid is None:
        return []
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return []
    return [{"kind": "orphaned_process_group", "pgid": pgid, "signal": "SIGTERM"}]


def owner_death_note(row: SessionRow) -> list[dict[str, Any]]:
    """What the dead owner's guard killed (its note in the run's directory), as evidence:
    the record says the run's processes died with their owner, and which they were."""

    run_dir = row.run_dir
    if not run_dir:
        return []
    try:
        with open(os.path.join(str(run_dir), OWNER_DEATH_NOTE), encoding="utf-8") as handle:
            note = json.load(handle)
    except (OSError, ValueError):
        return []
    if not isinstance(note, dict):
        return []
    killed = note.get("killed")
    killed = killed if isinstance(killed, list) else []
    entry = {
        "kind": "killed_with_owner",
        "owner_pid": note.get("owner_pid"),
        "at": note.get("at"),
        "processes": killed[:100],
        "signal": "SIGKILL",
    }
    if note.get("cgroup"):
        entry["cgroup"] = str(note["cgroup"])
    return [entry]


def _reap_one(store: Store, session_id: str, facts: LocalFacts) -> dict[str, Any] | None:
    # The owner died after spooling the outcome it could not write: the true cause wins.
    with contextlib.suppress(LirunError, OSError):  # then judge the row as it is
        if apply_pending_run(store, session_id) not in (None, "keep"):
            return None
    # Judge the freshest row: a heartbeat may have landed since the caller read it.
    session = store.sessions.get(session_id)
    verdict = judge(session, facts) if session is not None else None
    if session is None or verdict is None:
        return None
    evidence = [*verdict.evidence, *_stop_orphaned_group(session, verdict, facts)]
    evidence += owner_death_note(session)
    reported = finalize_orphan(
        store, "session", session, verdict, summary=verdict.summary, evidence=evidence
    )
    if session.run_dir:  # the record ended: no credential of the run outlives it
        credential.remove(session.run_dir)
    return reported


def reap_sessions(
    store: Store, session_ids: Iterable[str], *, now: float | None = None
) -> list[dict[str, Any]]:
    """Finalize each of the sessions ``session_ids`` still running with a dead owner.

    Returns one report per row judged dead; ``reaped`` is False when another writer
    finalized the row first (a lost compare-and-set, which is fine).
    """
    facts = local_facts(now)
    reports = []
    for session_id in session_ids:
        result = _reap_one(store, session_id, facts)
        if result is not None:
            reports.append(result)
    return reports

"""A flow's report: what a flow run returns and ``li status`` / ``li flow`` render (the
invocation and its legs), read back from the database, and the legs a resume reuses.

Everything here reads the record (the invocation row with its stored flow and the leg
sessions), never the run directory, so it answers on any machine that shares the
database.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from lirun.errors import PrunedError, UsageError
from lirun.flows.decide import NOT_RUN
from lirun.flows.jobs import outputs_of, proof_is_shared
from lirun.flows.state import ReusedLeg
from lirun.lifecycle import EXIT_CODE_BY_STATUS
from lirun.store import Store, open_store
from lirun.store.rows import InvocationRow, SessionRow

__all__ = [
    "FlowReport",
    "LegReport",
    "flow_report",
    "pruned_refusal",
    "report_from_store",
    "resumable_legs",
    "reusable_legs",
]


@dataclass(frozen=True, slots=True)
class LegReport:
    """One leg instance. ``id`` is ``review[2]`` for a fan-out instance, ``leg`` the
    flow file's id (``review``) and ``item`` its item; ``status`` is the session's, or
    ``not_run``; ``reused``: completed in the invocation this one resumed, not run again
    (``session_id`` is that earlier session); ``attempts`` counts sessions (retries);
    ``error``: why a leg that has no session failed (its items, its template, its setup)."""

    id: str
    leg: str
    item: str | None
    status: str
    reason_code: str | None
    session_id: str | None
    attempts: int
    reused: bool
    duration_s: float | None
    cost_usd: float | None
    depends_on: tuple[str, ...]
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["depends_on"] = list(self.depends_on)
        return data


@dataclass(frozen=True, slots=True)
class FlowReport:
    """The flow invocation as recorded: status and reason, its run directory, the legs in
    graph order, the legs not run because a dependency failed (``stopped``), the signal
    that interrupted it (``interrupted``) and the summed tokens and cost of its legs."""

    invocation_id: str
    status: str
    reason_code: str | None
    reason_summary: str | None
    run_dir: str | None
    resumed_from: str | None
    legs: tuple[LegReport, ...]
    stopped: tuple[str, ...]
    interrupted: str | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None

    @property
    def exit_code(self) -> int:
        """``li``'s exit code for the invocation's status (0, 1, 124, 130, 143)."""
        return EXIT_CODE_BY_STATUS.get(self.status, 1)

    def to_dict(self) -> dict[str, Any]:
        data = {
            key: getattr(self, key)
            for key in (
                "invocation_id",
                "status",
                "reason_code",
                "reason_summary",
                "run_dir",
                "resumed_from",
                "interrupted",
                "input_tokens",
                "output_tokens",
                "cost_usd",
            )
        }
        data["exit_code"] = self.exit_code
        data["stopped"] = list(self.stopped)
        data["legs"] = [leg.to_dict() for leg in self.legs]
        return data


_SUCCESS = ("completed", "completed_empty")
_SIGNAL_BY_REASON = {"run.cancelled.sigint": "SIGINT", "run.cancelled.sigterm": "SIGTERM"}


def _flow_row(store: Store, invocation_id: str) -> InvocationRow:
    row = store.invocations.get(invocation_id)
    if row is None or row.kind != "flow" or not row.flow_json:
        raise UsageError(f"invocation {invocation_id} is not a flow (no stored flow)")
    return row


def _latest_by_leg(sessions: list[SessionRow]) -> dict[str, tuple[SessionRow, int]]:
    """Leg instance id → (its last attempt's session, how many sessions it had); the
    session's ``cost_usd`` is that of every attempt (each was paid for)."""
    found: dict[str, tuple[SessionRow, int]] = {}
    for session in sessions:  # oldest first: the last one seen is the latest attempt
        leg = session.flow_leg
        if leg:
            count = found[leg][1] + 1 if leg in found else 1
            cost = session.cost_usd
            earlier_cost = found[leg][0].cost_usd if leg in found else None
            if earlier_cost is not None:
                cost = earlier_cost + (cost or 0.0)
            found[leg] = (session._replace(cost_usd=cost), count)
    return found


def _leg_report(
    entry: Mapping[str, Any],
    session: SessionRow | None,
    attempts: int,
    reused: bool,
    *,
    unrun: str = NOT_RUN,
) -> LegReport:
    """``unrun``: the status of a leg without a session (``pending`` while the flow runs)."""
    status = session.status if session else entry.get("status") or unrun
    reason = (
        session.status_reason_code if session else entry.get("reason_code") or entry.get("not_run")
    )
    return LegReport(
        id=entry["id"],
        leg=entry["leg"],
        item=entry.get("item"),
        status=str(status),
        reason_code=reason,
        session_id=session.id if session else None,
        attempts=attempts,
        reused=reused,
        duration_s=session.duration_s if session else None,
        cost_usd=session.cost_usd if session else None,
        depends_on=tuple(entry.get("depends_on") or ()),
        error=None if session else entry.get("error"),
    )


def _interrupted(row: InvocationRow) -> str | None:
    """The signal that stopped the flow: named in its evidence, else by its reason."""
    for item in row.status_evidence_refs or []:
        if isinstance(item, Mapping) and item.get("kind") == "signal":
            return str(item.get("signal"))
    return _SIGNAL_BY_REASON.get(row.status_reason_code or "")


def _stopped(row: InvocationRow) -> tuple[str, ...]:
    for item in row.status_evidence_refs or []:
        if isinstance(item, Mapping) and item.get("kind") == "stopped_legs":
            return tuple(str(leg["leg"]) for leg in item.get("legs") or [])
    return ()


def report_from_store(store: Store, invocation_id: str) -> FlowReport:
    """The report of one flow invocation (its exact id) as the database holds it."""
    row = _flow_row(store, invocation_id)
    latest = _latest_by_leg(store.waits.invocation_sessions(invocation_id))
    unrun = "pending" if row.status == "running" else NOT_RUN
    legs = []
    for entry in row.flow_json.get("graph") or []:
        if entry["id"] in latest:
            session, attempts = latest[entry["id"]]
            legs.append(_leg_report(entry, session, attempts, False))
        elif entry.get("reused_from"):
            earlier = store.sessions.get(entry["reused_from"])
            legs.append(_leg_report(entry, earlier, 0, True))
        else:  # not run, or no session: a fan-out with no items or unreadable ones
            legs.append(_leg_report(entry, None, 0, False, unrun=unrun))
    seen = {leg.leg for leg in legs}
    for spec_leg in row.flow_json.get("spec", {}).get("legs") or []:
        if spec_leg["id"] not in seen:  # not reached (yet)
            entry = {
                "id": spec_leg["id"],
                "leg": spec_leg["id"],
                "depends_on": spec_leg.get("depends_on"),
            }
            legs.append(_leg_report(entry, None, 0, False, unrun=unrun))
    return FlowReport(
        invocation_id=row.id,
        status=row.status,
        reason_code=row.status_reason_code,
        reason_summary=row.status_reason_summary,
        run_dir=row.run_dir,
        resumed_from=row.resumed_from,
        legs=tuple(legs),
        stopped=_stopped(row),
        interrupted=_interrupted(row),
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        cost_usd=row.cost_usd,
    )


def flow_report(invocation: str, *, db_url: str | None = None) -> FlowReport:
    """Read-only: the report of the flow invocation ``invocation`` (id or unique prefix).

    NotFoundError / AmbiguousIdError (exit 2) for an unknown or ambiguous id; UsageError
    when it is not a flow."""
    store = open_store(db_url, readonly=True)
    try:
        return report_from_store(store, store.resolve_id("invocation", invocation))
    finally:
        store.close()


def _reused(session: SessionRow) -> ReusedLeg:
    meta = session.meta.get("flow") or {}
    return ReusedLeg(
        session_id=session.id,
        status=session.status,
        reason_code=session.status_reason_code,
        item=meta.get("item"),
        duration_s=session.duration_s,
        outputs=outputs_of(session),
        proof_shared=proof_is_shared(session),
        pruned_at=session.pruned_at,
    )


def reusable_legs(store: Store, invocation_id: str) -> dict[str, ReusedLeg]:
    """Leg instance id → what a resume of ``invocation_id`` reuses: every instance that
    completed there (``completed`` or ``completed_empty``), or that it had reused itself."""
    row = _flow_row(store, invocation_id)
    found: dict[str, ReusedLeg] = {}
    for leg_id, (session, _) in _latest_by_leg(
        store.waits.invocation_sessions(invocation_id)
    ).items():
        if session.status in _SUCCESS:
            found[leg_id] = _reused(session)
    for entry in row.flow_json.get("graph") or []:
        source = entry.get("reused_from")
        if source and entry["id"] not in found:
            earlier = store.sessions.get(source)
            if earlier is not None and earlier.status in _SUCCESS:
                found[entry["id"]] = _reused(earlier)
    return found


def pruned_refusal(
    invocation_id: str, flow_file: str, reuse: Mapping[str, ReusedLeg]
) -> str | None:
    """Why a resume that would reuse ``reuse`` is refused: ``li gc`` pruned some of those
    legs, so their dependents would read an empty reply and missing artifacts (None: no
    leg is pruned). Rerunning them instead would change what resume means."""
    pruned = sorted(leg for leg, reused in reuse.items() if reused.pruned_at is not None)
    if not pruned:
        return None
    again = f"`li flow run {flow_file}`" if flow_file else "`li flow run` with its flow file"
    legs = f"legs {', '.join(pruned)}" if len(pruned) > 1 else f"leg {pruned[0]}"
    return (
        f"flow {invocation_id} cannot be resumed: `li gc` pruned the completed {legs} it "
        f"would reuse (replies and artifacts gone); nothing was run; run the flow again: "
        f"{again}"
    )


def resumable_legs(store: Store, invocation_id: str) -> dict[str, ReusedLeg]:
    """``reusable_legs``, or PrunedError (exit 2) when ``li gc`` pruned any of them."""
    reuse = reusable_legs(store, invocation_id)
    row = _flow_row(store, invocation_id)
    flow_file = row.skill if row.skill and row.skill != "flow" else ""
    refusal = pruned_refusal(invocation_id, flow_file, reuse)
    if refusal is not None:
        raise PrunedError(refusal)
    return reuse

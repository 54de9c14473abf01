"""How a flow ended, as a pure function of how its legs ended (docs/flow-engine.md).

The rule, in order:

1. a signal to the flow ends it ``aborted`` (SIGINT) or ``cancelled`` (SIGTERM, SIGHUP),
   whatever the legs did;
2. the flow's own deadline ends it ``timed_out``;
3. a leg that failed, timed out or was stopped by something other than the flow (and a
   fan-out whose items could not be read) fails the flow with ``run.failed.leg``, the
   summary naming every such leg with its reason and the provider's own words (the
   legs the flow itself stopped are named only when no leg failed on its own);
4. every leg completed (a ``completed_empty`` leg marked ``may_be_empty`` counts as
   completed): ``completed``;
5. otherwise ``completed_empty`` with ``run.completed_empty.leg`` naming the legs.

A leg that ran with ``isolation: shared`` beside other legs cannot alone prove work: if
its only proof was a change in the shared tree (no reply, no artifact file), it counts
as ``completed_empty`` here, whatever its own row says (its row cannot tell its changes
from its neighbours'). Legs not run because a dependency did not complete, or because
the flow fails fast, are named in the evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lirun.exec.trouble import one_line

# What ``signal`` holds when the flow stopped because its owner lost its lease.
LEASE_LOST_SIGNAL = "lease lost"

__all__ = [
    "NOT_RUN",
    "FlowFacts",
    "FlowOutcome",
    "LegFact",
    "counts_as",
    "decide_flow",
]

# A leg without a session: stopped by a failed dependency or by fail_fast, or never
# reached because the flow was interrupted.
NOT_RUN = "not_run"
_FAILING = frozenset({"failed", "timed_out", "aborted", "cancelled"})
# A summary names this many failed legs (the evidence lists them all), each with at most
# this much of what went wrong.
_NAMED_LEGS = 10
_SAID_CHARS = 160


@dataclass(frozen=True, slots=True)
class LegFact:
    """One leg instance as the decision needs it.

    ``status``: its session's status, or ``not_run``; ``reason_code``: the session's reason
    or, for a leg not run, why; ``proof_shared``: it ran in a shared tree beside other legs
    and produced neither a reply nor an artifact file (its work cannot be told apart).
    """

    id: str
    status: str
    reason_code: str | None = None
    may_be_empty: bool = False
    proof_shared: bool = False
    because: str | None = None  # for a leg not run: the leg whose failure stopped it
    interrupted: bool = False  # the flow stopped it (signal, deadline, fail_fast)
    error: str | None = None  # why a leg without a session failed (items, template)
    message: str | None = None  # what the provider said when the leg's agent failed


@dataclass(frozen=True, slots=True)
class FlowFacts:
    legs: Sequence[LegFact]
    signal: str | None = None  # SIGINT / SIGTERM / SIGHUP received by the flow
    timed_out: bool = False  # the flow's own deadline passed
    timeout_s: float | None = None


@dataclass(frozen=True, slots=True)
class FlowOutcome:
    status: str
    reason_code: str
    summary: str
    evidence: list[dict[str, Any]]
    stopped: tuple[str, ...]  # legs not run because a dependency (or fail_fast) stopped them


def counts_as(leg: LegFact) -> str:
    """The status a leg contributes to the flow's."""
    if leg.status == "completed" and leg.proof_shared and not leg.may_be_empty:
        return "completed_empty"
    if leg.status == "completed_empty" and leg.may_be_empty:
        return "completed"
    return leg.status


def _stopped(legs: Sequence[LegFact]) -> list[LegFact]:
    codes = ("run.cancelled.dependency", "run.cancelled.fail_fast")
    return [leg for leg in legs if leg.status == NOT_RUN and leg.reason_code in codes]


def _evidence(facts: FlowFacts) -> list[dict[str, Any]]:
    legs = facts.legs
    evidence: list[dict[str, Any]] = []
    failing = [leg for leg in legs if _is_failure(leg)]
    if failing:
        evidence.append(
            {
                "kind": "failed_legs",
                "legs": [
                    {
                        "leg": f.id,
                        "status": f.status,
                        "reason": f.reason_code,
                        "stopped_by_flow": f.interrupted,
                        **({"error": f.error} if f.error else {}),
                        **({"message": f.message} if f.message else {}),
                    }
                    for f in failing
                ],
            }
        )
    stopped = _stopped(legs)
    if stopped:
        evidence.append(
            {
                "kind": "stopped_legs",
                "legs": [
                    {"leg": s.id, "reason": s.reason_code, "because": s.because} for s in stopped
                ],
            }
        )
    shared = [leg.id for leg in legs if leg.proof_shared]
    if shared:
        evidence.append({"kind": "shared_evidence", "legs": shared})
    if facts.signal is not None:  # its name: a reason code does not tell SIGHUP apart
        evidence.append({"kind": "signal", "signal": facts.signal})
    return evidence


def _is_failure(leg: LegFact) -> bool:
    return leg.status in _FAILING or leg.reason_code == "run.failed.fan_out"


def _failures(legs: Sequence[LegFact]) -> list[LegFact]:
    """The legs that failed on their own; else those the flow stopped."""
    failing = [leg for leg in legs if _is_failure(leg)]
    own = [leg for leg in failing if not leg.interrupted]
    return own or failing


def _clip(text: str, limit: int = _SAID_CHARS) -> str:
    return one_line(text, limit)


def _failure_summary(failed: Sequence[LegFact]) -> str:
    """``leg f ended failed (run.failed.exit_nonzero)`` for one leg; for more, ``2 legs
    failed: review[1] (run.failed.provider_auth: Invalid API key), check (...)``."""
    if len(failed) == 1:
        leg = failed[0]
        summary = f"leg {leg.id} ended {leg.status}"
        if leg.reason_code:
            summary += f" ({leg.reason_code})"
        said = leg.error or leg.message
        return summary + (f": {_clip(said)}" if said else "")
    parts = []
    for leg in failed[:_NAMED_LEGS]:
        said = leg.error or leg.message
        why = leg.reason_code or leg.status
        parts.append(f"{leg.id} ({why}: {_clip(said)})" if said else f"{leg.id} ({why})")
    more = len(failed) - _NAMED_LEGS
    tail = f", and {more} more (see the evidence)" if more > 0 else ""
    return f"{len(failed)} legs failed: {', '.join(parts)}{tail}"


def decide_flow(facts: FlowFacts) -> FlowOutcome:
    """The flow's status, reason, summary and evidence (the rule in the module doc)."""
    evidence = _evidence(facts)
    stopped = tuple(leg.id for leg in _stopped(facts.legs))

    def out(status: str, reason: str, summary: str) -> FlowOutcome:
        return FlowOutcome(status, reason, summary, evidence, stopped)

    if facts.signal == "SIGINT":
        return out("aborted", "run.cancelled.sigint", "interrupted (SIGINT); running legs stopped")
    if facts.signal == LEASE_LOST_SIGNAL:
        summary = "the flow's owner could not renew its lease; running legs stopped"
        return out("cancelled", "run.cancelled.system", summary)
    if facts.signal is not None:
        reason = "run.cancelled.sigterm" if facts.signal == "SIGTERM" else "run.cancelled.system"
        return out("cancelled", reason, f"{facts.signal} received; running legs stopped")
    if facts.timed_out:
        limit = f" of {facts.timeout_s:g}s" if facts.timeout_s is not None else ""
        return out("timed_out", "run.timed_out.deadline", f"the flow's deadline{limit} passed")
    failed = _failures(facts.legs)
    if failed:
        summary = _failure_summary(failed)
        if stopped:
            summary += f"; not run: {', '.join(stopped)}"
        return out("failed", "run.failed.leg", summary)
    unrun = [leg.id for leg in facts.legs if leg.status == NOT_RUN]
    if unrun:  # cannot happen without a failure or a stop; never call it success
        return out("failed", "run.failed.leg", f"legs not run: {', '.join(unrun)}")
    empty = [leg.id for leg in facts.legs if counts_as(leg) == "completed_empty"]
    if empty:
        return out(
            "completed_empty",
            "run.completed_empty.leg",
            f"no evidence of work from leg {', '.join(empty)}",
        )
    return out("completed", "run.completed.ok", f"all {len(facts.legs)} legs completed")

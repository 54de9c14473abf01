"""The flow's status as a pure decision over its legs (no database, no processes)."""

from __future__ import annotations

import pytest

from lirun.flows.decide import NOT_RUN, FlowFacts, LegFact, counts_as, decide_flow
from lirun.reasons import validate_reason

OK = LegFact("a", "completed", "run.completed.ok")
OK_B = LegFact("b", "completed", "run.completed.ok")
EMPTY = LegFact("e", "completed_empty", "run.completed_empty.no_evidence")
EMPTY_OK = LegFact("e", "completed_empty", "run.completed_empty.no_evidence", may_be_empty=True)
FAILED = LegFact("f", "failed", "run.failed.exit_nonzero")
TIMED = LegFact("t", "timed_out", "run.timed_out.deadline")
STOPPED = LegFact("s", NOT_RUN, "run.cancelled.dependency", because="f")
FAN_OUT_BAD = LegFact("r", "failed", "run.failed.fan_out")
NO_ITEMS = LegFact("r", "completed_empty", "run.completed_empty.no_items")
SHARED = LegFact("w", "completed", "run.completed.ok", proof_shared=True)
KILLED_BY_FLOW = LegFact("k", "cancelled", "run.cancelled.sigterm", interrupted=True)

CASES = [
    # (legs, signal, timed_out) -> (status, reason, summary mentions)
    ((OK, OK_B), None, False, "completed", "run.completed.ok", "all 2 legs"),
    ((OK, EMPTY), None, False, "completed_empty", "run.completed_empty.leg", "e"),
    ((OK, EMPTY_OK), None, False, "completed", "run.completed.ok", ""),
    ((OK, NO_ITEMS), None, False, "completed_empty", "run.completed_empty.leg", "r"),
    ((OK, FAILED, STOPPED), None, False, "failed", "run.failed.leg", "leg f ended failed"),
    ((OK, TIMED), None, False, "failed", "run.failed.leg", "leg t ended timed_out"),
    ((OK, FAN_OUT_BAD), None, False, "failed", "run.failed.leg", "run.failed.fan_out"),
    ((OK, SHARED), None, False, "completed_empty", "run.completed_empty.leg", "w"),
    ((KILLED_BY_FLOW, FAILED), None, False, "failed", "run.failed.leg", "leg f"),
    ((OK, FAILED), "SIGINT", False, "aborted", "run.cancelled.sigint", "SIGINT"),
    ((OK,), "SIGTERM", False, "cancelled", "run.cancelled.sigterm", "SIGTERM"),
    ((OK,), "SIGHUP", False, "cancelled", "run.cancelled.system", "SIGHUP"),
    ((OK, KILLED_BY_FLOW), None, True, "timed_out", "run.timed_out.deadline", "deadline"),
    ((OK, KILLED_BY_FLOW), "SIGINT", True, "aborted", "run.cancelled.sigint", ""),
]


@pytest.mark.parametrize(("legs", "signal", "timed_out", "status", "reason", "mentions"), CASES)
def test_flow_status_from_its_legs(
    legs: tuple[LegFact, ...],
    signal: str | None,
    timed_out: bool,
    status: str,
    reason: str,
    mentions: str,
) -> None:
    outcome = decide_flow(FlowFacts(legs=legs, signal=signal, timed_out=timed_out))
    assert (outcome.status, outcome.reason_code) == (status, reason)
    assert mentions in outcome.summary
    validate_reason(outcome.reason_code, "invocation", outcome.status)  # a writable pair


def test_stopped_dependents_are_named_in_the_evidence() -> None:
    outcome = decide_flow(FlowFacts(legs=(OK, FAILED, STOPPED)))
    assert outcome.stopped == ("s",)
    kinds = {item["kind"]: item for item in outcome.evidence}
    assert kinds["stopped_legs"]["legs"] == [
        {"leg": "s", "reason": "run.cancelled.dependency", "because": "f"}
    ]
    assert kinds["failed_legs"]["legs"][0]["leg"] == "f"
    assert "not run: s" in outcome.summary


def test_fail_fast_stops_count_as_stopped_but_never_as_the_cause() -> None:
    skipped = LegFact("x", NOT_RUN, "run.cancelled.fail_fast")
    outcome = decide_flow(FlowFacts(legs=(KILLED_BY_FLOW, FAILED, skipped)))
    assert outcome.summary.startswith("leg f ended failed")
    assert outcome.stopped == ("x",)


def test_shared_evidence_is_named_and_may_be_empty_exempts_it() -> None:
    assert counts_as(SHARED) == "completed_empty"
    exempt = LegFact("w", "completed", "run.completed.ok", may_be_empty=True, proof_shared=True)
    assert counts_as(exempt) == "completed"
    outcome = decide_flow(FlowFacts(legs=(OK, SHARED)))
    assert {"kind": "shared_evidence", "legs": ["w"]} in outcome.evidence


def test_a_leg_never_reached_without_a_cause_is_not_success() -> None:
    lost = LegFact("z", NOT_RUN, "run.cancelled.flow_stopped")
    assert decide_flow(FlowFacts(legs=(OK, lost))).status == "failed"


def test_legs_the_flow_stopped_are_marked_in_the_evidence() -> None:
    outcome = decide_flow(FlowFacts(legs=(FAILED, KILLED_BY_FLOW)))
    failed = next(e for e in outcome.evidence if e["kind"] == "failed_legs")["legs"]
    assert [(f["leg"], f["stopped_by_flow"]) for f in failed] == [("f", False), ("k", True)]

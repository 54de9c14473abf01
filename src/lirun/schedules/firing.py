"""What a worker does when a schedule is due: a pure decision fed by facts.

``decide_fires(trigger, policies, facts)`` says, for every due time from the stored
``next_due_at`` up to ``now``, whether it runs or is recorded as skipped (and why), what
``next_due_at`` becomes, and whether the schedule must be disabled. The worker gathers
the facts (the clock, the schedule's active runs, runs started, recorded usage), inserts
one row per decided due time through the unique key (``Store.insert_due_run``: of many
workers, exactly one gets each row), then moves ``next_due_at`` by compare-and-set.

Rules (docs/schedules.md): a due time no worker fired within ``missed_grace`` is missed;
``--missed skip`` records each (the first ``MISSED_ROWS``, then one summary row);
``--missed run_once`` runs the latest of them when there is no current due time, and
records the others. The due time that runs is then checked against ``--max-runs``, the
budget and ``--overlap``, in that order; the first that refuses makes it a skipped row
with its own code. An ``--at`` schedule that has fired is spent and disabled.
"""

from __future__ import annotations

from dataclasses import dataclass

from lirun.schedules.definition import Policies
from lirun.schedules.triggers import Trigger, due_between, next_due

MISSED_ROWS = 100
COUNT_CAP = 10_000
RUN = "schedule.queued.created"
MISSED = "schedule.skipped.missed_fire"
MISSED_MORE = "schedule.skipped.missed_summary"
OVERLAP = "schedule.skipped.overlap"
MAX_RUNS = "schedule.skipped.max_runs"
BUDGET = "schedule.budget.exhausted"


@dataclass(frozen=True, slots=True)
class FireFacts:
    """What the worker read. ``usd_spent`` None: no run recorded a cost (Codex reports
    none), so a USD budget cannot see them; it is never taken as zero spent."""

    next_due_at: int
    now: int
    active_runs: int = 0
    runs_started: int = 0
    usd_spent: float | None = None
    tokens_spent: int = 0


@dataclass(frozen=True, slots=True)
class Fire:
    """One due time and its row: ``run`` (queued) or ``skip`` with ``reason_code``;
    ``count`` > 1 only on the summary row of more missed times than ``MISSED_ROWS``."""

    due_at: int
    action: str
    reason_code: str
    count: int = 1


@dataclass(frozen=True, slots=True)
class FirePlan:
    fires: tuple[Fire, ...]
    next_due_at: int | None
    disable_reason: str | None = None
    budget_blind: bool = False  # a USD budget, and no recorded cost to compare it with


def _missed_rows(missed: list[int]) -> list[Fire]:
    """One row per missed time up to ``MISSED_ROWS``, then one summary row (at the latest
    missed time, so it never shares a due time with a row before it)."""
    rows = [Fire(due, "skip", MISSED) for due in missed[:MISSED_ROWS]]
    if len(missed) > MISSED_ROWS:
        rows.append(Fire(missed[-1], "skip", MISSED_MORE, len(missed) - MISSED_ROWS))
    return rows


def refusal(policies: Policies, facts: FireFacts) -> tuple[str, str | None] | None:
    """The skip code (and the disable reason) for a due time that would run, or None."""
    if policies.max_runs is not None and facts.runs_started >= policies.max_runs:
        return MAX_RUNS, "schedule_definition.disabled.max_runs"
    usd_out = (
        policies.budget_usd is not None
        and facts.usd_spent is not None
        and facts.usd_spent >= policies.budget_usd
    )
    tokens_out = policies.budget_tokens is not None and facts.tokens_spent >= policies.budget_tokens
    if usd_out or tokens_out:
        return BUDGET, "schedule_definition.disabled.budget_exhausted"
    if policies.overlap == "skip" and facts.active_runs > 0:
        return OVERLAP, None
    return None


def overlap_refusal(policies: Policies, subject: str, active_run: str) -> tuple[str, str] | None:
    """For an event's run while ``active_run`` (of the same schedule, about the same
    ``subject``) has not ended: the skip code and a summary naming that run under
    ``--overlap skip``; None under ``allow`` (both run)."""
    if policies.overlap != "skip":
        return None
    return OVERLAP, f"run {active_run} for the same event key {subject!r} is still active"


def decide_fires(trigger: Trigger, policies: Policies, facts: FireFacts) -> FirePlan:
    """The rows for every due time up to ``facts.now`` and the schedule's next state.

    At most ``COUNT_CAP`` due times are looked at: after a longer outage the summary row
    counts that many (at least) and no due time counts as current."""
    if facts.now < facts.next_due_at:
        return FirePlan((), facts.next_due_at)
    dues = [facts.next_due_at, *due_between(trigger, facts.next_due_at, facts.now, COUNT_CAP)]
    latest = dues[-1]
    capped = len(dues) > COUNT_CAP
    current = latest if not capped and facts.now - latest <= policies.missed_grace else None
    missed = dues[:-1] if current is not None else dues
    runner = current
    if runner is None and policies.missed == "run_once" and missed:
        runner, missed = missed[-1], missed[:-1]
    fires = _missed_rows(missed)
    disable = None
    if runner is not None:
        refused = refusal(policies, facts)
        if refused is None:
            fires.append(Fire(runner, "run", RUN))
        else:
            fires.append(Fire(runner, "skip", refused[0]))
            disable = refused[1]
    upcoming = next_due(trigger, facts.now)
    if upcoming is None and disable is None:
        disable = "schedule_definition.disabled.spent"
    blind = policies.budget_usd is not None and facts.usd_spent is None
    return FirePlan(tuple(fires), upcoming, disable, blind)

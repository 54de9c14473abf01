"""The firing decision, table-driven and pure: current, missed (skip / run_once, the
summary row), overlap, max-runs, budget, a spent --at, and daylight saving."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from lirun.schedules.definition import Policies
from lirun.schedules.firing import (
    BUDGET,
    MAX_RUNS,
    MISSED,
    MISSED_MORE,
    OVERLAP,
    RUN,
    FireFacts,
    FirePlan,
    decide_fires,
)
from lirun.schedules.triggers import Trigger, at_trigger, cron_trigger, every_trigger

MINUTELY = every_trigger("1m", anchor=0)


def plan(trigger: Trigger, now: int, next_due_at: int = 60, **more: Any) -> FirePlan:
    policies = Policies(**{k: v for k, v in more.items() if k in Policies.__annotations__})
    facts = FireFacts(next_due_at=next_due_at, now=now, **{
        k: v for k, v in more.items() if k in FireFacts.__annotations__
    })  # fmt: skip
    result = decide_fires(trigger, policies, facts)
    dues = [f.due_at for f in result.fires]
    assert len(dues) == len(set(dues)), "two rows for one due time would collide"
    return result


def rows(result: FirePlan) -> list[tuple[int, str, str]]:
    return [(f.due_at, f.action, f.reason_code) for f in result.fires]


@pytest.mark.parametrize(
    ("now", "more", "expected", "next_due"),
    [(59, {}, [], 60),
     (60, {}, [(60, "run", RUN)], 120),
     (90, {}, [(60, "run", RUN)], 120),
     (121, {}, [(60, "skip", MISSED), (120, "run", RUN)], 180),
     (195, {"missed_grace": 10},
      [(60, "skip", MISSED), (120, "skip", MISSED), (180, "skip", MISSED)], 240),
     (195, {"missed_grace": 10, "missed": "run_once"},
      [(60, "skip", MISSED), (120, "skip", MISSED), (180, "run", RUN)], 240),
     (60, {"active_runs": 1}, [(60, "skip", OVERLAP)], 120),
     (60, {"active_runs": 1, "overlap": "allow"}, [(60, "run", RUN)], 120),
     (60, {"max_runs": 3, "runs_started": 3}, [(60, "skip", MAX_RUNS)], 120),
     (60, {"max_runs": 3, "runs_started": 2}, [(60, "run", RUN)], 120),
     (60, {"budget_tokens": 100, "tokens_spent": 100}, [(60, "skip", BUDGET)], 120),
     (60, {"budget_usd": 1.0, "usd_spent": 1.5}, [(60, "skip", BUDGET)], 120),
     (60, {"budget_usd": 1.0, "usd_spent": 0.5}, [(60, "run", RUN)], 120)],
)  # fmt: skip
def test_every_minute(
    now: int, more: dict[str, Any], expected: list[tuple[int, str, str]], next_due: int
) -> None:
    result = plan(MINUTELY, now, **more)
    assert rows(result) == expected
    assert result.next_due_at == next_due


@pytest.mark.parametrize(
    ("more", "disable"),
    [({"max_runs": 1, "runs_started": 1}, "schedule_definition.disabled.max_runs"),
     ({"budget_tokens": 5, "tokens_spent": 9}, "schedule_definition.disabled.budget_exhausted"),
     ({"active_runs": 2}, None), ({}, None)],
)  # fmt: skip
def test_what_disables_a_schedule(more: dict[str, Any], disable: str | None) -> None:
    assert plan(MINUTELY, 60, **more).disable_reason == disable


def test_a_usd_budget_cannot_see_runs_without_a_recorded_cost() -> None:
    result = plan(MINUTELY, 60, budget_usd=1.0)  # usd_spent None: Codex reports no cost
    assert rows(result) == [(60, "run", RUN)]
    assert result.budget_blind
    assert not plan(MINUTELY, 60).budget_blind


def test_a_long_outage_records_100_rows_then_one_summary() -> None:
    result = plan(MINUTELY, 150 * 60 + 5)  # due 60 .. 9000: 149 missed, 9000 current
    missed = [f for f in result.fires if f.reason_code == MISSED]
    summary = [f for f in result.fires if f.reason_code == MISSED_MORE]
    assert [f.due_at for f in missed] == [60 * k for k in range(1, 101)]
    assert [(f.due_at, f.count) for f in summary] == [(149 * 60, 49)]
    assert result.fires[-1].action == "run"
    assert result.fires[-1].due_at == 150 * 60


def test_run_once_after_an_outage_runs_the_latest_missed_time() -> None:
    result = plan(MINUTELY, 10 * 60 + 30, missed_grace=10, missed="run_once")
    assert [f.due_at for f in result.fires if f.action == "run"] == [600]
    assert len([f for f in result.fires if f.reason_code == MISSED]) == 9


def test_an_at_schedule_fires_once_then_is_spent() -> None:
    once = at_trigger("1970-01-01T00:05:00Z", None)
    on_time = plan(once, 300, next_due_at=300)
    assert rows(on_time) == [(300, "run", RUN)]
    assert on_time.next_due_at is None
    assert on_time.disable_reason == "schedule_definition.disabled.spent"
    late = plan(once, 9999, next_due_at=300, missed="run_once")  # its default missed policy
    assert rows(late) == [(300, "run", RUN)]


def test_dst_spring_forward_fires_once_and_moves_to_the_next_day() -> None:
    trigger = cron_trigger("30 2 * * *", "Europe/Berlin")
    due = int(datetime.fromisoformat("2026-03-29T03:00:00+02:00").timestamp())
    result = plan(trigger, due + 5, next_due_at=due)
    assert rows(result) == [(due, "run", RUN)]
    assert result.next_due_at == int(
        datetime.fromisoformat("2026-03-30T02:30:00+02:00").timestamp()
    )

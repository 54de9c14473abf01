"""The pages that list flows and shows, the needs-you page, and one schedule's page:
what each shows and its JSON twin returns, read from the Store (no HTML here)."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

from lirun.errors import LirunError
from lirun.lifecycle import policy_for
from lirun.schedules.actions import Action
from lirun.schedules.chains import DEFAULT_OUTCOME, STATUSES, verb
from lirun.schedules.triggers import EVENT_KINDS, Trigger, next_due
from lirun.schedules.worker import live_workers
from lirun.shows.decide import plays_needing_person
from lirun.store import Store
from lirun.store.rows import ScheduleRow, ScheduleRunRow
from lirun.store.ui_reads import RUN_KINDS
from lirun.ui.attention_facts import attention_items
from lirun.ui.run_rows import bounded_prompt, describe
from lirun.ui.views import (
    LIST_PROMPT_CHARS,
    PAGE_SIZE,
    STATUS_CHOICES,
    BadRequest,
    _number,
    cost_chart,
    duration,
    parse_cursor,
    schedule_run_href,
)

LIST_KEYS = ("status", "since")


def _list_query(
    params: Mapping[str, str], kind: str
) -> tuple[str | None, float | None, tuple[float, str] | None]:
    status = (params.get("status") or "").strip() or None
    if status is not None and status not in policy_for(kind).statuses:
        raise BadRequest(
            f"status={status!r} is not one of {', '.join(sorted(policy_for(kind).statuses))}"
        )
    return status, _number(params, "since"), parse_cursor(params.get("cursor"))


def _paged(rows: list[Any], params: Mapping[str, str]) -> dict[str, Any]:
    more = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    kept = {k: v for k, v in params.items() if k in LIST_KEYS and v}
    cursor = f"{rows[-1]['created_at']!r}~{rows[-1]['id']}" if more and rows else None
    return {
        "filters": kept,
        "next_cursor": cursor,
        "next_query": urlencode({**kept, "cursor": cursor}) if cursor else None,
        "first_page": not params.get("cursor"),
    }


def flows_view(store: Store, params: Mapping[str, str]) -> dict[str, Any]:
    """Flow invocations, newest first, 50 a page, by status and since."""
    status, since, cursor = _list_query(params, "invocation")
    rows = [r.as_dict() for r in store.lists.flows(status=status, since=since, before=cursor,
                                                 limit=PAGE_SIZE + 1)]  # fmt: skip
    now = time.time()
    flows = [
        {
            **row,
            **bounded_prompt(row, LIST_PROMPT_CHARS, f"/api/flows/{row['id']}"),
            "name": os.path.basename(str(row.get("skill") or "")) or "flow",
            "duration": duration(row, now),
            "href": f"/flows/{row['id']}",
        }
        for row in rows[:PAGE_SIZE]
    ]
    return {
        "flows": flows,
        **_paged(rows, params),
        "statuses": sorted(policy_for("invocation").statuses),
    }


def shows_view(store: Store, params: Mapping[str, str]) -> dict[str, Any]:
    """Shows, newest first, 50 a page, by status and since, each with its plays counted."""
    status, since, cursor = _list_query(params, "show")
    rows = store.lists.shows(status=status, since=since, before=cursor, limit=PAGE_SIZE + 1)
    now = time.time()
    shows = []
    for row in rows[:PAGE_SIZE]:
        plays, fields = row.plays, row.as_dict()
        shows.append(
            {
                **fields,
                "plays_total": sum(plays.values()),
                "plays_merged": plays.get("merged", 0),
                "plays_need_you": plays_needing_person(plays, row.status),
                "duration": duration(fields, now),
                "href": f"/shows/{row.id}",
            }
        )
    paged = _paged([row.as_dict() for row in rows], params)
    return {"shows": shows, **paged, "statuses": sorted(policy_for("show").statuses)}


def attention_view(store: Store, db_url: str | None) -> dict[str, Any]:
    """What needs a person now (the same list as ``li attention``)."""

    items = [item.to_dict() for item in attention_items(store, db_url, time.time())]
    return {"items": items, "count": len(items)}


NEXT_FIRES = 5
RAN_AND_ENDED = policy_for("schedule_run").terminal - {"skipped"}


def next_fires(row: ScheduleRow, count: int = NEXT_FIRES) -> list[int]:
    """The schedule's next due times from its stored one (none for a disabled one)."""

    due = row.next_due_at
    if due is None or row.status != "enabled":
        return []
    fires = [int(due)]
    try:
        trigger = Trigger.from_dict(row.trigger_json or {})
        while len(fires) < count:
            after = next_due(trigger, fires[-1])
            if after is None:
                break
            fires.append(after)
    except (LirunError, ValueError, TypeError):
        pass
    return fires


def schedule_view(store: Store, name: str) -> dict[str, Any] | None:
    """One schedule: its definition, next fires, its runs, success and cost over time."""

    row = store.schedules.get(name)
    if row is None:
        return None
    runs = [r.as_dict() for r in store.lists.schedule_runs_with_usage(row.id, limit=100)]
    for r in runs:
        r["href"] = schedule_run_href(r)
        # a skipped due time ran nothing: it has no duration (not 0.0 s)
        ran = r.get("ended_at") and r.get("status") != "skipped"
        r["duration"] = duration(r) if ran else None
    ended = [r for r in runs if r.get("status") in RAN_AND_ENDED]
    ok = [r for r in ended if r.get("status") == "completed"]
    costs = [float(r["cost_usd"]) for r in runs if r.get("cost_usd") is not None]
    oldest_first = list(reversed(runs))
    page = {
        "schedule": row.as_dict(),
        "action": _describe_action(row),
        "next_fires": next_fires(row),
        "live_workers": len(live_workers(store, time.time())),
        "runs": runs,
        "success_rate": (len(ok) / len(ended)) if ended else None,
        "ended": len(ended),
        "succeeded": len(ok),
        "cost_total_usd": sum(costs) if costs else None,
        "cost_per_run_usd": (sum(costs) / len(costs)) if costs else None,
        # bars only when a run cost something: a row of empty bars says nothing
        "chart": cost_chart(oldest_first) if any(c > 0 for c in costs) else [],
        "strip": oldest_first,
        "history": [t.as_dict() for t in store.list_transitions("schedule", row.id)],
    }
    kind = (row.trigger_json or {}).get("kind")
    if kind in EVENT_KINDS:
        page["events"] = _events(store, row, {str(r["id"]): r for r in runs})
    if kind == "chain":
        page["after"] = _after(store, row)
    return page


EVENTS_SHOWN = 50


def _events(store: Store, row: ScheduleRow, runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """An event schedule's events (newest 50) and the run each started; a chain's events
    also name the parent run whose end fired each (its key is the parent's id)."""
    seen, fired = store.events.count(row.id)
    chain = (row.trigger_json or {}).get("kind") == "chain"
    parents = (
        {p.id: p for p in store.events.chain_event_parents(row.id, limit=EVENTS_SHOWN)}
        if chain
        else {}
    )
    recent = []
    for e in store.events.list(row.id, limit=EVENTS_SHOWN):
        run = runs.get(e.schedule_run_id or "")
        entry = {
            "event_key": e.event_key,
            "seen_at": e.seen_at,
            "baseline": e.baseline,
            "schedule_run_id": e.schedule_run_id,
            "run_status": run.get("status") if run else None,
            "href": run.get("href") if run else None,
        }
        if chain:
            entry["parent"] = _parent(parents.get(e.event_key), e.event_key)
            entry["chain_depth"] = run.get("chain_depth") if run else None
        recent.append(entry)
    return {"seen": seen, "fired": fired, "recent": recent}


def _parent(parent: ScheduleRunRow | None, run_id: str) -> dict[str, Any]:
    """The parent run that fired a chain's event, linked to what it ran (status None:
    the parent's row is no longer recorded)."""
    if parent is None:
        return {"id": run_id, "status": None, "reason": None, "ended_at": None, "href": None}
    return {
        "id": parent.id,
        "status": parent.status,
        "reason": parent.status_reason_code,
        "ended_at": parent.ended_at,
        "href": schedule_run_href(parent.as_dict()),
    }


def _after(store: Store, row: ScheduleRow) -> dict[str, Any]:
    """A chain's trigger in words, its parent schedule linked (href None: it was deleted)."""
    trigger = row.trigger_json or {}
    name, outcome = str(trigger.get("after") or ""), str(trigger.get("outcome") or DEFAULT_OUTCOME)
    return {
        "schedule": name,
        "outcome": outcome,
        "verb": verb(outcome),
        "statuses": list(STATUSES.get(outcome, ())),
        "href": f"/schedules/{quote(name, safe='')}" if store.schedules.get(name) else None,
    }


def _describe_action(row: ScheduleRow) -> str:
    try:
        return str(Action.from_dict(row.action_json).describe())
    except (KeyError, TypeError, ValueError):
        return str(row.action_kind or "")


def show_runs_view(store: Store, params: Mapping[str, str]) -> dict[str, Any]:
    """The runs page with ``kind=show``: shows as rows of the runs table (a show is not an
    execution of its own, so the union of ``runs_page`` leaves it out; its plays are in)."""

    unknown = [k for k in ("provider", "until", "q") if params.get(k)]
    if unknown:
        raise BadRequest(f"kind=show cannot be filtered by {', '.join(unknown)}")
    data = shows_view(store, params)
    rows = [
        {
            "kind": "show",
            "id": s["id"],
            "status": s.get("status"),
            "reason_code": s.get("status_reason_code"),
            "reason_summary": s.get("status_reason_summary"),
            "label": s.get("topic"),
            "prompt": f"{s['plays_merged']}/{s['plays_total']} plays merged",
            "created_at": s.get("created_at"),
            "ended_at": s.get("ended_at"),
            "duration": s.get("duration"),
            "href": s["href"],
        }
        for s in data["shows"]
    ]
    runs = [{**row, **describe(row)} for row in rows]  # read as every row of the list
    kept = {"kind": "show", **data["filters"]}
    return {
        "runs": runs,
        "filters": kept,
        "next_cursor": data["next_cursor"],
        "next_query": urlencode({**kept, "cursor": data["next_cursor"]})
        if data["next_cursor"]
        else None,
        "first_page": data["first_page"],
        "statuses": STATUS_CHOICES,
        "kinds": (*RUN_KINDS, "show"),
    }

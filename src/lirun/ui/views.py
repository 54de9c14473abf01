"""What each page and its JSON twin show, read from the Store. No HTML here: the
templates render these dicts, and ``/api/...`` returns them as JSON."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

from lirun.flows.dag import dag_nodes
from lirun.flows.report import report_from_store
from lirun.lifecycle import policy_for, shown_kind
from lirun.schedules.worker import live_workers
from lirun.store import Store
from lirun.store.records import present_run
from lirun.store.rows import SessionRow
from lirun.store.ui_reads import RUN_KINDS, RunFilter
from lirun.teams.membership import PREAMBLE_MAX_CHARS
from lirun.ui.artifacts import artifacts_served, list_artifacts, runs_dir
from lirun.ui.evidence_view import explain_all
from lirun.ui.graph import flow_svg
from lirun.ui.liveness_view import liveness
from lirun.ui.run_rows import (
    bounded_prompt,
    command_text,
    describe,
    fold_schedules,
    gate_label,
    gate_shows,
)
from lirun.ui.transcript import read_transcript
from lirun.views.detail import run_work

PAGE_SIZE = 50
LIST_PROMPT_CHARS = 500  # of each prompt in a list; the run's own page has it whole
# ``kind=session``: the old word for a run, still read from a bookmarked address.
OLD_KINDS = {"session": "run"}
FILTER_KEYS = ("status", "kind", "provider", "since", "until", "q", "fold")
STATUS_CHOICES = sorted(
    {s for kind in RUN_KINDS for s in policy_for(kind).statuses}  # every status a run can have
)


# The longest query parameter read: a search, a provider, a date or a cursor a person or
# this page writes is far shorter. A longer one is refused (400) before it reaches SQL,
# where SQLite refuses a LIKE pattern over 50,000 bytes as "too complex" (a 500).
MAX_PARAM = 200


class BadRequest(ValueError):
    """A query parameter the page cannot use (the message says which and why)."""


def param(params: Mapping[str, str], name: str) -> str:
    """The stripped text of query parameter ``name`` ("" when absent); BadRequest when it
    is over MAX_PARAM characters or holds a NUL (which PostgreSQL text cannot hold)."""
    text = (params.get(name) or "").strip()
    if len(text) > MAX_PARAM:
        raise BadRequest(f"{name} is {len(text):,} characters long; at most {MAX_PARAM} are read")
    if "\x00" in text:
        raise BadRequest(f"{name} holds a NUL character")
    return text


def plausible_id(text: str) -> bool:
    """Whether a path's id could name a record: ids are short and hold no NUL, so any
    other is a 404 without a query (PostgreSQL refuses a NUL in text outright)."""
    return 0 < len(text) <= MAX_PARAM and "\x00" not in text


def _number(params: Mapping[str, str], name: str) -> float | None:
    text = param(params, name)
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is not None:
        if not math.isfinite(value):
            raise BadRequest(f"{name}={text!r} is not a finite number of epoch seconds")
        return value
    try:
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.timestamp()
    except (ValueError, OverflowError):
        raise BadRequest(
            f"{name}={text!r} is neither epoch seconds nor an ISO date such as 2026-01-31T12:00"
        ) from None


def parse_filter(params: Mapping[str, str]) -> RunFilter:
    """The runs page's filters from its query string; BadRequest for a bad value."""
    kind = OLD_KINDS.get(param(params, "kind"), param(params, "kind"))
    if kind and kind not in RUN_KINDS:
        raise BadRequest(f"kind={kind!r} is not one of {', '.join(RUN_KINDS)}")
    status = param(params, "status") or None
    if status is not None and status not in STATUS_CHOICES:
        raise BadRequest(f"status={status!r} is not a status any run kind has")
    return RunFilter(
        status=status,
        kinds=(kind,) if kind else (),
        provider=param(params, "provider") or None,
        since=_number(params, "since"),
        until=_number(params, "until"),
        text=param(params, "q") or None,
    )


def parse_cursor(text: str | None) -> tuple[float, str] | None:
    """``<created_at>~<id>`` → the keyset cursor; BadRequest when malformed."""
    text = param({"cursor": text or ""}, "cursor")
    if not text:
        return None
    at, sep, ident = text.partition("~")
    try:
        moment: float | None = float(at)
    except ValueError:
        moment = None
    if not sep or moment is None or not math.isfinite(moment):
        raise BadRequest(f"cursor={text!r} is not one this page made")
    return moment, ident


def run_href(row: Mapping[str, Any]) -> str:
    """Where a row of the runs page links: its own page, or its owner's."""
    kind, ident = row.get("kind"), str(row.get("id"))
    if kind == "invocation":
        return f"/flows/{ident}"
    if kind == "play":
        return f"/shows/{row.get('parent_id')}#play-{ident}"
    if kind == "schedule_run":  # what it ran, else (queued, skipped) its schedule
        made = {"run": "/runs/", "invocation": "/flows/", "show": "/shows/"}
        if row.get("made_id") and row.get("made_kind") in made:
            return f"{made[row['made_kind']]}{row['made_id']}"
        if row.get("parent_id"):
            return f"/schedules#schedule-{row['parent_id']}"
        return "/schedules"
    return f"/runs/{ident}"


def schedule_run_href(row: Mapping[str, Any]) -> str:
    """Where a ``schedule_runs`` row links: the run, flow or show it made, else its
    schedule."""
    made = next((k for k in ("session", "invocation", "show") if row.get(f"{k}_id")), None)
    return run_href(
        {
            "kind": "schedule_run",
            "parent_id": row.get("schedule_id"),
            "made_kind": shown_kind(made) if made else None,  # the session_id column: a run
            "made_id": row.get(f"{made}_id") if made else None,
        }
    )


def duration(row: Mapping[str, Any], now: float | None = None) -> float | None:
    """The recorded duration, else ended - created, else (still running) the time so far."""
    if row.get("duration_s") is not None:
        return float(row["duration_s"])
    start = row.get("created_at") or row.get("started_at")
    if start is None:
        return None
    end = row.get("ended_at") or (now if now is not None else time.time())
    return max(0.0, float(end) - float(start))


def runs_view(store: Store, params: Mapping[str, str]) -> dict[str, Any]:
    """One page of runs with the filters that chose it and the cursor of the next page."""
    flt = parse_filter(params)
    cursor = parse_cursor(params.get("cursor"))
    chars = LIST_PROMPT_CHARS + 1 + PREAMBLE_MAX_CHARS  # a team member's task after its preamble
    page = store.ui.runs_page(flt, before=cursor, limit=PAGE_SIZE + 1, prompt_chars=chars)
    more = len(page) > PAGE_SIZE
    rows = [r.as_dict() for r in page[:PAGE_SIZE]]  # the keys the API and pages show
    topics = {i: s.topic for i in gate_shows(rows) if (s := store.shows.get(i)) is not None}
    now = time.time()
    runs = []
    for row in rows:
        href = run_href(row)
        detail = "/api" + href if href.startswith(("/runs/", "/flows/")) else href
        described = {**row, **describe(row, topics)}
        described.pop("meta")  # read for the names above; not part of the row shown
        runs.append(
            {
                **described,
                **bounded_prompt(described, LIST_PROMPT_CHARS, detail),
                "href": href,
                "duration": duration(row, now),
            }
        )
    if params.get("fold") == "schedule":
        runs = fold_schedules(runs)
        for run in runs:
            if run.get("folded") and run.get("label"):
                run["href"] = f"/schedules/{quote(str(run['label']), safe='')}"
    kept = {k: OLD_KINDS.get(v, v) if k == "kind" else v for k, v in params.items() if v}
    kept = {k: v for k, v in kept.items() if k in FILTER_KEYS}
    next_cursor = f"{rows[-1]['created_at']!r}~{rows[-1]['id']}" if more and rows else None
    return {
        "runs": runs,
        "filters": kept,
        "next_cursor": next_cursor,
        "next_query": urlencode({**kept, "cursor": next_cursor}) if next_cursor else None,
        "first_page": cursor is None,
        "statuses": STATUS_CHOICES,
        "kinds": (*RUN_KINDS, "show"),  # kind=show: the shows (ui.list_views)
    }


def run_view(store: Store, run_id: str, runs: str | None = None) -> dict[str, Any] | None:
    """One execution: its row, history, evidence, artifacts (from its own directory under
    ``runs``, the real path of the runs directory, default this process's), usage,
    lineage, transcript."""

    session = store.sessions.get(run_id)
    if session is None:
        return None
    row = session.as_dict()  # as the record pages of every kind read it
    verification = session.artifact_verification_json or {}
    lineage = store.ui.run_lineage(run_id, session.invocation_id)
    usage_keys = (
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "cost_usd",
        "num_turns",
        "provider_retries",
    )

    shows = gate_shows([{"kind": "run", "meta": session.meta}])
    topics = {i: s.topic for i in shows if (s := store.shows.get(i)) is not None}
    return {
        "run": present_run(session),  # its reply: an agent's answer or a command's output
        "label": gate_label(session.meta, topics),  # a gate run: its play and show
        "liveness": liveness("session", session),
        "duration": duration(row),
        "transitions": [t.as_dict() for t in store.list_transitions("session", run_id)],
        "evidence": session.status_evidence_refs or [],
        "explained": explain_all(session.status_evidence_refs),
        "work": run_work(session),  # as li status ID says it
        "command_line": command_text(session.command_json),
        "verification": verification if isinstance(verification, dict) else {},
        "contract": session.artifact_contract_json or {},
        "artifacts": list_artifacts(runs or runs_dir(), session.id, session.artifacts_path),
        "artifacts_served": artifacts_served(
            runs or runs_dir(), session.id, session.artifacts_path
        ),
        "usage": {k: row[k] for k in usage_keys if row[k] is not None},
        "lineage": lineage.as_dict(),
        "play_of": _play_of(session),
        "transcript": read_transcript(row),
        "admin_events": [e.as_dict() for e in store.list_admin_events(run_id)],
    }


def _play_of(session: SessionRow) -> dict[str, Any] | None:
    """The play a show ran this execution for, from what the shows engine notes in its
    metadata (every attempt's work and every gate, not only the play's latest run)."""
    meta = session.meta
    if not (meta.get("play_id") and meta.get("show_id")):
        return None
    role = "gate" if meta.get("role") == "gate" else "work"
    keys = ("play_id", "show_id", "play", "attempt")
    return {**{k: meta.get(k) for k in keys}, "role": role}


def flow_view(store: Store, invocation_id: str) -> dict[str, Any] | None:
    """A flow (an invocation): its row, its legs as a report, and the leg graph."""

    flow = store.invocations.get(invocation_id)
    if flow is None:
        return None
    row = flow.as_dict()  # as the record pages of every kind read it
    sessions = store.waits.invocation_sessions(invocation_id)
    report = None
    nodes: list[Any] = []
    if flow.flow_json:
        try:
            report = report_from_store(store, invocation_id).to_dict()
            nodes = dag_nodes(report)
        except Exception:  # an older or foreign flow_json: the legs table still shows
            report = None
    links = {}
    for leg in (report or {}).get("legs", ()):
        if leg.get("session_id"):
            links[str(leg["id"])] = f"/runs/{leg['session_id']}"
    # A resumed flow's legs include those it reused from the invocation it resumed (run
    # there, not again here), first: they ran before the legs run here.
    ran_here = {session.id for session in sessions}
    reused = [
        (found, True)
        for leg in (report or {}).get("legs", ())
        if leg.get("reused") and leg.get("session_id") and leg["session_id"] not in ran_here
        if (found := store.sessions.get(str(leg["session_id"]))) is not None
    ]
    legs = []
    for session, was_reused in [*reused, *((s, False) for s in sessions)]:
        flow_meta = session.meta.get("flow")
        item = flow_meta.get("item") if isinstance(flow_meta, dict) else None  # a fan-out's
        reused_from = session.invocation_id if was_reused else None
        legs.append({**present_run(session), "item": item, "reused_from": reused_from})
    return {
        "flow": row,
        "liveness": liveness("invocation", flow),
        "file_name": os.path.basename(str(flow.skill or "")),
        "duration": duration(row),
        "report": report,
        "runs": legs,
        "sessions": legs,  # the old key of runs, deprecated (docs/ui.md)
        "svg": flow_svg(nodes, links) if nodes else None,
        "nodes": [
            {
                "id": n.id,
                "status": n.status,
                "depends_on": list(n.depends_on),
                "href": links.get(n.id),
            }
            for n in nodes
        ],
        "transitions": [t.as_dict() for t in store.list_transitions("invocation", invocation_id)],
    }


RAN_AND_ENDED = policy_for("schedule_run").terminal - {"skipped"}


def schedules_view(store: Store) -> dict[str, Any]:
    """Every schedule with its last runs (a strip of cells), their success rate and cost
    per run; a next fire time already past says whether a worker is live to fire it."""
    now = time.time()
    workers = len(live_workers(store, now))
    runs_by_schedule: dict[str, list[dict[str, Any]]] = {}
    for run in store.ui.recent_schedule_runs(per_schedule=30):
        runs_by_schedule.setdefault(str(run.schedule_id), []).append(run.as_dict())
    out = []
    for schedule in store.schedules.list_all():
        runs = runs_by_schedule.get(schedule.id, [])
        for r in runs:  # each cell opens the run, flow or show it made
            r["href"] = schedule_run_href(r)
        # Of the runs that ran and ended: a skipped due time ran nothing, so it is neither
        # a success nor a failure (the strip still shows it).
        ended = [r for r in runs if r.get("status") in RAN_AND_ENDED]
        ok = [r for r in ended if r.get("status") == "completed"]
        next_fire = schedule.next_due_at
        strip = list(reversed(runs))
        costs = [float(r["cost_usd"]) for r in runs if r.get("cost_usd") is not None]
        out.append(
            {
                **schedule.as_dict(),
                "recent": runs,
                "strip": strip,
                "next_fire": next_fire,
                "overdue": next_fire is not None and float(next_fire) < now,
                "success_rate": (len(ok) / len(ended)) if ended else None,
                "cost_usd": sum(costs) if costs else None,
                "cost_per_run_usd": sum(costs) / len(costs) if costs else None,
                "costed_runs": len(costs),
                "chart": cost_chart(strip) if any(c > 0 for c in costs) else [],
            }
        )
    return {"schedules": out, "live_workers": workers}


def cost_chart(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Bars for the schedules page's small chart, oldest first: each run's cost as a
    height from 2 to 24 px (the costliest run the tallest), coloured by its status."""
    top = max((float(r.get("cost_usd") or 0) for r in runs), default=0.0)
    return [
        {
            "x": 3 * i,
            "height": 2 + (22 * float(r.get("cost_usd") or 0) / top if top else 0),
            "status": r.get("status"),
            "cost_usd": r.get("cost_usd"),
        }
        for i, r in enumerate(runs)
    ]


def workers_view(store: Store) -> dict[str, Any]:
    """Live workers (heartbeat within their lease): host, pid, heartbeat age, what runs."""

    fields = ("id", "host", "pid", "started_at", "heartbeat_age", "concurrency", "transport")
    workers = []
    for live in live_workers(store, time.time()):
        w = live.as_dict()
        running = list(live.worker.running)  # schedule run ids
        workers.append(
            {**{k: w[k] for k in fields}, "running": running, "runs": _runs_of(store, running)}
        )
    return {"workers": workers}


def _runs_of(store: Store, ids: list[str]) -> list[dict[str, Any]]:
    """Schedule runs a worker runs, each linked to the run, flow or show it made (a
    schedule run has no page of its own)."""
    out = []
    for run_id in ids:
        row = store.schedules.get_run(run_id)
        out.append(
            {
                "id": run_id,
                "action_kind": row.action_kind if row else None,
                "status": row.status if row else None,
                "href": schedule_run_href(row.as_dict() if row else {"id": run_id}),
            }
        )
    return out

"""What needs a person (the needs-you page, ``li attention``): a pure decision over the
facts ``attention_facts.gather`` reads, so every rule is table-tested without a database.

An item is a state a person must act on, never a mere event: a play escalated or failing
its gate in a show still active (``shows.decide.play_needs_person``, which the shows list
asks too); a flow that failed and was not resumed; a schedule whose runs failed since it
last ran well; an ad-hoc run (``li submit``) that failed and was not retried, named by its
id and action; a schedule overdue with no live worker to fire it; a run queued longer than
a tenth of its start deadline with no worker claiming it; a poll schedule whose last poll
failed; a running record whose owner
died and that nobody reaped; an outcome still pending in a spool. Failures older than the
window (``since``) age out; states do not. Every ``do`` is a command that exits 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from lirun.errors import LirunError
from lirun.record.reap_schedule_runs import run_policies, start_deadline_of
from lirun.schedules.actions import Action
from lirun.schedules.events import OK as POLL_OK
from lirun.schedules.submit import worker_command
from lirun.shows.decide import play_needs_person
from lirun.store.rows import (
    AttentionFlowRow,
    AttentionPlayRow,
    AttentionQueuedRunRow,
    AttentionScheduleRunRow,
    ScheduleRow,
)
from lirun.visible import visible

# A due time this far in the past, with no live worker, is overdue (a worker fires within
# a second or two of a due time; a minute is no jitter).
OVERDUE_GRACE_SECONDS = 60.0
DEFAULT_WINDOW_SECONDS = 7 * 86400.0
# A queued run no worker claimed within this share of its start deadline is waiting on a
# person: a live, idle worker claims within a second, and by the deadline it fails.
UNCLAIMED_SHARE = 0.1
# An action's description is cut here (a command line or a prompt can be long).
ACTION_CHARS = 80
# The order of the page: what blocks work first.
KIND_ORDER = (
    "play",
    "dead_owner",
    "pending_outcome",
    "overdue_schedule",
    "poll_failed",
    "queued_run",
    "schedule",
    "submitted_run",
    "flow",
)


class Item(NamedTuple):
    """One thing that needs a person: what it is (``kind``, ``id``), a sentence saying
    what is wrong, since when, where to look (``href``) and the command that acts on it."""

    kind: str
    id: str
    what: str
    since: float | None
    href: str
    do: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self._asdict())


@dataclass(frozen=True, slots=True)
class Facts:
    """What the store and this machine say (rows as the store returns them)."""

    plays: list[AttentionPlayRow] = field(default_factory=list)
    flows: list[AttentionFlowRow] = field(default_factory=list)
    schedule_runs: list[AttentionScheduleRunRow] = field(default_factory=list)
    schedules: list[ScheduleRow] = field(default_factory=list)
    queued_runs: list[AttentionQueuedRunRow] = field(default_factory=list)
    live_workers: int = 0
    # {"kind": session|invocation|show, "id", "summary"}: running, owner judged dead
    dead_owners: list[dict[str, Any]] = field(default_factory=list)
    # {"run_id", "status", "reason_code", "spooled_at", "cause"}
    pending: list[dict[str, Any]] = field(default_factory=list)


def _reason(row: AttentionPlayRow | AttentionFlowRow | AttentionScheduleRunRow) -> str:
    code = row.status_reason_code
    summary = row.status_reason_summary
    if code and summary:
        return f"{code}: {summary}"
    return str(code or summary or "no reason recorded")


def _plays(facts: Facts) -> list[Item]:
    out = []
    for p in facts.plays:
        if not play_needs_person(p.status, p.show_status):
            continue
        verb = "escalated" if p.status == "escalated" else "failed its gate"
        out.append(
            Item(
                "play",
                str(p.id),
                f"play {p.name} of show {p.topic or p.show_id} {verb} ({_reason(p)})",
                p.updated_at,
                f"/shows/{p.show_id}#play-{p.id}",
                f"li show status {p.show_id}",
            )
        )
    return out


def _file_name(path: Any) -> str:
    """A flow by its file's name (``fan.yaml``), not the path it was run from."""
    return str(path or "").rstrip("/").rsplit("/", 1)[-1]


def _flows(facts: Facts) -> list[Item]:
    return [
        Item(
            "flow",
            str(f.id),
            f"flow {_file_name(f.skill) or f.id} {f.status} ({_reason(f)})",
            f.updated_at,
            f"/flows/{f.id}",
            f"li logs {f.id}; li flow resume {f.id}",  # what its legs wrote, then again
        )
        for f in facts.flows
    ]


def _action_text(action: dict[str, Any] | None) -> str:
    """An action as a person reads it (``run make nightly``), cut and escaped."""
    try:
        text = Action.from_dict(action or {}).describe()
    except (LirunError, KeyError, TypeError, ValueError):
        text = str((action or {}).get("kind") or "an unreadable action")
    text = visible(text)
    return text if len(text) <= ACTION_CHARS else text[: ACTION_CHARS - 1] + "…"


def _run_href(run: AttentionScheduleRunRow) -> str:
    """What an ad-hoc run made (its run, flow or show page), else the runs page showing
    it alone."""
    for made, page in (
        ("session_id", "/runs/"),
        ("invocation_id", "/flows/"),
        ("show_id", "/shows/"),
    ):
        if getattr(run, made):
            return f"{page}{getattr(run, made)}"
    return f"/?kind=schedule_run&q={run.id}"


def _submitted(run: AttentionScheduleRunRow) -> Item:
    """An ad-hoc run (``li submit``: no schedule) that failed: named by its id and action,
    acted on by its id (``li logs ID`` shows what it printed, through what it made)."""
    return Item(
        "submitted_run",
        str(run.id),
        f"submitted run {run.id} ({_action_text(run.action_json)}) {run.status} ({_reason(run)})",
        run.updated_at,
        _run_href(run),
        f"li logs {run.id}",
    )


def _schedule_failures(facts: Facts) -> list[Item]:
    """One item per schedule: its failed runs since it last completed one; one per
    failed ad-hoc run."""
    by_schedule: dict[str, list[AttentionScheduleRunRow]] = {}
    out = []
    for run in facts.schedule_runs:
        if run.schedule_id is None:
            out.append(_submitted(run))
        else:
            by_schedule.setdefault(str(run.schedule_id), []).append(run)
    for runs in by_schedule.values():
        runs.sort(key=lambda r: float(r.updated_at or 0), reverse=True)
        last, name = runs[0], runs[0].schedule_name or runs[0].schedule_id
        count = f"{len(runs)} runs" if len(runs) > 1 else "a run"
        out.append(
            Item(
                "schedule",
                str(last.id),
                f"schedule {name}: {count} failed since its last success; the last "
                f"{last.status} ({_reason(last)})",
                last.updated_at,
                f"/schedules/{name}",
                f"li logs {last.id}; li schedule runs {name}",
            )
        )
    return out


def _unclaimed(facts: Facts, now: float) -> list[Item]:
    """Queued runs no worker claimed within ``UNCLAIMED_SHARE`` of their start deadline:
    none is live, or those live cannot take it (busy, or another database)."""
    out = []
    for run in facts.queued_runs:
        policies = run_policies(run.schedule_id, run.policies_json, run.action_json)
        deadline = start_deadline_of(policies)
        waited = now - float(run.created_at)
        if waited <= deadline * UNCLAIMED_SHARE:
            continue
        if run.schedule_id is None:
            named = f"submitted run {run.id} ({_action_text(run.action_json)})"
            href = f"/?kind=schedule_run&q={run.id}"
        else:
            named = f"run {run.id} of schedule {run.schedule_name or run.schedule_id}"
            href = f"/schedules/{run.schedule_name}" if run.schedule_name else "/schedules"
        workers = (
            "no worker is live to claim it"
            if facts.live_workers == 0
            else f"none of the {facts.live_workers} live workers claimed it"
        )
        out.append(
            Item(
                "queued_run",
                str(run.id),
                f"{named} has been queued {waited:.0f} s and {workers}; it fails at its "
                f"start deadline ({deadline:.0f} s)",
                float(run.created_at),
                href,
                worker_command(run.action_json),
            )
        )
    return out


def _overdue(facts: Facts, now: float) -> list[Item]:
    if facts.live_workers > 0:
        return []
    out = []
    for s in facts.schedules:
        due = s.next_due_at
        if s.status != "enabled" or due is None:
            continue
        late = now - float(due)
        if late < OVERDUE_GRACE_SECONDS:
            continue
        out.append(
            Item(
                "overdue_schedule",
                s.id,
                f"schedule {s.name} was due {late:.0f} s ago and no worker is live to fire it",
                float(due),
                f"/schedules/{s.name}",
                "li worker",
            )
        )
    return out


def _poll_failures(facts: Facts) -> list[Item]:
    """An enabled poll schedule whose last poll failed: nothing fires until one succeeds
    (a state: it leaves the page at the next good poll)."""
    out = []
    for s in facts.schedules:
        reason = s.last_poll_reason
        if s.status != "enabled" or reason is None or reason == POLL_OK:
            continue
        out.append(
            Item(
                "poll_failed",
                s.id,
                f"schedule {s.name}: its last poll failed ({reason}): {s.last_poll_detail or ''}",
                s.last_poll_at,
                f"/schedules/{s.name}",
                f"li schedule show {s.name}",
            )
        )
    return out


def _dead(facts: Facts) -> list[Item]:
    """A running record whose owner is dead: ``li reap`` finalizes a run or a flow; a
    show is continued (``li show resume``), its plays' runs reaped on the way."""
    pages = {"session": "/runs/", "invocation": "/flows/", "show": "/shows/"}
    names = {"session": "run", "invocation": "flow", "show": "show"}
    out = []
    for d in facts.dead_owners:
        kind, ident = str(d["kind"]), str(d["id"])
        show = kind == "show"
        out.append(
            Item(
                "dead_owner",
                ident,
                f"{names.get(kind, kind)} {ident} is recorded running but "
                f"{d.get('summary') or 'its owner is gone'}; "
                + ("no process runs it" if show else "nobody reaped it"),
                d.get("since"),
                f"{pages.get(kind, '/runs/')}{ident}",
                f"li show resume {ident}" if show else "li reap",
            )
        )
    return out


def _pending(facts: Facts) -> list[Item]:
    return [
        Item(
            "pending_outcome",
            str(p["run_id"]),
            f"run {p['run_id']} ended {p.get('status')} ({p.get('reason_code')}) but its "
            f"outcome is still in a spool, not in the record"
            + (f": {p['cause']}" if p.get("cause") else ""),
            p.get("spooled_at"),
            f"/runs/{p['run_id']}",
            f"li status {p['run_id']}",
        )
        for p in facts.pending
    ]


def needs_you(facts: Facts, now: float) -> list[Item]:
    """Every item, in ``KIND_ORDER`` and newest first within a kind."""
    items = [
        *_plays(facts),
        *_dead(facts),
        *_pending(facts),
        *_overdue(facts, now),
        *_poll_failures(facts),
        *_unclaimed(facts, now),
        *_schedule_failures(facts),
        *_flows(facts),
    ]
    rank = {kind: i for i, kind in enumerate(KIND_ORDER)}
    return sorted(items, key=lambda i: (rank[i.kind], -(i.since or 0.0), i.id))

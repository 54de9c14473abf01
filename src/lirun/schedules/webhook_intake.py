"""A webhook delivery stored as an event and its queued run (docs/schedules.md,
"Webhook triggers"); the decisions are ``webhooks.py``'s, this is the I/O around them.

``receive`` finds the schedule, reads its secret from ``environ`` (``li ui``'s
environment; the database holds only the variable's name), checks the signature, and
stores the event through the unique key of ``schedule_events`` with its run in one
transaction (``store.events.record``, as a poll's events are): of any number of
deliveries of one event, concurrent or not, exactly one stores it; the others answer
with that run, marked duplicate. A refused request writes nothing. The stored run is
offered to the workers at once (PostgreSQL: the queue's NOTIFY wakes an idle worker).

``--overlap`` goes by the event's subject (the value at ``--key``, else the delivery
id): the same transaction reads the schedule's active runs about that subject, under a
lock per subject, and under ``skip`` stores the new run skipped
(``schedule.skipped.overlap``, its summary naming the active run). Two deliveries about
one pull request at once: exactly one runs.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from dataclasses import dataclass

from lirun.logs import get_logger
from lirun.schedules.definition import stored_definition
from lirun.schedules.firing import OVERLAP, RUN, FireFacts, overlap_refusal, refusal
from lirun.schedules.submit import offer
from lirun.schedules.transport import Transport
from lirun.schedules.webhooks import HookRefused, is_ping, parse_event, signature_ok
from lirun.store import Store

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Accepted:
    """What a delivery became: its run (None when a policy skipped it and the run row
    says why; see ``status``), its key, and whether an earlier delivery stored it."""

    schedule_run_id: str | None
    event_key: str
    duplicate: bool
    status: str  # queued, skipped, duplicate, or ping (GitHub's hello: nothing stored)

    def as_dict(self) -> dict[str, object]:
        return {
            "schedule_run_id": self.schedule_run_id,
            "event_key": self.event_key,
            "duplicate": self.duplicate,
            "status": self.status,
        }


def receive(
    store: Store,
    name: str,
    body: bytes,
    headers: Mapping[str, str],
    environ: Mapping[str, str],
    transport: Transport | None = None,
) -> Accepted:
    """Store one delivery to the hook of schedule ``name``; HookRefused (404 unknown or
    not a webhook schedule, 503 secret unset, 401 signature, 400 body, 409 disabled).
    The run is offered through ``transport`` (the caller's, open for many deliveries),
    else one opened for it."""
    row = store.schedules.get(name)
    definition = stored_definition(row) if row is not None else None
    if row is None or definition is None or definition.trigger.kind != "webhook":
        raise HookRefused(404, f"no webhook schedule named {name!r}")
    variable = definition.trigger.secret_env or ""
    secret = environ.get(variable, "")
    if not secret:
        raise HookRefused(
            503,
            f"the secret of hook {name!r} is not set: start li ui with the environment "
            f"variable {variable} holding it",
        )
    if not signature_ok(secret, body, headers):
        raise HookRefused(
            401,
            "missing or wrong signature: send X-Hub-Signature-256 (or X-Lirun-Signature) "
            "as sha256=<hex HMAC-SHA256 of the body with the secret>",
        )
    if is_ping(headers):
        return Accepted(None, "", False, "ping")
    event = parse_event(body, headers, definition.trigger.key)
    if row.status != "enabled":
        raise HookRefused(409, f"schedule {name!r} is {row.status}; nothing was stored")
    policies = definition.policies
    since = policies.budget_since(int(time.time()))
    usd, tokens = store.schedules.usage(row.id, since=since)
    facts = FireFacts(0, 0, 0, store.schedules.count_started_runs(row.id), usd, tokens)
    refused = refusal(policies, facts)
    subject = event.subject_key
    stored, run_id, status = store.events.record(
        schedule_id=row.id,
        event_key=event.key,
        event_json=event.to_json(),
        source="webhook",
        action_kind=row.action_kind,
        status="queued" if refused is None else "skipped",
        reason_code=RUN if refused is None else refused[0],
        subject_key=subject,
        overlap=functools.partial(overlap_refusal, policies, subject),
    )
    if not stored:
        seen = store.events.get(row.id, event.key)
        earlier = seen.schedule_run_id if seen is not None else None
        return Accepted(earlier, event.key, True, "duplicate")
    if status != "queued":
        why = refused[0] if refused is not None else OVERLAP
        log.info(f"hook {name} event={event.key} subject={subject}: skipped ({why})")
        return Accepted(run_id, event.key, False, "skipped")
    log.info(
        f"hook {name} event={event.key} run {run_id} queued",
        extra={"event": "schedule.fired", "run_id": run_id, "schedule": name},
    )
    if run_id is not None:
        offer(store, run_id, transport)
    return Accepted(run_id, event.key, False, "queued")

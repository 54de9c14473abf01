"""Queue one run now: ``li submit -- ACTION`` (no schedule) and ``li schedule fire NAME``.

Both insert a queued schedule run with no due time (unique by its id) and then offer it to
the store's transport, so an idle worker starts it at once. Once the row is committed the
run is queued, whatever follows: an offer that fails (the queue's database link lost, its
schema unreadable) is one warning, and a worker finds the run anyway (its transport polls
the table, or its periodic sweep offers queued runs that have no queue job). With no
worker live, ``li submit`` says so and names the command that starts one.

``li submit --key KEY`` keeps KEY with the run (unique across schedule runs): submitting
the same action with the same key again returns the first run instead of a second one.
"""

from __future__ import annotations

import json
import shlex
import time
import unicodedata
from typing import Any, NamedTuple

from lirun.errors import ConflictError, LirunError, UsageError
from lirun.logs import get_logger
from lirun.schedules import registry
from lirun.schedules.actions import Action
from lirun.schedules.definition import Policies
from lirun.schedules.live import live_workers
from lirun.schedules.transport import Transport, transport_for
from lirun.store import Store, open_store
from lirun.store.rows import ScheduleRunRow

log = get_logger(__name__)

# An idempotency key names a piece of work in a script (a ticket, a commit, a date): a
# short line of printable text, so it can be shown and typed back.
KEY_MAX_CHARS = 200


class Submission(NamedTuple):
    """What ``submit_once`` queued: the run, and whether this call made it (False: the run
    that already held the key was returned and nothing was queued)."""

    run: ScheduleRunRow
    created: bool


def worker_command(action: dict[str, Any] | None) -> str:
    """The command that starts a worker able to run ``action`` (an action as stored): one
    whose ``--allow-root`` holds the action's directory (gc runs in none)."""
    cwd = (action or {}).get("cwd")
    if not cwd or (action or {}).get("kind") == "gc":
        return "li worker"
    return f"li worker --allow-root {shlex.quote(str(cwd))}"


def live_worker_count(url: str | None) -> int | None:
    """How many workers are live now, or None when that cannot be read. Read on its own
    read-only connection, which fails at once where a writer's would wait out a lost
    database: the run is committed, and this only decides whether ``li submit`` says that
    no worker is live."""
    try:
        store = open_store(url, readonly=True)
        try:
            return len(live_workers(store, time.time()))
        finally:
            store.close()
    except LirunError as exc:
        log.debug(f"the live workers could not be read: {exc}")
        return None


def check_key(key: str) -> str:
    """``key`` if it can be an idempotency key; UsageError (exit 2) for an empty one, one
    longer than KEY_MAX_CHARS, or one with control, format or unassigned characters
    (invisible text, or bytes that are not valid UTF-8, which a retry could not repeat)."""
    if not key:
        raise UsageError("--key is empty; give a short text naming the work, e.g. --key build-1234")
    if len(key) > KEY_MAX_CHARS:
        raise UsageError(f"--key is {len(key)} characters long; give at most {KEY_MAX_CHARS}")
    bad = next((c for c in key if unicodedata.category(c).startswith("C")), None)
    if bad is not None:
        raise UsageError(
            f"--key {key!r} has the unprintable character {bad!r}; give printable text only"
        )
    return key


def offer(store: Store, run_id: str, transport: Transport | None = None) -> None:
    """Tell the workers about the committed run ``run_id`` at once (best effort), through
    ``transport`` (its caller's, kept open for many offers) or one opened for this."""
    try:
        if transport is not None:
            transport.enqueue(run_id)
            return
        transport = transport_for(store)
        try:
            transport.enqueue(run_id)
        finally:
            transport.close()
    except Exception as exc:  # the run is committed: a failed wake-up only delays its start
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        log.warning(
            f"run {run_id} is queued, but the workers could not be told at once ({first}); "
            "a worker finds it by its periodic look at the queued runs",
            extra={"event": "queue.offer_failed", "run_id": run_id},
        )


def _same_action(run: ScheduleRunRow, action_kind: str, stored: dict[str, object]) -> bool:
    # compared as stored (JSON: tuples are lists, keys sorted)
    return run.action_kind == action_kind and run.action_json == json.loads(json.dumps(stored))


def submit_once(
    store: Store,
    action: Action,
    *,
    key: str | None = None,
    actor: str | None = None,
    policies: Policies | None = None,
) -> Submission:
    """Queue ``action`` as an ad-hoc run (a schedule run with no schedule). ``policies``
    (``--start-deadline``, ``--retries``, ``--notify``) are kept with the run's action,
    so its retries carry them too. With ``key``, a run that already holds it is returned
    (created False) if it has the same action and policies, and ConflictError (exit 2)
    if not; nothing is queued either way."""
    stored = action.to_dict()
    if policies is not None and policies != Policies():
        stored["policies"] = policies.to_dict()
    run, created = store.schedules.insert_keyed_run(
        action_kind=action.kind,
        action=stored,
        key=None if key is None else check_key(key),
        source="user",
        actor=actor,
    )
    if not created:
        if not _same_action(run, action.kind, stored):
            raise ConflictError(
                f"--key {key!r} was given to run {run.id} with another action or other "
                "options; nothing was queued: use a new key for different work"
            )
        return Submission(run, False)
    offer(store, run.id)
    return Submission(run, True)


def submit(
    store: Store,
    action: Action,
    *,
    actor: str | None = None,
    policies: Policies | None = None,
) -> ScheduleRunRow:
    """Queue ``action`` as a new ad-hoc run (``submit_once`` without a key)."""
    return submit_once(store, action, actor=actor, policies=policies).run


def fire_now(store: Store, name: str, *, actor: str | None = None) -> ScheduleRunRow:
    """Queue one run of the schedule ``name`` now (no due time: it never collides with
    a due-time run). NotFoundError (exit 2) for an unknown name; UsageError for an event
    schedule (poll, webhook, chain: its action is for an event, and firing by hand has none)."""

    schedule = registry.find(store, name)
    kind = (schedule.trigger_json or {}).get("kind")
    if kind in ("poll", "webhook", "chain"):
        source = {
            "poll": "new item its poll finds",
            "webhook": "signed request to its hook",
            "chain": "run of its parent that ends (--after)",
        }[kind]
        raise UsageError(
            f"{name} runs once per {source} (its action reads the event); "
            "it cannot be fired by hand: send it the event"
        )
    row = store.schedules.insert_queued_run(
        action_kind=schedule.action_kind,
        schedule_id=schedule.id,
        reason_summary="li schedule fire",
        source="user",
        actor=actor,
    )
    offer(store, row.id)
    return row

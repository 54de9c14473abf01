"""Events a schedule reacts to (docs/schedules.md, "Poll triggers"). Pure: no I/O.

A poll command prints a JSON array of objects, or JSON lines of objects; each object is
an event, identified by its key: the value at ``--key`` (a dotted path such as
``pull_request.number``), which must be a string, number or boolean. ``parse_poll_output``
turns the printed text into ``Event`` values, or raises ``PollFailure`` with the reason
code the schedule records (``schedule.poll.bad_output``) and a detail naming the item.
The store decides which events are new (``store.schedules.record_event``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from lirun.errors import UsageError
from lirun.schedules.shrinking import TRUNCATED, compact, shrink

DEFAULT_KEY = "id"
# The bound of one stored event (schedule_events.event_json, schedule_runs.event_json,
# TEXT on both dialects). It is also LIRUN_EVENT, one environment string of the run's
# process, and Linux refuses to start a process with one longer than 128 KiB.
MAX_EVENT_BYTES = 64 * 1024
MAX_KEY_CHARS = 512
FAILED_EXIT = "schedule.poll.failed_exit"
TIMED_OUT = "schedule.poll.timed_out"
BAD_OUTPUT = "schedule.poll.bad_output"
OK = "schedule.poll.ok"
_PATH_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


class PollFailure(Exception):
    """A poll that fired nothing: ``reason`` (a registered code) and ``detail``."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Event:
    """One event: its ``key`` (what makes it once: a poll item's key, a webhook's
    delivery id, a parent run's id), its ``data``, and its ``subject`` when that
    differs from the key (a webhook delivery's value at ``--key``: the pull request two
    deliveries are both about), which ``--overlap`` goes by."""

    key: str
    data: dict[str, Any]
    subject: str | None = None

    @property
    def subject_key(self) -> str:
        """What the event is about: its subject, else its key."""
        return self.subject if self.subject is not None else self.key

    def to_json(self) -> str:
        """The event as stored and as ``LIRUN_EVENT``: compact JSON, at most
        MAX_EVENT_BYTES. A larger one is shrunk (``shrinking.shrink``: its largest values
        dropped, their paths listed in ``_truncated``); one that cannot be keeps only
        its key."""
        shrunk = shrink(self.data, MAX_EVENT_BYTES)
        if shrunk is not None:
            return compact(shrunk)
        return compact({"_key": self.key, TRUNCATED: True})


def check_key_path(path: str) -> tuple[str, ...]:
    """``pull_request.number`` → ("pull_request", "number"); UsageError for an empty
    path, an empty segment or characters other than letters, digits, ``_`` and ``-``."""
    parts = tuple(str(path).split("."))
    if not path or any(not p or not set(p) <= _PATH_CHARS for p in parts):
        raise UsageError(
            f"--key {path!r} is not a field path; give field names joined by dots, "
            "e.g. number or pull_request.number"
        )
    return parts


def key_of(item: dict[str, Any], path: tuple[str, ...]) -> str | None:
    """The text of the scalar at ``path`` in ``item``; None when missing or not a scalar."""
    value: Any = item
    for part in path:
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str) and str(value) != "":
        text = str(value)
        return text if len(text) <= MAX_KEY_CHARS else None
    return None


def _items(text: str) -> list[Any]:
    stripped = text.strip()
    if not stripped:
        return []
    if stripped.startswith("["):
        try:
            value = json.loads(stripped)
        except ValueError as exc:
            raise PollFailure(BAD_OUTPUT, f"output is not JSON: {exc}") from None
        return list(value) if isinstance(value, list) else [value]
    items = []
    for number, line in enumerate(stripped.splitlines(), 1):
        if not line.strip():
            continue
        try:
            items.append(json.loads(line))
        except ValueError as exc:
            raise PollFailure(
                BAD_OUTPUT, f"line {number} is not JSON: {exc}; print a JSON array or JSON lines"
            ) from None
    return items


def parse_poll_output(text: str, key: str = DEFAULT_KEY) -> list[Event]:
    """The events in a poll's standard output, in the order printed (a key printed twice
    counts once: its first item). PollFailure when any item is not an object or has no
    scalar at ``key``: a partial answer fires nothing, the next good poll fires it all."""
    path = check_key_path(key)
    events: list[Event] = []
    seen: set[str] = set()
    for index, item in enumerate(_items(text)):
        if not isinstance(item, dict):
            raise PollFailure(
                BAD_OUTPUT, f"item {index} is {type(item).__name__}, not a JSON object"
            )
        found = key_of(item, path)
        if found is None:
            raise PollFailure(BAD_OUTPUT, f"item {index} has no text or number at key {key!r}")
        if found not in seen:
            seen.add(found)
            events.append(Event(found, item))
    return events

"""A schedule definition: its name, trigger, action and policies, as one checked value.

Stored as columns of ``schedules`` (``trigger_json``, ``action_json``, ``policies_json``)
and compared field by field by ``li schedule apply``. Every check happens when the value
is built, so an invalid definition never reaches the database.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from lirun.errors import UsageError
from lirun.schedules.actions import Action
from lirun.schedules.durations import format_duration, parse_duration
from lirun.schedules.triggers import Trigger
from lirun.store.rows import ScheduleRow

NAME_EXAMPLE = "nightly-review"
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
MAX_NAME = 64
OVERLAP = ("skip", "allow")
MISSED = ("skip", "run_once")
DEFAULT_START_DEADLINE = 3600
DEFAULT_MISSED_GRACE = 60
# What one definition may take in the database as JSON (its row holds it, and each change
# of it a history row): a prompt or command past this belongs in a file (--playbook, a
# script), not in the record of every change.
MAX_STORED_BYTES = 64 * 1024


def check_name(name: str) -> str:
    """1 to 64 of ``A-Z a-z 0-9 . _ -``, starting with a letter or digit."""
    if (
        not isinstance(name, str)
        or not name
        or len(name) > MAX_NAME
        or not set(name) <= _NAME_CHARS
        or not name[0].isalnum()
    ):
        raise UsageError(
            f"schedule name {name!r} is not valid: use 1-{MAX_NAME} of A-Z a-z 0-9 . _ -, "
            f"starting with a letter or digit (e.g. {NAME_EXAMPLE})"
        )
    return name


@dataclass(frozen=True, slots=True)
class Policies:
    """How a schedule fires. Durations in seconds; None means no limit.

    ``overlap``: skip a due time while a run of this schedule is active, or allow it;
    an event's run, while a run about the same event key (its subject) is active.
    ``missed``: a due time no worker fired within ``missed_grace`` is skipped (recorded)
    or run once for the latest missed time. ``max_runs``: runs that started.
    ``budget_usd`` / ``budget_tokens``: the schedule's recorded usage, over its life or
    the last ``budget_window``. ``start_deadline``: a queued run not started by then
    fails. ``retries``: new attempts for runs the record marks retryable. ``notify``: a
    shell command run after each run ends."""

    overlap: str = "skip"
    missed: str = "skip"
    max_runs: int | None = None
    budget_usd: float | None = None
    budget_tokens: int | None = None
    budget_window: int | None = None
    start_deadline: int = DEFAULT_START_DEADLINE
    retries: int = 0
    notify: str | None = None
    missed_grace: int = DEFAULT_MISSED_GRACE

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in POLICY_KEYS}

    def budget_since(self, now: int) -> int:
        """Where the usage the budgets count starts: ``now`` less the window, else the
        schedule's whole life (0)."""
        return now - self.budget_window if self.budget_window else 0

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Policies:
        return cls(**{k: v for k, v in data.items() if k in POLICY_KEYS})


POLICY_KEYS = (
    "overlap",
    "missed",
    "max_runs",
    "budget_usd",
    "budget_tokens",
    "budget_window",
    "start_deadline",
    "retries",
    "notify",
    "missed_grace",
)
DURATION_POLICIES = ("budget_window", "start_deadline", "missed_grace")


def _count(value: Any, what: str, minimum: int) -> int:
    if isinstance(value, bool):
        value = None
    try:
        number = int(str(value), 10)
    except (TypeError, ValueError):
        number = minimum - 1
    if number < minimum:
        raise UsageError(f"{what} {value!r}: expected a whole number >= {minimum}, e.g. 3")
    return number


def _seconds(value: Any, what: str) -> int:
    """DURATION text, or whole seconds (an apply file's ``start_deadline: 90``)."""
    return parse_duration(value, what)


def _usd(value: Any) -> float:
    try:
        number = float(str(value)) if not isinstance(value, bool) else -1.0
    except ValueError:
        number = -1.0
    if not 0 < number < float("inf"):
        raise UsageError(f"--budget-usd {value!r}: expected a positive amount, e.g. 5 or 2.50")
    return number


def _choice(value: Any, what: str, choices: tuple[str, ...]) -> str:
    text = str(value).replace("-", "_")
    if text not in choices:
        raise UsageError(f"{what} {value!r}: expected one of {', '.join(choices)}")
    return text


def make_policies(raw: dict[str, Any], trigger: Trigger | None) -> Policies:
    """Policies from option values as typed (text or numbers; durations as DURATION text
    or whole seconds); unset keys get their defaults (``missed`` is ``run_once`` for an
    ``at`` trigger: a one-off missed by an outage should still happen). ``trigger`` is
    None for an ad-hoc run (``li submit``), which has only the run policies."""
    unknown = sorted(set(raw) - set(POLICY_KEYS))
    if unknown:
        raise UsageError(f"unknown policy {', '.join(unknown)}; known: {', '.join(POLICY_KEYS)}")
    values: dict[str, Any] = {
        "missed": "run_once" if trigger is not None and trigger.kind == "at" else "skip"
    }
    for key, value in raw.items():
        if value is None:
            continue
        option = "--" + key.replace("_", "-")
        if key in DURATION_POLICIES:
            values[key] = _seconds(value, option)
        elif key == "overlap":
            values[key] = _choice(value, option, OVERLAP)
        elif key == "missed":
            values[key] = _choice(value, option, MISSED)
        elif key == "budget_usd":
            values[key] = _usd(value)
        elif key == "notify":
            if not isinstance(value, str) or not value.strip():
                raise UsageError(f"{option}: give a shell command, e.g. 'notify-send done'")
            values[key] = value
        else:
            values[key] = _count(value, option, 0 if key == "retries" else 1)
    policies = Policies(**values)
    if policies.budget_window is not None and not (
        policies.budget_usd is not None or policies.budget_tokens is not None
    ):
        raise UsageError("--budget-window needs --budget-usd or --budget-tokens to apply to")
    return policies


@dataclass(frozen=True, slots=True)
class Definition:
    """One schedule as its owner wrote it; ``enabled`` is the state the owner asked for."""

    name: str
    trigger: Trigger
    action: Action
    policies: Policies = field(default_factory=Policies)
    enabled: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "trigger": self.trigger.to_dict(),
            "action": self.action.to_dict(),
            "policies": self.policies.to_dict(),
            "enabled": self.enabled,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Definition:
        return cls(
            name=data["name"],
            trigger=Trigger.from_dict(data["trigger"]),
            action=Action.from_dict(data["action"]),
            policies=Policies.from_dict(data.get("policies") or {}),
            enabled=bool(data.get("enabled", True)),
        )

    @classmethod
    def from_row(cls, row: ScheduleRow) -> Definition:
        """The definition a stored schedule holds (JSON columns decoded by the store)."""
        return cls(
            name=row.name,
            trigger=Trigger.from_dict(row.trigger_json),
            action=Action.from_dict(row.action_json),
            policies=Policies.from_dict(row.policies_json or {}),
            enabled=row.status != "disabled",
        )


def check_stored_size(definition: Definition) -> None:
    """UsageError when ``definition`` would be stored as more than MAX_STORED_BYTES."""
    size = len(json.dumps(definition.to_dict()))
    if size > MAX_STORED_BYTES:
        raise UsageError(
            f"the definition would be stored as {size:,} bytes, more than the "
            f"{MAX_STORED_BYTES:,}-byte bound of a schedule; put a long prompt in a "
            "playbook (--playbook) and a long command in a script"
        )


def stored_definition(row: ScheduleRow) -> Definition | None:
    """The row's definition, or None for a row that holds none (imported from an older
    store, whose schedules had no trigger or action columns)."""
    if not isinstance(row.trigger_json, dict) or not isinstance(row.action_json, dict):
        return None
    try:
        return Definition.from_row(row)
    except (KeyError, TypeError, ValueError):
        return None


def describe_policies(policies: Policies) -> str:
    """The policies that differ from the defaults, as ``--option value`` text."""
    parts = []
    defaults = Policies()
    for key in POLICY_KEYS:
        value = getattr(policies, key)
        if value == getattr(defaults, key):
            continue
        shown = format_duration(value) if key in DURATION_POLICIES else value
        parts.append(f"--{key.replace('_', '-')} {shown}")
    return " ".join(parts)


def diff(old: Definition, new: Definition) -> dict[str, list[Any]]:
    """``{"trigger": [old, new], "policies.retries": [0, 2], …}`` for what changed (the
    ``every`` anchor is the schedule's own and never a change)."""
    changes: dict[str, list[Any]] = {}
    old_trigger, new_trigger = old.trigger.to_dict(), new.trigger.to_dict()
    if old.trigger.kind == new.trigger.kind and new.trigger.kind in ("every", "poll"):
        new_trigger["anchor"] = old_trigger.get("anchor")
    if old_trigger != new_trigger:
        changes["trigger"] = [old.trigger.describe(), new.trigger.describe()]
    old_action, new_action = old.action.to_dict(), new.action.to_dict()
    for key in sorted(set(old_action) | set(new_action)):
        if old_action.get(key) != new_action.get(key):
            changes[f"action.{key}"] = [old_action.get(key), new_action.get(key)]
    for key in POLICY_KEYS:
        if getattr(old.policies, key) != getattr(new.policies, key):
            changes[f"policies.{key}"] = [getattr(old.policies, key), getattr(new.policies, key)]
    if old.enabled != new.enabled:
        changes["enabled"] = [old.enabled, new.enabled]
    return changes

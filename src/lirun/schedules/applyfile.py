"""The declarative file of ``li schedule apply FILE``: every schedule the store should hold.

::

    missing: disable          # stored schedules not in this file: disable (default),
                              # delete (soft) or keep
    schedules:
      - name: nightly-review
        cron: "30 2 * * *"    # or every: 1h30m, or at: "2026-12-24T18:00:00+01:00"
        tz: Europe/Berlin     # cron: default this machine's zone (stored by name)
        action: agent claude "Review the open pull requests" --timeout 1800
        cwd: ../repo          # relative to this file; default: this file's directory
        require_change: false # true: completed needs a change or an artifact (run, agent)
        overlap: skip         # the policies of `li schedule add`, by the same names
        retries: 1
        enabled: true

``action`` is the ACTION of ``li schedule add`` after ``--``, as one string (split like
a shell would) or as a list of words. Unknown keys, a duplicate name and every invalid
value are errors naming ``file:line``; nothing is written unless the whole file is valid.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from pathlib import Path
from typing import Any

from lirun.errors import UsageError
from lirun.schedules.actions import Action, parse_action
from lirun.schedules.definition import (
    POLICY_KEYS,
    Definition,
    check_name,
    check_stored_size,
    make_policies,
)
from lirun.schedules.event_action import check_templates
from lirun.schedules.events import check_key_path
from lirun.schedules.registry import MISSING
from lirun.schedules.triggers import EVENT_KINDS, parse_trigger
from lirun.yamlfile.lines import read_yaml, where
from lirun.yamlfile.problems import did_you_mean

TOP_KEYS = frozenset({"schedules", "missing"})
# The trigger's text fields besides ``key``, as parse_trigger names them.
TRIGGER_TEXTS = ("cron", "every", "at", "tz", "poll", "poll_timeout", "secret_env", "after")
ENTRY_KEYS = frozenset(
    {
        "name",
        "cron",
        "every",
        "at",
        "poll",
        "key",
        "backfill",
        "poll_timeout",
        "webhook",
        "secret_env",
        "after",
        "tz",
        "action",
        "cwd",
        "enabled",
        "require_change",
        *POLICY_KEYS,
    }
)


@dataclass(frozen=True, slots=True)
class ApplyFile:
    path: str
    definitions: tuple[Definition, ...]
    missing: str
    places: dict[str, str] = field(default_factory=dict)  # name -> file:line of its after:


def _unknown(path: Path, node: Any, allowed: frozenset[str], what: str) -> None:
    unknown = [k for k in node if k not in allowed]
    if unknown:
        raise UsageError(
            f"{where(path, node, unknown[0])}: unknown {what} key {str(unknown[0])!r}"
            f"{did_you_mean(unknown[0], allowed)} (allowed: {', '.join(sorted(allowed))})"
        )


def load_apply_file(file: str, *, now: int, local_zone: str | None = None) -> ApplyFile:
    """Every definition in ``file``, checked; UsageError with ``file:line`` otherwise.

    ``local_zone`` is the zone of a cron entry without ``tz`` (default: this machine's).
    An ``at`` time in the past is not refused here: a one-off that has fired may stay in
    the file (``registry.plan`` refuses it for a schedule it would create)."""
    path = Path(file).resolve()
    data = read_yaml(path)
    _unknown(path, data, TOP_KEYS, "top-level")
    missing = data.get("missing", "disable")
    if missing not in MISSING:
        raise UsageError(
            f"{where(path, data, 'missing')}: missing: {missing!r}; "
            f"expected one of {', '.join(MISSING)}"
        )
    entries = data.get("schedules")
    if not isinstance(entries, list):
        raise UsageError(
            f"{where(path, data, 'schedules')}: schedules: must be a list of schedules "
            "(- name: ..., cron: ..., action: ...)"
        )
    seen: dict[str, str] = {}
    places: dict[str, str] = {}  # each schedule's file:line, for registry.plan's errors
    definitions = []
    for entry in entries:
        definition = _entry(path, entry, now, local_zone)
        here = where(path, entry)
        if definition.name in seen:
            raise UsageError(
                f"{here}: schedule {definition.name!r} is defined twice "
                f"(first at {seen[definition.name]})"
            )
        seen[definition.name] = here
        places[definition.name] = where(path, entry, "after" if "after" in entry else "name")
        definitions.append(definition)
    return ApplyFile(str(path), tuple(definitions), missing, places)


def _entry(path: Path, entry: Any, now: int, local_zone: str | None) -> Definition:
    if not isinstance(entry, dict):
        raise UsageError(f"{path}: each item of schedules: must be a mapping with name:")
    _unknown(path, entry, ENTRY_KEYS, "schedule")
    try:
        name = check_name(entry.get("name"))  # type: ignore[arg-type]
    except UsageError as exc:
        raise UsageError(f"{where(path, entry, 'name')}: {exc}") from None
    key = "name"
    try:
        trigger_keys = (
            "poll", "webhook", "cron", "every", "at", "key", "backfill", "poll_timeout",
            "secret_env", "after",
        )  # fmt: skip
        key = next((k for k in trigger_keys if k in entry), "name")
        backfill = entry.get("backfill", False)
        if not isinstance(backfill, bool):
            key = "backfill"
            raise UsageError(f"backfill: {backfill!r}; expected true or false")
        webhook = entry.get("webhook", False)
        if not isinstance(webhook, bool):
            key = "webhook"
            raise UsageError(f"webhook: {webhook!r}; expected true or false")
        texts: dict[str, str | None] = {}
        for field_name in (*TRIGGER_TEXTS, "key"):
            key = field_name if field_name in entry else key
            texts[field_name] = _text(entry, field_name)
        if texts["key"] is not None and (webhook or "poll" in entry):
            key = "key"  # the field path: named at its own line, not the poll:'s
            check_key_path(texts["key"])
        key = next((k for k in trigger_keys if k in entry), "name")
        trigger = parse_trigger(
            cron=texts["cron"],
            every=texts["every"],
            at=texts["at"],
            tz=texts["tz"],
            now=now,
            local_zone=local_zone,
            poll=texts["poll"],
            key=texts["key"],
            backfill=backfill,
            poll_timeout=texts["poll_timeout"],
            webhook=webhook,
            secret_env=texts["secret_env"],
            after=texts["after"],
        )
        key = "action"
        action = parse_action(_words(entry.get("action")), base=_base(path, entry))
        key = "require_change"
        action = _require_change(action, entry.get("require_change", False))
        key = next((k for k in POLICY_KEYS if k in entry), "name")
        policies = make_policies({k: entry[k] for k in POLICY_KEYS if k in entry}, trigger)
        key = "enabled"
        enabled = entry.get("enabled", True)
        if not isinstance(enabled, bool):
            raise UsageError(f"enabled: {enabled!r}; expected true or false")
        key = "action"
        definition = Definition(name, trigger, action, policies, enabled)
        check_templates(action, has_events=trigger.kind in EVENT_KINDS)
        check_stored_size(definition)
    except UsageError as exc:
        raise UsageError(f"{where(path, entry, key)}: schedule {name!r}: {exc}") from None
    return definition


def _require_change(action: Action, value: Any) -> Action:
    """``require_change: true``: a run (or agent) action completes only with a change in
    its cwd or a produced artifact, as ``run --require-change`` says in the action."""
    if not isinstance(value, bool):
        raise UsageError(f"require_change: {value!r}; expected true or false")
    if not value:
        return action
    if action.task is None:
        raise UsageError(
            f"require_change: applies to run and agent actions; for a {action.kind} "
            f"action give require_change: true to the legs or plays in its file"
        )
    return replace(action, task=replace(action.task, require_change=True))


def _text(entry: dict[str, Any], key: str) -> str | None:
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, (datetime, date)):
        raise UsageError(f"{key}: quote the time so YAML keeps it as written, e.g. '{value}'")
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise UsageError(f"{key}: must be text, not {type(value).__name__}")
    return str(value)


def _words(action: Any) -> list[str]:
    if isinstance(action, str):
        try:
            return shlex.split(action)
        except ValueError as exc:
            raise UsageError(f"action: cannot split {action!r} into words: {exc}") from None
    if (
        isinstance(action, list)
        and action
        and all(isinstance(w, (str, int, float)) for w in action)
    ):
        return [str(w) for w in action]
    raise UsageError(
        "action: give the ACTION as in `li schedule add` after --, as a string or a list, "
        "e.g. action: run make nightly"
    )


def _base(path: Path, entry: dict[str, Any]) -> str:
    cwd = entry.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise UsageError("cwd: must be a directory path")
    return str((path.parent / (cwd or ".")).resolve())

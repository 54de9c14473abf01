"""The event in the work an event schedule starts (docs/schedules.md, "The event").

An event schedule's prompt, command arguments and cwd are templates over ``event`` (the
item that fired it: ``{{ event.number }}``), rendered with the flows' bounded, sandboxed
engine (``flows/templates.py``) when its run starts. ``check_templates`` runs at ``li
schedule add`` / ``apply``: a template that cannot be parsed, or reads a name other than
``event``, is refused on an event schedule; on any other schedule braces are plain text,
except that reading ``event`` is refused (nothing could fill it). Pure: no I/O.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from lirun.errors import UsageError
from lirun.flows.templates import TemplateError, references, render
from lirun.schedules.actions import Action

EVENT_NAME = "event"
_MARKS = ("{{", "{%", "{#")


def _texts(action: Action) -> list[tuple[str, str]]:
    """(where, text) of every place a template may be: the prompt, each argument, cwd."""
    found = [("cwd", action.cwd)]
    task = action.task
    if task is not None and task.prompt is not None:
        found.append(("prompt", task.prompt))
    if task is not None and task.run is not None:
        found.extend((f"argument {i + 1}", arg) for i, arg in enumerate(task.run))
    return found


def check_templates(action: Action, *, has_events: bool) -> None:
    """UsageError (one line naming where) for a template the schedule could not render."""
    for where, text in _texts(action):
        if not any(mark in text for mark in _MARKS):
            continue
        try:
            names = set(references(text).names)
        except TemplateError as exc:
            if has_events:
                raise UsageError(f"the action's {where}: {exc}") from None
            continue
        if not has_events and EVENT_NAME in names:
            raise UsageError(
                f"the action's {where} reads {{{{ event }}}}, but only an event schedule "
                "(--poll, --webhook, --after) has an event; give one of them, or remove it"
            )
        unknown = sorted(names - {EVENT_NAME})
        if has_events and unknown:
            raise UsageError(
                f"the action's {where} reads {', '.join(unknown)}; a template here sees "
                "only event (e.g. {{ event.number }})"
            )


def render_action(action: Action, event: dict[str, Any]) -> Action:
    """``action`` with its templates rendered over ``event``; TemplateError when one
    reads a field the event has not."""
    context = {EVENT_NAME: event}

    def one(text: str) -> str:
        if not any(mark in text for mark in _MARKS):
            return text
        return render(text, context)

    task = action.task
    if task is not None:
        task = replace(
            task,
            prompt=one(task.prompt) if task.prompt is not None else None,
            run=tuple(one(arg) for arg in task.run) if task.run is not None else None,
        )
    return replace(action, cwd=one(action.cwd), task=task)


def decode_event(event_json: str | None) -> dict[str, Any] | None:
    """The stored event as a dict (None for a run no event started)."""
    if not event_json:
        return None
    value = json.loads(event_json)
    return value if isinstance(value, dict) else None

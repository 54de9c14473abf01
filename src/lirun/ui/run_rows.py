"""How a row of the runs list reads: what kind of thing it is, its name, what it ran.

A row names things by what they are: an invocation a flow ran is a **flow** named by
its file's name (the path on hover); a schedule run is named by its **schedule**, with
its action beside it; a command run shows its **command** as a person would type it;
an agent run its prompt (sent once, and in a list at most ``LIST_PROMPT_CHARS`` of it:
``bounded_prompt``); a fan-out leg instance its item. A team member is named by its task,
the prompt without the team preamble lirun put before it; a show's gate run is "gate of
play P in show S" beside its command. ``fold_schedules`` turns a page's schedule runs
into one row per schedule on request. Pure: rows in, rows out.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from lirun.teams.membership import without_preamble

__all__ = [
    "bounded_prompt",
    "command_text",
    "describe",
    "fold_schedules",
    "gate_label",
    "gate_shows",
    "task_of",
]

GATE_ROLES = ("gate", "final_gate", "head_gate")


def _argv(command: object) -> list[str] | None:
    """An argv from a list or its JSON text as stored; None for anything else."""
    if isinstance(command, str):
        try:
            command = json.loads(command)
        except ValueError:
            return None
    if isinstance(command, list) and command:
        return [str(part) for part in command]
    return None


def command_text(command: object) -> str | None:
    """An argv (a list, or its JSON text as stored) as a person would type it."""
    argv = _argv(command)
    return shlex.join(argv) if argv else None


def meta_of(row: Mapping[str, Any]) -> dict[str, Any]:
    """A session row's metadata (``meta``: stored JSON text, or already a dict)."""
    meta = row.get("meta")
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except ValueError:
            return {}
    return meta if isinstance(meta, dict) else {}


def task_of(prompt: object, meta: Mapping[str, Any]) -> object:
    """A team member's prompt without the preamble lirun put before it (its task); any
    other prompt as it is."""
    team = meta.get("team")
    if not (isinstance(prompt, str) and isinstance(team, dict)):
        return prompt
    return without_preamble(prompt)


def gate_shows(rows: Iterable[Mapping[str, Any]]) -> set[str]:
    """The shows whose gate runs are among ``rows`` (their topics name them)."""
    shows = set()
    for row in rows:
        meta = meta_of(row) if row.get("kind") == "run" else {}
        if meta.get("role") in GATE_ROLES and meta.get("show_id"):
            shows.add(str(meta["show_id"]))
    return shows


def gate_label(meta: Mapping[str, Any], topics: Mapping[str, str]) -> str | None:
    """ "gate of play P in show S" (the final gate: "final gate of show S")."""
    role, show_id = meta.get("role"), meta.get("show_id")
    if role not in GATE_ROLES or not show_id:
        return None
    show = topics.get(str(show_id)) or str(show_id)
    if role == "gate":
        return f"gate of play {meta.get('play') or meta.get('play_id')} in show {show}"
    if role == "head_gate":
        return f"gate of the moved head of show {show}"
    return f"final gate of show {show}"


def describe(row: Mapping[str, Any], topics: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``kind_label``, ``label`` (its name), ``label_title`` (the name in full), ``what``
    (what it ran when its prompt does not say: a command as typed, a schedule run's
    action; None where the prompt says it, so the prompt is sent once) and, for a
    run, ``command`` (its argv), ``command_line`` (as typed) and ``prompt`` (a team
    member's without its preamble), for one row of ``ui_runs_page``; a gate run is named
    by its play and show (``topics``: show id to topic)."""
    kind, label = row.get("kind"), row.get("label")
    out: dict[str, Any] = {
        "kind_label": str(kind or "").replace("_", " "),
        "label": label,
        "label_title": label,
        "what": None,
        "command": None,
        "command_line": None,
    }
    if kind == "run":
        argv = _argv(row.get("command"))
        line = shlex.join(argv) if argv else None
        out["command"], out["command_line"] = argv, line
        meta = meta_of(row)
        out["prompt"] = task_of(row.get("prompt"), meta)
        if row.get("provider") == "command" or not row.get("prompt"):
            out["what"] = line
        gate = gate_label(meta, topics or {})
        if gate:
            out["label"] = out["label_title"] = gate
    elif kind == "invocation" and row.get("origin") == "flow":
        out["kind_label"] = "flow"
        out["label"] = os.path.basename(str(label)) if label else None
    elif kind == "schedule_run":
        action = row.get("origin") or "run"
        if not row.get("parent_id"):
            out["label"] = out["label_title"] = "submitted"
            out["what"] = f"{action} submitted by li submit (no schedule)"
        else:
            out["label"] = out["label_title"] = label or "(deleted schedule)"
            out["what"] = f"{action} fired by its schedule"
    return out


def bounded_prompt(row: Mapping[str, Any], chars: int, href: str) -> dict[str, Any]:
    """A list row's ``prompt`` cut to ``chars`` characters and marked (``…``,
    ``prompt_truncated``, ``prompt_href``: the detail answer that has it whole) when it
    is longer; the row read ``chars + 1`` characters of it, enough to tell."""
    prompt = row.get("prompt")
    if not isinstance(prompt, str) or len(prompt) <= chars:
        return {"prompt_truncated": False}
    return {"prompt": prompt[:chars] + "…", "prompt_truncated": True, "prompt_href": href}


def fold_schedules(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows with each schedule's runs folded into its newest one, which counts them
    (``folded``: how many runs of that schedule this page had)."""
    out: list[dict[str, Any]] = []
    seen: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row.get("kind") != "schedule_run" or not row.get("parent_id"):
            out.append(dict(row))
            continue
        key = str(row["parent_id"])
        if key in seen:
            seen[key]["folded"] += 1
            continue
        seen[key] = {**row, "folded": 1}
        out.append(seen[key])
    return out

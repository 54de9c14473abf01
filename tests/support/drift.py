"""What changed between two recorded runs of one contract case: the pinned CLI's and a newer one's.

``scripts/drift`` runs the contract suite against the newest CLIs with
``LIRUN_TEST_DRIFT_DIR`` set, so each case leaves its stream and what lirun recorded of
it (``real-<version>-<case>.jsonl`` and ``.json``, the same pair
``LIRUN_TEST_RECORD_FIXTURES=1`` keeps as the pinned fixtures). :func:`compare` reads two
such pairs and says, as short cells of one table row: the event types that appeared or
went, the top-level keys an event type gained or lost, error wordings the pinned version
never printed, and a different CLI exit code or status/reason. Pure: file contents in,
words out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Drift", "Recorded", "compare", "event_kind", "format_table", "read_recorded"]

_ID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f-]{27,}\b|\b(?:req|msg|resp|toolu|call|fc)_\w+|\d+")
_WORDING_CHARS = 70


@dataclass(frozen=True)
class Recorded:
    """One live run of a case: its stream's events and what lirun recorded (or {})."""

    version: str
    events: list[dict[str, Any]]
    facts: dict[str, Any]


@dataclass(frozen=True)
class Drift:
    provider: str
    case: str
    pinned: str
    newest: str
    passed: bool
    outcome: str  # "=" or "pinned → newest" status/reason
    exit_code: str
    events: str  # "+new -gone" event types
    keys: str  # "type: +key -key"
    wordings: str  # error wordings the pinned run never printed


def read_recorded(stream: Path) -> Recorded | None:
    """The pair at ``stream`` (``real-<version>-<case>.jsonl`` and its ``.json``)."""
    if not stream.exists():
        return None
    events = []
    for line in stream.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            events.append(obj)
    facts_path = stream.with_suffix(".json")
    facts = json.loads(facts_path.read_text(encoding="utf-8")) if facts_path.exists() else {}
    version = str(facts.get("cli_version") or stream.name.split("-")[1])
    return Recorded(version=version, events=events, facts=facts)


def event_kind(event: dict[str, Any]) -> str:
    """``system/api_retry``, ``item.completed/error``: the type, and what it carries."""
    kind = str(event.get("type"))
    sub = event.get("subtype")
    if sub is None and isinstance(event.get("item"), dict):
        sub = event["item"].get("type")
    return f"{kind}/{sub}" if sub else kind


def _keys(events: list[dict[str, Any]]) -> dict[str, set[str]]:
    keys: dict[str, set[str]] = {}
    for event in events:
        found = keys.setdefault(event_kind(event), set())
        found.update(event)
        data = event.get("data")
        if isinstance(data, dict):  # each event's fields one level down (Copilot CLI)
            found.update(f"data.{key}" for key in data)
    return keys


def _wordings(events: list[dict[str, Any]]) -> set[str]:
    """The error sentences a stream carries, ids and numbers blanked so they compare."""
    texts: list[str] = []
    for event in events:
        kind = event.get("type")
        if kind == "result" and event.get("is_error") and isinstance(event.get("result"), str):
            texts.append(event["result"])
        elif kind == "assistant" and event.get("error"):
            content = (event.get("message") or {}).get("content") or []
            texts += [b.get("text", "") for b in content if isinstance(b, dict)]
        elif kind == "error" and isinstance(event.get("message"), str):
            texts.append(event["message"])
        elif kind == "turn.failed":
            texts.append(str((event.get("error") or {}).get("message", "")))
        elif kind == "session.error":  # Copilot CLI giving up
            texts.append(str((event.get("data") or {}).get("message", "")))
    return {_ID.sub("#", t.strip())[:_WORDING_CHARS] for t in texts if t and t.strip()}


def _outcome(facts: dict[str, Any]) -> str:
    return f"{facts.get('status', '?')}/{str(facts.get('status_reason_code', '?')).split('.')[-1]}"


def _changed(before: str, after: str) -> str:
    return "=" if before == after else f"{before} → {after}"


def compare(provider: str, case: str, pinned: Recorded | None, newest: Recorded) -> Drift:
    """How ``newest`` differs from ``pinned`` (None: the case has no pinned recording)."""
    passed = not newest.facts.get("problems")
    if pinned is None:
        exit_code = str(newest.facts.get("child_exit_code"))
        outcome = _outcome(newest.facts)
        return Drift(provider, case, "-", newest.version, passed, outcome, exit_code,
                     "(no pinned recording)", "", "")  # fmt: skip
    old_kinds, new_kinds = _keys(pinned.events), _keys(newest.events)
    events = [f"+{k}" for k in sorted(set(new_kinds) - set(old_kinds))]
    events += [f"-{k}" for k in sorted(set(old_kinds) - set(new_kinds))]
    keys = []
    for kind in sorted(set(old_kinds) & set(new_kinds)):
        added = sorted(new_kinds[kind] - old_kinds[kind])
        gone = sorted(old_kinds[kind] - new_kinds[kind])
        if added or gone:
            keys.append(
                f"{kind}: " + " ".join([*(f"+{k}" for k in added), *(f"-{k}" for k in gone)])
            )
    wordings = sorted(_wordings(newest.events) - _wordings(pinned.events))
    return Drift(
        provider=provider,
        case=case,
        pinned=pinned.version,
        newest=newest.version,
        passed=passed,
        outcome=_changed(_outcome(pinned.facts), _outcome(newest.facts))
        if pinned.facts
        else _outcome(newest.facts),
        exit_code=_changed(
            str(pinned.facts.get("child_exit_code")), str(newest.facts.get("child_exit_code"))
        ),
        events=" ".join(events) or "=",
        keys="; ".join(keys) or "=",
        wordings=" ; ".join(f'"{w}"' for w in wordings) or "=",
    )


def format_table(rows: list[Drift]) -> str:
    """A Markdown table, one row per provider and case."""
    head = ("provider", "case", "pinned", "newest", "result", "status/reason", "CLI exit",
            "event types", "keys", "new error wording")  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = (r.provider, r.case, r.pinned, r.newest, "pass" if r.passed else "FAIL",
                 r.outcome, r.exit_code, r.events, r.keys, r.wordings)  # fmt: skip
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines)

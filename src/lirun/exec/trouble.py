"""Provider trouble while it happens: one line per retry, warning or error, and the row's
progress columns.

An agent CLI that retries its API, warns, or reports an error says so in its stream long
before it ends. Whoever runs it (``li agent``, a flow's leg, a show's play) shows one
line per such event on stderr (and in a detached run's log), and the execution writes
what a person asks first on its row at once: retries so far, the last error, the model
and the CLI version (``li status ID`` and the dashboard read them while it runs).

Events are handled by kind, so a kind a parser adds later (``warning``) needs no change
here as long as it carries a ``message``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = [
    "PROGRESS_KINDS",
    "TROUBLE_KINDS",
    "one_line",
    "progress_fields",
    "trouble_line",
    "trouble_reporter",
]

# The kinds a person must see as they happen.
TROUBLE_KINDS = frozenset({"retry", "warning", "error"})
# The kinds after which the row's progress columns may have changed (the session event
# names the model and, for Claude, the CLI version).
PROGRESS_KINDS = TROUBLE_KINDS | {"session"}

_LINE_CHARS = 160
_ERROR_CHARS = 2000  # as agent_record keeps provider_error


def one_line(text: str, limit: int = _LINE_CHARS) -> str:
    """``text`` on one line (white space folded), cut to ``limit`` characters with "…"."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _message(data: dict[str, Any]) -> str:
    for key in ("message", "error", "text"):
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return "(no message)"


def trouble_line(provider: str, event: Any) -> str | None:
    """``claude: retrying (3): API error 529`` for a trouble event, else None."""
    kind = str(getattr(event, "kind", ""))
    if kind not in TROUBLE_KINDS:
        return None
    data = getattr(event, "data", None)
    data = data if isinstance(data, dict) else {}
    said = one_line(_message(data))
    if kind == "retry":
        count = f" ({data['count']})" if data.get("count") else ""
        return f"{provider}: retrying{count}: {said}"
    return f"{provider}: {kind}: {said}"


def trouble_reporter(say: Callable[[str], None], name: str) -> Callable[[str, Any], None]:
    """An execution's ``on_event`` that says each trouble line named ``name`` (``leg x``,
    ``play y``), one call a line, from the execution's thread."""

    def on_event(provider: str, event: Any) -> None:
        line = trouble_line(provider, event)
        if line is not None:
            say(f"{name}: {line}")

    return on_event


def progress_fields(parser: Any) -> dict[str, Any]:
    """The row columns a running agent execution keeps current: ``provider_retries``,
    ``provider_error`` (the last error the provider reported), ``model`` and
    ``provider_version``, each only once the stream said it."""
    fields = {
        "provider_retries": getattr(parser, "retries", 0) or None,
        "provider_error": (getattr(parser, "last_error", None) or None),
        "model": getattr(parser, "model", None),
        "provider_version": getattr(parser, "provider_version", None),
    }
    if isinstance(fields["provider_error"], str):
        fields["provider_error"] = fields["provider_error"][:_ERROR_CHARS]
    return {k: v for k, v in fields.items() if v is not None}

"""How a team message is shown to a person: one line, escaped.

Messages are arbitrary agent output. On a terminal a control character (an escape
sequence could move the cursor, recolour or retitle the terminal) is shown as its
``\\xNN`` / ``\\n`` escape, so one message is one line and cannot forge another; a
format character (a bidirectional override, a zero-width space) as its ``\\uNNNN``
escape, so a line reads as it is stored.
"""

from __future__ import annotations

import time
from typing import Any

from lirun.store.rows import InboxMessageRow, TeamMessageRow
from lirun.visible import visible

_SHOWN = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def escape_line(text: str) -> str:
    """``text`` on one line: backslashes, newlines and tabs escaped, and every invisible
    character (control, format such as a bidirectional override or a zero-width space,
    line separator: ``lirun.visible``) as its ``\\xNN`` / ``\\uNNNN`` escape."""
    return visible(text, names=_SHOWN)


def message_line(message: TeamMessageRow | InboxMessageRow) -> str:
    """``#SEQ HH:MM:SS SENDER -> RECIPIENT: TEXT`` (escaped), one line."""
    stamp = time.strftime("%H:%M:%S", time.localtime(float(message.created_at)))
    return (
        f"#{message.seq} {stamp} {escape_line(str(message.sender))} -> "
        f"{escape_line(str(message.recipient))}: {escape_line(str(message.body))}"
    )


def message_json(
    message: TeamMessageRow | InboxMessageRow, receipts: dict[str, float] | None = None
) -> dict[str, Any]:
    """The message as scripts read it (``--json``): its fields, when it was read if it
    came from an inbox, and, when known, who read it."""
    out: dict[str, Any] = {
        "id": message.id,
        "team_id": message.team_id,
        "seq": int(message.seq),
        "sender": message.sender,
        "recipient": message.recipient,
        "text": message.body,
        "run_id": message.run_id,
        "created_at": message.created_at,
    }
    if isinstance(message, InboxMessageRow):
        out["read_at"] = message.read_at
    if receipts is not None:
        out["read_by"] = receipts
    return out

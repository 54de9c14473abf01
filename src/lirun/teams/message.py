"""How a team message is shown to a person: one line, escaped.

Messages are arbitrary agent output. On a terminal a control character (an escape
sequence could move the cursor, recolour or retitle the terminal) is shown as its
``\\xNN`` / ``\\n`` escape, so one message is one line and cannot forge another.
"""

from __future__ import annotations

import time
from typing import Any

from lirun.store.rows import InboxMessageRow, TeamMessageRow

_SHOWN = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}
# Line separators and the bidirectional controls that can make a line read other than
# it is (RLO turns "txt.exe" around): shown as escapes too.
_INVISIBLE = frozenset("\u2028\u2029\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                       "\u2066\u2067\u2068\u2069")  # fmt: skip


def escape_line(text: str) -> str:
    """``text`` with control characters (C0, DEL, C1) and backslashes escaped."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch in _SHOWN:
            out.append(_SHOWN[ch])
        elif code < 0x20 or 0x7F <= code < 0xA0 or ch in _INVISIBLE:
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


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

"""A message: one row of a run's conversation, as ``db.append_message`` stores it.

Apart from the stream parsers (``exec.stream``) that make most of them, so ``li run``,
which records a command's output as one message and parses no provider stream, does not
load the parsers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Message", "MessageRole"]

# ``output``: a command's stdout (li run, command legs): output, never an assistant reply.
MessageRole = Literal["assistant", "tool_call", "tool_result", "usage", "system", "error", "output"]


@dataclass(frozen=True, slots=True)
class Message:
    """One row for ``db.append_message(session_id, role=..., content=...)``."""

    role: MessageRole
    content: str

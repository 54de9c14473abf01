"""Codex: the ``exec --json`` command, its options and its parser, as one provider
(``lirun.providers.base.Provider``)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from lirun.exec.failure_text import (
    class_for_code,
    class_for_status,
    class_for_text,
    is_auth_status,
    is_warning_text,
    status_in_text,
)
from lirun.exec.stream import Event, StreamParser, as_dict, as_int, as_str
from lirun.provider_errors import classified_error, is_retryable_cause
from lirun.providers.base import Capabilities, OptionKind, OptionValue, Provider

# Old builds said ``assistant_message`` where current ones say ``agent_message``.
_ITEM_TYPE_ALIASES = {"assistant_message": "agent_message"}
_TOOL_ITEM_TYPES = frozenset({"command_execution", "file_change", "mcp_tool_call", "web_search"})
_RESULT_KEYS = ("status", "exit_code", "aggregated_output", "result", "error")
_NOT_INPUT_KEYS = frozenset({"id", "type", "item_type", *_RESULT_KEYS})
_RECONNECTING = "Reconnecting..."
# "Reconnecting... 2/5 (...)": the attempt number; "waiting for network" has none.
_ATTEMPT = re.compile(r"^Reconnecting\.\.\.\s*(\d+)\s*/\s*\d+")
# Tool items start and complete close together: remembering this many recent ids is
# enough to announce each call once.
_KEPT_ITEM_IDS = 256
_ITEM_ID_CHARS = 200
_MESSAGE_CHARS = 4096
STDIN_PROMPT = "-"  # codex exec: read the prompt from stdin


def build_codex_command(
    executable: str,
    *,
    model: str | None = None,
    resume: str | None = None,
    cwd: str | None = None,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """``codex exec --json [-C DIR] [-m M] [ARGS] [resume THREAD_ID] -``.

    Options go before ``resume`` because they belong to ``exec``. The prompt argument is
    ``-``: Codex reads the prompt from stdin, out of every other user's ``ps``.
    """
    argv = [executable, "exec", "--json"]
    if cwd:
        argv += ["-C", cwd]
    if model:
        argv += ["-m", model]
    argv += extra_args
    if resume:
        argv += ["resume", resume]
    return [*argv, STDIN_PROMPT]


class CodexStreamParser(StreamParser):
    """Parses ``codex exec --json``; ``turn.completed`` / ``turn.failed`` are terminal.

    ``error`` events are retry notices ("Reconnecting... 1/5"), not terminal by themselves;
    they are kept and help classify a later ``turn.failed``.
    """

    provider = "codex"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.turns_started = 0
        # The latest tool item ids announced, oldest first (a dict keeps the order).
        self._announced_items: dict[str, None] = {}

    def _handle(self, obj: dict[str, Any]) -> list[Event]:
        kind = obj.get("type")
        if kind == "thread.started":
            return self._on_thread_started(obj)
        if kind == "turn.started":
            self.turns_started += 1
            return []
        if kind in ("item.started", "item.updated", "item.completed"):
            return self._on_item(kind == "item.completed", as_dict(obj.get("item")))
        if kind == "turn.completed":
            return self._on_turn_completed(obj)
        if kind == "turn.failed":
            return self._on_turn_failed(obj)
        if kind == "error":
            return [self._on_error(as_str(obj.get("message")) or "error")]
        return self._ignore(str(kind))

    def _on_error(self, message: str) -> Event:
        """A top-level ``error``: a reconnect notice ("Reconnecting... 2/5 (...)", "Reconnecting...
        waiting for network") is a retry; anything else ("unexpected status 401 Unauthorized")
        is the provider's own error text. Neither is terminal."""
        if message.startswith(_RECONNECTING):
            match = _ATTEMPT.match(message)
            attempt = int(match.group(1)) if match else None
            data = {"message": message, "attempt": attempt}
            status = status_in_text(message)
            event = self._retry(message, data, attempt=attempt, status=status)
            if is_auth_status(status):
                # "Reconnecting... 1/5 (unexpected status 401 Unauthorized ...)": Codex
                # retries a refused key like a lost connection; no retry will get further.
                self._flag_fatal(
                    message, "auth", {"source": "retry", "message": message[:_MESSAGE_CHARS]}
                )
            return event
        if is_warning_text(message):
            return self._warning(message, "stream")
        failure_class = class_for_text(message)
        if failure_class == "auth":
            # "unexpected status 401 Unauthorized": Codex will not get further with this key.
            self._flag_fatal(
                message, "auth", {"source": "error", "message": message[:_MESSAGE_CHARS]}
            )
        event = self._error(message, "stream")
        event.data["class"] = failure_class
        self.last_error_status = status_in_text(message) or self.last_error_status
        return event

    def _on_thread_started(self, obj: dict[str, Any]) -> list[Event]:
        self._set_session_uid(obj.get("thread_id"), replace=True)
        data = {"provider": self.provider, "event": "thread.started"}
        return [Event("session", {**data, "engine_session_uid": self.engine_session_uid})]

    def _on_item(self, completed: bool, item: dict[str, Any]) -> list[Event]:
        raw_type = as_str(item.get("type")) or as_str(item.get("item_type")) or "unknown"
        item_type = _ITEM_TYPE_ALIASES.get(raw_type, raw_type)
        if item_type == "agent_message":
            text = as_str(item.get("text"))
            if not completed or text is None or not text.strip():
                return []
            return [self._note_assistant_text(text)]
        if item_type == "error":
            if not completed:
                return []
            message = as_str(item.get("message")) or "error"
            if is_warning_text(message):
                return [self._warning(message, "item")]
            return [self._error(message, "item")]
        self._note_progress()  # the model produced an item (reasoning, a tool, a plan)
        if item_type in _TOOL_ITEM_TYPES:
            return self._on_tool_item(completed, item_type, item)
        return self._ignore(f"item/{item_type}") if completed else []

    def _on_tool_item(self, completed: bool, item_type: str, item: dict[str, Any]) -> list[Event]:
        item_id = as_str(item.get("id")) or f"item_{self.tool_call_count}"
        events: list[Event] = []
        # A tool item may appear only as item.completed; announce the call once either way.
        # Only the latest ids are remembered, so the set does not grow with the run.
        key = item_id[:_ITEM_ID_CHARS]
        if key not in self._announced_items:
            self._announced_items[key] = None
            while len(self._announced_items) > _KEPT_ITEM_IDS:
                del self._announced_items[next(iter(self._announced_items))]
            call_input = {k: v for k, v in item.items() if k not in _NOT_INPUT_KEYS}
            call = {"id": item_id, "name": item_type, "input": call_input}
            events.append(self._note_tool_call(call))
        if completed:
            result = {"id": item_id, "name": item_type}
            result.update({k: item[k] for k in _RESULT_KEYS if k in item})
            events.append(self._note_tool_result(result))
        return events

    def _on_turn_completed(self, obj: dict[str, Any]) -> list[Event]:
        summary = {"kind": "provider_turn", "provider": self.provider, "type": "turn.completed"}
        first = self._record_terminal(summary, None)
        events = [Event("terminal", summary if first else {**summary, "extra": True})]
        if isinstance(obj.get("usage"), dict):
            # A running total for the thread: keep the latest, never add them up.
            self.usage = dict(obj["usage"])
            events.append(Event("usage", {"provider": self.provider, **self.usage}))
        if first:
            self.num_turns = self.turns_started or 1
        return events

    def _on_turn_failed(self, obj: dict[str, Any]) -> list[Event]:
        error = as_dict(obj.get("error"))
        message = as_str(error.get("message")) or as_str(obj.get("message")) or "turn failed"
        summary = {
            "kind": "provider_turn",
            "provider": self.provider,
            "type": "turn.failed",
            "message": message[:_MESSAGE_CHARS],  # kept to the end of the run: capped
        }
        status = as_int(error.get("status")) or status_in_text(message)
        code = as_str(error.get("code")) or as_str(error.get("type"))
        # Structure first (an HTTP status, the error's code or type), then the words, then
        # what Codex said it was reconnecting for, then its earlier error lines.
        failure_class = (
            class_for_status(status)
            or class_for_code(code)
            or class_for_text(message)
            or self.retry_class
            or next((c for e in reversed(self.errors) if (c := class_for_text(e))), None)
        )
        if failure_class is not None:
            failure = classified_error(
                message[:_MESSAGE_CHARS],
                provider=self.provider,
                failure_class=failure_class,
                detail=summary,
            )
        else:
            retryable = is_retryable_cause(
                api_error_status=status,
                error_codes=[c for c in (code,) if c],
                messages=[message, *self.errors],
            )
            failure = classified_error(
                f"codex turn failed: {message[:300]}",
                provider=self.provider,
                retryable=retryable,
                detail=summary,
            )
        first = self._record_terminal(summary, failure)
        if first:
            self.num_turns = self.turns_started or 1
        return [Event("terminal", summary if first else {**summary, "extra": True})]


class CodexProvider(Provider):
    """Codex (``codex``), headless with ``exec --json``, the prompt read from stdin (``-``)."""

    name = "codex"
    package = "@openai/codex"
    tested_versions = ("0.171.0", "0.171.0")
    capabilities = Capabilities(
        resume=True,
        session_id=True,
        reports_cost=False,
        approval_modes=("untrusted", "on-failure", "on-request", "never"),
    )
    options: ClassVar[Mapping[str, OptionKind]] = {
        "sandbox": "text",
        "approval_policy": "text",
        "config": "settings",
    }
    owned_flags: ClassVar[Mapping[str, str]] = {
        "--json": "lirun runs codex exec --json itself",
        "--experimental-json": "lirun runs codex exec --json itself",
    }

    def command(
        self,
        executable: str,
        *,
        model: str | None = None,
        resume: str | None = None,
        extra_args: Sequence[str] = (),
    ) -> list[str]:
        return build_codex_command(executable, model=model, resume=resume, extra_args=extra_args)

    def new_parser(self) -> CodexStreamParser:
        return CodexStreamParser()

    def option_args(
        self, values: Mapping[str, OptionValue], provider_args: Sequence[str]
    ) -> list[str]:
        # Codex parses a -c VALUE as TOML and falls back to a literal string.
        args: list[str] = []
        if "sandbox" in values:
            args += ["--sandbox", str(values["sandbox"])]
        if "approval_policy" in values:
            args += ["-c", f"approval_policy={values['approval_policy']}"]
        pairs = values.get("config", ())
        for pair in pairs if isinstance(pairs, tuple) else ():
            if isinstance(pair, tuple):
                args += ["-c", f"{pair[0]}={pair[1]}"]
        return [*args, *provider_args]

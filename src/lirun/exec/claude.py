"""Claude Code: the ``-p ... --output-format stream-json --verbose`` command and its parser."""

from __future__ import annotations

from collections.abc import Sequence

from lirun.exec.stream import (
    Event,
    StreamParser,
    as_dict,
    as_int,
    as_list,
    as_str,
    reply_tail,
)
from lirun.hints import Any
from lirun.provider_errors import ProviderError, classified_error, is_retryable_cause

# Hitting a configured limit fails the same way on every retry, whatever else went wrong.
_LIMIT_SUBTYPES = frozenset({"error_max_turns", "error_max_budget_usd"})


def build_claude_command(
    executable: str,
    *,
    model: str | None = None,
    resume: str | None = None,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """``claude -p --output-format stream-json --verbose [--model M] [--resume ID] [ARGS]``.

    ``--verbose`` is required: with ``-p`` and ``stream-json`` the CLI exits 1 without it.
    The prompt is not an argument: it goes on stdin, out of every other user's ``ps``.
    """
    argv = [executable, "-p", "--output-format", "stream-json", "--verbose"]
    if model:
        argv += ["--model", model]
    if resume:
        argv += ["--resume", resume]
    return [*argv, *extra_args]


class ClaudeStreamParser(StreamParser):
    """Parses Claude Code ``stream-json``; the first ``result`` line is the terminal event."""

    provider = "claude"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.result_text: str | None = None

    @property
    def final_text(self) -> str:
        if self.result_text:
            return self.result_text
        return super().final_text

    def _handle(self, obj: dict[str, Any]) -> list[Event]:
        kind = obj.get("type")
        self._set_session_uid(obj.get("session_id"), replace=False)
        if kind == "system" and obj.get("subtype") == "init":
            return self._on_init(obj)
        if kind == "system" and obj.get("subtype") == "api_retry":
            return self._on_api_retry(obj)
        if kind == "assistant":
            return self._on_assistant(obj)
        if kind == "user":
            return self._on_user(obj)
        if kind == "result":
            return self._on_result(obj)
        subtype = as_str(obj.get("subtype"))
        return self._ignore(f"{kind}/{subtype}" if subtype else str(kind))

    def _on_init(self, obj: dict[str, Any]) -> list[Event]:
        self._set_session_uid(obj.get("session_id"), replace=True)
        model = as_str(obj.get("model"))
        if model is not None:
            self.model = model
        version = as_str(obj.get("claude_code_version"))
        if version is not None:
            self.provider_version = version
        data = {
            "provider": self.provider,
            "event": "init",
            "engine_session_uid": self.engine_session_uid,
            "model": self.model,
            "cwd": obj.get("cwd"),
            "version": obj.get("claude_code_version"),
        }
        return [Event("session", data)]

    def _on_api_retry(self, obj: dict[str, Any]) -> list[Event]:
        """``system/api_retry``: Claude Code retries a failed API call itself (PROVIDERS.md)."""
        error = as_str(obj.get("error")) or "unknown"
        status = as_int(obj.get("error_status"))
        attempt, limit = as_int(obj.get("attempt")), as_int(obj.get("max_retries"))
        said = error if status is None else f"{error} (HTTP {status})"
        data = {
            "attempt": attempt,
            "max_retries": limit,
            "error": error,
            "error_status": status,
            "retry_delay_ms": obj.get("retry_delay_ms"),
            "message": f"API retry {attempt or '?'}/{limit or '?'}: {said}",
        }
        return [self._retry(said, data)]

    def _on_assistant(self, obj: dict[str, Any]) -> list[Event]:
        events: list[Event] = []
        for block in as_list(as_dict(obj.get("message")).get("content")):
            block = as_dict(block)
            if block.get("type") == "text" and (text := as_str(block.get("text"))):
                if text.strip():
                    events.append(self._note_assistant_text(text))
            elif block.get("type") == "tool_use":
                call = {
                    "id": block.get("id"),
                    "name": block.get("name"),
                    "input": block.get("input"),
                }
                events.append(self._note_tool_call(call))
        if error := as_str(obj.get("error")):
            events.append(self._error(error, "assistant"))
        return events

    def _on_user(self, obj: dict[str, Any]) -> list[Event]:
        events: list[Event] = []
        for block in as_list(as_dict(obj.get("message")).get("content")):
            block = as_dict(block)
            if block.get("type") != "tool_result":
                continue
            result = {
                "tool_use_id": block.get("tool_use_id"),
                "content": block.get("content"),
                "is_error": block.get("is_error") is True,
            }
            events.append(self._note_tool_result(result))
        return events

    def _on_result(self, obj: dict[str, Any]) -> list[Event]:
        summary = _result_summary(obj)
        if not self._record_terminal(summary, self._result_failure(obj, summary)):
            return [Event("terminal", {**summary, "extra": True})]
        result = obj.get("result")
        self.result_text = reply_tail(result) if isinstance(result, str) else None
        self.num_turns = as_int(obj.get("num_turns"))
        self.permission_denials = len(as_list(obj.get("permission_denials")))
        cost = obj.get("total_cost_usd")
        self.total_cost_usd = float(cost) if isinstance(cost, int | float) else None
        duration = obj.get("duration_ms")
        if isinstance(duration, int | float) and not isinstance(duration, bool):
            self.duration_ms = float(duration)
        events = [Event("terminal", summary)]
        if isinstance(obj.get("usage"), dict):
            self.usage = dict(obj["usage"])
            events.append(Event("usage", {"provider": self.provider, **self.usage}))
        return events

    def _result_failure(self, obj: dict[str, Any], summary: dict[str, Any]) -> ProviderError | None:
        subtype = as_str(obj.get("subtype")) or ""
        if obj.get("is_error") is not True and not subtype.startswith("error"):
            return None
        status = as_int(obj.get("api_error_status"))
        texts = [str(e) for e in as_list(obj.get("errors"))]
        texts += [obj["result"]] if isinstance(obj.get("result"), str) else []
        retryable = subtype not in _LIMIT_SUBTYPES and is_retryable_cause(
            api_error_status=status, error_codes=self.errors, messages=[*texts, *self.errors]
        )
        why = f"; {texts[0][:200]}" if texts else ""
        status_note = f", api_error_status={status}" if status is not None else ""
        message = (
            f"claude result {subtype or '?'} (is_error={summary['is_error']}{status_note}){why}"
        )
        return classified_error(
            message, provider=self.provider, retryable=retryable, detail=summary
        )


def _result_summary(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "provider_result",
        "provider": "claude",
        "subtype": obj.get("subtype"),
        "is_error": obj.get("is_error") is True,
        "api_error_status": obj.get("api_error_status"),
        "terminal_reason": obj.get("terminal_reason"),
        "num_turns": obj.get("num_turns"),
        "session_id": obj.get("session_id"),
        "permission_denials": len(as_list(obj.get("permission_denials"))),
    }

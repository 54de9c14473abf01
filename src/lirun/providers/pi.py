"""The pi coding agent: the ``--mode json`` command and its parser.

pi's exit code says nothing about the model calls (docs/providers.md, "pi 0.73.1"):
``--mode json`` exits 0 when every call failed. The run's end is read from the stream
alone: the last assistant ``message_end`` of the last agent cycle, once pi is not about
to retry it. Three things in that stream look like an end and are not:

* the assistant ``message_start`` carries a provisional ``stopReason`` ("stop" before
  any text): only ``message_end`` counts;
* an ``agent_end`` followed by ``auto_retry_start``: pi retries the failed call in a new
  cycle; only the cycle after the last retry is the end;
* a ``message_end`` with ``stopReason:"stop"``, text, and usage all zero: the connection
  closed mid-answer (no ``finish_reason``, no usage chunk) and pi kept the provisional
  reason. Every complete answer reports its usage, so an answer without any is cut.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from lirun.errors import UsageError
from lirun.exec.failure_text import class_for_status, class_for_text
from lirun.exec.stream import Event, StreamParser, as_dict, as_int, as_list, as_str
from lirun.exec.verdict import StreamVerdict
from lirun.provider_errors import ProviderError, classified_error, is_retryable_cause
from lirun.providers.base import Capabilities, Provider

# The OpenAI SDK's errors read "<status> <message>" ("401 Incorrect API key provided").
_LEADING_STATUS = re.compile(r"^\s*(\d{3})\b")
_USAGE_KEYS = ("input", "output", "cacheRead", "cacheWrite", "totalTokens")
_TEXT_CHARS = 1000
# Stop reasons that mean the model answered (as opposed to "error" and "aborted").
_ANSWERED = frozenset({"stop", "length", "toolUse"})


def build_pi_command(
    executable: str,
    *,
    model: str | None = None,
    resume: str | None = None,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """``pi --mode json [--provider P] [--model M] [--session ID] [ARGS]``.

    ``model`` is ``PROVIDER/MODEL`` (``li agent pi/PROVIDER/MODEL``); a bare ``MODEL``
    leaves the provider to pi (its settings' default provider, else ``google``). The
    prompt goes on stdin, which pi reads to its end: lirun's prompt file ends, so pi
    starts at once. Sessions are kept (no ``--no-session``) so a run can be resumed by
    the id of its ``session`` line.
    """
    argv = [executable, "--mode", "json"]
    if model:
        provider, sep, name = model.partition("/")
        if sep and (not provider.strip() or not name.strip()):
            raise UsageError(f"pi model {model!r} is incomplete; use pi/PROVIDER/MODEL")
        if sep:
            argv += ["--provider", provider.strip(), "--model", name.strip()]
        else:
            argv += ["--model", model]
    if resume:
        argv += ["--session", resume]
    return [*argv, *extra_args]


def pi_failure_class(message: str) -> str | None:
    """The class of a failed call's ``errorMessage``: the words first (the shared table
    knows the SDK's and Node's), then the HTTP status it starts with. A 403 is ``auth``, as
    for every provider ("You are not allowed to sample from this model": the key may not
    use it; a retry will not change that, a person fixes the key or its access)."""
    return class_for_text(message) or class_for_status(leading_status(message))


def leading_status(message: str | None) -> int | None:
    match = _LEADING_STATUS.match(message or "")
    return int(match.group(1)) if match else None


def _usage_is_empty(usage: dict[str, Any]) -> bool:
    return not any(as_int(usage.get(key)) for key in _USAGE_KEYS)


class PiStreamParser(StreamParser):
    """Parses ``pi --mode json``; the end is the last assistant ``message_end`` of the
    last agent cycle (see the module docstring), decided when it cannot change: at an
    ``agent_end`` that answered, at ``auto_retry_end``, or when the stream ends."""

    provider = "pi"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pi_provider: str | None = None
        self.api: str | None = None
        self.cycles = 0
        self._last: dict[str, Any] | None = None  # the last assistant message_end, summed up
        self._cycle_ended = False  # the latest agent cycle ended and no retry was announced
        self._tokens: dict[str, int] = {}
        self._cost = 0.0
        self._priced = False

    def finish(self, exit_code: int | None, *, killed_by: str | None = None) -> StreamVerdict:
        if not self.saw_terminal and self._cycle_ended and self._last is not None:
            # The stream ended after a whole cycle with no retry to come: its last answer
            # is the run's end, whatever the exit code (pi exits 0 on a failed call).
            self._end_with_last()
        verdict = super().finish(exit_code, killed_by=killed_by)
        if self.pi_provider is not None:
            verdict.evidence.append(
                {"kind": "provider_model", "provider": self.provider,
                 "pi_provider": self.pi_provider, "api": self.api, "model": self.model}
            )  # fmt: skip
        return verdict

    @property
    def reply(self) -> str:
        if self._failure is not None:
            # A failed call has no text (the prompt before it is never the reply); a cut
            # answer's text is kept as evidence, not recorded as the reply.
            return ""
        return super().reply

    def _handle(self, obj: dict[str, Any]) -> list[Event]:
        kind = obj.get("type")
        if kind == "session":
            return self._on_session(obj)
        if kind == "agent_start":
            self.cycles += 1
            self._cycle_ended = False
            return []
        if kind == "turn_start":
            return []
        if kind == "message_start":
            # The model being called is known now; the stopReason is provisional (only
            # message_end decides).
            message = as_dict(obj.get("message"))
            if message.get("role") == "assistant":
                self.model = _model_name(message) or self.model
            return []
        if kind == "message_update":
            return self._on_update(as_dict(obj.get("assistantMessageEvent")))
        if kind == "message_end":
            return self._on_message_end(as_dict(obj.get("message")))
        if kind == "tool_execution_start":
            return [self._note_tool_call(_tool_fields(obj, with_args=True))]
        if kind == "tool_execution_end":
            result = _tool_fields(obj, with_args=False)
            result["is_error"] = obj.get("isError") is True
            result["content"] = as_dict(obj.get("result")).get("content")
            return [self._note_tool_result(result)]
        if kind == "turn_end":
            return []
        if kind == "agent_end":
            return self._on_agent_end()
        if kind == "auto_retry_start":
            return [self._on_retry_start(obj)]
        if kind == "auto_retry_end":
            return self._on_retry_end(obj)
        return self._ignore(str(kind))

    def _on_session(self, obj: dict[str, Any]) -> list[Event]:
        self._set_session_uid(obj.get("id"), replace=False)  # the first line names the run
        data = {"provider": self.provider, "event": "session", "cwd": obj.get("cwd")}
        return [Event("session", {**data, "engine_session_uid": self.engine_session_uid})]

    def _on_update(self, update: dict[str, Any]) -> list[Event]:
        # Streamed text and tool arguments: the model is answering (the stall limit's
        # measure). The whole text is kept from message_end, not piece by piece.
        if str(update.get("type", "")).endswith("_delta"):
            self._note_progress()
        return []

    def _on_message_end(self, message: dict[str, Any]) -> list[Event]:
        if message.get("role") != "assistant":
            return []  # the user's prompt and tool results are never the reply
        stop = as_str(message.get("stopReason")) or "stop"
        usage = as_dict(message.get("usage"))
        text = "".join(
            str(block.get("text") or "")
            for block in map(as_dict, as_list(message.get("content")))
            if block.get("type") == "text"
        )
        self._last = {
            "stop_reason": stop,
            "error": as_str(message.get("errorMessage")),
            "text": text,
            "no_usage": _usage_is_empty(usage),
            "response_id": as_str(message.get("responseId")),
        }
        self.model = _model_name(message) or self.model
        self.pi_provider = as_str(message.get("provider")) or self.pi_provider
        self.api = as_str(message.get("api")) or self.api
        events = self._add_usage(usage)
        if stop == "error" or stop == "aborted":
            said = self._last["error"] or f"pi stopped the call ({stop})"
            event = self._error(said, "assistant")
            event.data.update({"class": pi_failure_class(said), "stop_reason": stop})
            self.last_error_status = leading_status(said) or self.last_error_status
            return [event, *events]
        self._note_progress()  # a completed API call
        if text.strip():
            events.insert(0, self._note_assistant_text(text))
        return events

    def _add_usage(self, usage: dict[str, Any]) -> list[Event]:
        """pi reports each call's usage: the run's is their sum (cost in $)."""
        if not usage or _usage_is_empty(usage):
            return []
        for key in _USAGE_KEYS:
            self._tokens[key] = self._tokens.get(key, 0) + (as_int(usage.get(key)) or 0)
        total = as_dict(usage.get("cost")).get("total")
        if isinstance(total, int | float) and not isinstance(total, bool):
            self._cost += float(total)
            self._priced = True
        self.usage = dict(self._tokens)
        self.total_cost_usd = self._cost if self._priced else None
        return [Event("usage", {"provider": self.provider, **usage})]

    def _on_agent_end(self) -> list[Event]:
        self._cycle_ended = True
        last = self._last
        if last is None or last["stop_reason"] not in _ANSWERED:
            return []  # a failed call: pi may retry it (auto_retry_start comes next)
        return self._end_with_last()

    def _on_retry_start(self, obj: dict[str, Any]) -> Event:
        self._cycle_ended = False
        said = as_str(obj.get("errorMessage")) or "pi retries a failed call"
        attempt, limit = as_int(obj.get("attempt")), as_int(obj.get("maxAttempts"))
        data = {
            "attempt": attempt,
            "max_attempts": limit,
            "delay_ms": obj.get("delayMs"),
            "message": f"pi retry {attempt or '?'}/{limit or '?'}: {said}",
        }
        return self._retry(
            said,
            data,
            attempt=attempt,
            status=leading_status(said),
            failure_class=pi_failure_class(said),
        )

    def _on_retry_end(self, obj: dict[str, Any]) -> list[Event]:
        if obj.get("success") is True:
            self.retrying = False
            return []
        self._cycle_ended = True  # pi gave up: the last cycle's failure is the end
        if self._last is None:
            return []
        return self._end_with_last()

    def _end_with_last(self) -> list[Event]:
        last = self._last or {}
        summary = {
            "kind": "provider_message_end",
            "provider": self.provider,
            "stop_reason": last.get("stop_reason"),
            "error_message": (last.get("error") or "")[:_TEXT_CHARS] or None,
            "cycles": self.cycles,
            "retries": self.retries,
        }
        failure = self._last_failure(last, summary)
        first = self._record_terminal(summary, failure)
        if first:
            self.num_turns = self._turns()
        return [Event("terminal", summary if first else {**summary, "extra": True})]

    def _turns(self) -> int | None:
        # Model calls that answered; a retried call is one turn, not one per attempt.
        answered = self.assistant_text_count + self.tool_call_count
        return answered or (1 if self._last is not None else None)

    def _last_failure(self, last: dict[str, Any], summary: dict[str, Any]) -> ProviderError | None:
        stop = last.get("stop_reason")
        if stop == "error" or stop == "aborted":
            said = last.get("error") or f"pi stopped the call ({stop})"
            failure_class = pi_failure_class(said)
            if failure_class is not None:
                return classified_error(
                    said[:_TEXT_CHARS], provider=self.provider,
                    failure_class=failure_class, detail=summary,
                )  # fmt: skip
            retryable = is_retryable_cause(
                api_error_status=leading_status(said), messages=[said, *self.errors]
            )
            return classified_error(
                f"pi call failed: {said[:_TEXT_CHARS]}", provider=self.provider,
                retryable=retryable, detail=summary,
            )  # fmt: skip
        if last.get("no_usage"):
            # Cut mid-answer: pi kept the provisional "stop" and reports the text so far.
            cut = last.get("text") or ""
            return classified_error(
                f"pi's answer ended with no finish reason and no usage: the connection "
                f"was closed mid-stream after {len(cut)} characters ({cut[:80]!r})",
                provider=self.provider,
                failure_class="network",
                detail={**summary, "truncated_text": cut[:_TEXT_CHARS]},
            )
        return None


def _model_name(message: dict[str, Any]) -> str | None:
    """``PROVIDER/MODEL`` as ``li agent pi/PROVIDER/MODEL`` takes it back."""
    model = as_str(message.get("model"))
    provider = as_str(message.get("provider"))
    if model is None:
        return None
    return f"{provider}/{model}" if provider else model


def _tool_fields(obj: dict[str, Any], *, with_args: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {"id": obj.get("toolCallId"), "name": obj.get("toolName")}
    if with_args:
        fields["input"] = obj.get("args")
    return fields


class PiProvider(Provider):
    """The pi coding agent (``pi``), headless with ``--mode json``: ``pi/PROVIDER/MODEL``
    picks pi's own provider and model. pi has no permission system: every tool runs."""

    name = "pi"
    package = "@mariozechner/pi-coding-agent"
    tested_versions = ("0.73.1", "0.73.1")
    capabilities = Capabilities(resume=True, session_id=True, reports_cost=True)
    owned_flags: ClassVar[Mapping[str, str]] = {
        "--mode": "lirun runs pi --mode json itself",
    }

    def command(
        self,
        executable: str,
        *,
        model: str | None = None,
        resume: str | None = None,
        extra_args: Sequence[str] = (),
    ) -> list[str]:
        return build_pi_command(executable, model=model, resume=resume, extra_args=extra_args)

    def new_parser(self) -> PiStreamParser:
        return PiStreamParser()

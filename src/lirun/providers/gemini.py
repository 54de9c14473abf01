"""Gemini CLI: the headless ``-o stream-json`` command and its parser (stdout and stderr).

Gemini CLI 0.61.0 says less in its stream than Claude Code or Codex, and its exit code
lies (docs/providers.md, "Gemini CLI"): it exits 0 on a stream cut mid-reply, and with the
HTTP status cut to 8 bits on an API error (401 → 145). So the verdict follows the stream:
``result.status`` decides, the HTTP status and wording inside ``[API Error: {...}]``
classify, and the exit code is only a hint when nothing else said which class. Retries and
the failures before the stream starts (no key, untrusted directory, a bad flag) are told
only on stderr, so this parser reads stderr lines too (:attr:`reads_stderr`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from lirun.exec.failure_text import class_for_status, class_for_text, status_in_text
from lirun.exec.stream import (
    KEPT_REPLY_CHARS,
    Event,
    StreamParser,
    as_dict,
    as_int,
    as_str,
    reply_tail,
)
from lirun.provider_errors import ProviderError, classified_error
from lirun.providers.base import Capabilities, Provider

__all__ = ["GeminiStreamParser", "build_gemini_command", "gemini_failure_class"]

_MESSAGE_CHARS = 4096
_KEPT_STDERR_LINES = 5
# ``[API Error: {"error":{"code":401,...}}]``: the API's own error body inside the text.
_API_ERROR_BODY = re.compile(r"\[API Error:\s*(\{.*\})\s*\]", re.DOTALL)
# The Google API's ``error.status`` names, by what a person does next.
_GOOGLE_STATUS_CLASSES = {
    "UNAUTHENTICATED": "auth",
    "PERMISSION_DENIED": "auth",
    "RESOURCE_EXHAUSTED": "rate_limit",
    "INVALID_ARGUMENT": "rejected",
    "FAILED_PRECONDITION": "rejected",
    "NOT_FOUND": "rejected",
    "OUT_OF_RANGE": "rejected",
    "INTERNAL": "server_error",
    "UNAVAILABLE": "server_error",
    "DEADLINE_EXCEEDED": "server_error",
}
# Gemini CLI's own wordings (0.61.0), tried before the shared table (failure_text).
_GEMINI_TEXT_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        (
            "auth",
            r"must specify the GEMINI_API_KEY|Invalid auth method|API key not valid"
            r"|UNAUTHENTICATED|PERMISSION_DENIED",
        ),
        ("rate_limit", r"Resource has been exhausted|RESOURCE_EXHAUSTED|check quota"),
        ("overloaded", r"model is overloaded"),
        (
            "rejected",
            r"not running in a trusted directory|Invalid values:|Unknown argument"
            r"|INVALID_ARGUMENT|exceeds the maximum number of tokens|is not found for API",
        ),
        ("network", r"Model stream ended without a finish reason"),
    )
)
# ``Attempt 2 failed with status 429. Retrying with backoff... <error>`` or, with no HTTP
# status (a refused connection), ``Attempt 2 failed: <error>. Retrying with backoff...``.
_ATTEMPT = re.compile(r"^Attempt (\d+) failed\b(?: with status (\d{3}))?[.:]?\s*(.*)$")
_GAVE_UP = "Max attempts reached"
# Exit codes the CLI documents for failures before or outside the model call.
_EXIT_CLASSES = {41: "auth", 55: "rejected", 42: "rejected", 52: "rejected"}
# stderr noise on every run, and stack-trace lines: never the CLI's sentence.
_STDERR_NOISE = re.compile(
    r"^(?:Warning: 256-color|Ripgrep is not available|\[STARTUP\]|at |\}|\{$|\[cause\]"
    r"|status: \d|Loaded cached credentials|Data collection is disabled|YOLO mode is enabled)"
)
APPROVAL_MODE = "yolo"  # without it the shell and write tools are not registered


def build_gemini_command(
    executable: str,
    *,
    model: str | None = None,
    resume: str | None = None,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """``gemini -o stream-json --approval-mode yolo --skip-trust [-m M] [-r ID] [ARGS]``.

    The prompt is not an argument: it comes on stdin, written at once and closed (the CLI
    counts stdin without data within 500 ms as empty). ``--approval-mode yolo`` registers
    the shell and write tools a headless agent needs (without it they silently do not
    exist), ``--skip-trust`` trusts the run's directory (untrusted, it exits 55).
    ``--resume`` takes the session id the ``init`` event named, in the same directory.
    """
    argv = [executable, "-o", "stream-json", "--approval-mode", APPROVAL_MODE, "--skip-trust"]
    if model:
        argv += ["-m", model]
    if resume:
        argv += ["--resume", resume]
    return [*argv, *extra_args]


def gemini_failure_class(text: str | None, status: int | None = None) -> str | None:
    """The class of a Gemini failure: the HTTP status and API status inside its text, else
    its wording (Gemini's own first, then the shared table); None when nothing says."""
    body = _api_error_body(text)
    code = status if status is not None else as_int(body.get("code"))
    by_status = class_for_status(code) or _GOOGLE_STATUS_CLASSES.get(str(body.get("status")))
    if by_status is not None:
        return by_status
    if not text:
        return None
    gemini = next((name for name, pattern in _GEMINI_TEXT_CLASSES if pattern.search(text)), None)
    return gemini or class_for_text(text)


def _api_error_body(text: str | None) -> dict[str, Any]:
    match = _API_ERROR_BODY.search(text or "")
    if match is None:
        return {}
    try:
        decoded = json.loads(match.group(1))
    except ValueError:
        return {}
    return as_dict(as_dict(decoded).get("error"))


def _status_from_exit(exit_code: int | None) -> int | None:
    """The HTTP status the CLI's exit code stands for (it exits with it mod 256)."""
    if exit_code is None or exit_code <= 1:
        return None
    for status in (exit_code + 256, exit_code + 512):
        if 400 <= status <= 599:
            return status
    return None


class GeminiStreamParser(StreamParser):
    """Parses ``gemini -o stream-json``; the first ``result`` line is the terminal event.

    Assistant ``message`` deltas are joined into one reply per stretch of text (a tool
    call or the result ends a stretch); each delta is progress for the stall limit.
    """

    provider = "gemini"
    reads_stderr: ClassVar[bool] = True

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._pending: list[str] = []
        self._pending_chars = 0
        self.stderr_said: list[str] = []  # the first lines that were not noise
        self._pending_attempt: str | None = None  # retry or last attempt: the next line says

    @property
    def reply(self) -> str:
        if self._failure is not None:
            return ""  # a failed turn's text is cut short: it is not the answer
        # Deltas still pending when the stream stops (a stall, a kill) are a reply cut
        # short: they stay in the stream file, never the answer.
        return super().reply

    # --- stdout ----------------------------------------------------------------------------

    def _handle(self, obj: dict[str, Any]) -> list[Event]:
        kind = obj.get("type")
        if kind == "message":
            return self._on_message(obj)
        events = self._flush_reply()
        if kind == "init":
            events += self._on_init(obj)
        elif kind == "tool_use":
            call = {
                "id": obj.get("tool_id"),
                "name": obj.get("tool_name"),
                "input": obj.get("parameters"),
            }
            events.append(self._note_tool_call(call))
        elif kind == "tool_result":
            events.append(self._on_tool_result(obj))
        elif kind == "error":
            events.append(self._on_error(obj))
        elif kind == "result":
            events += self._on_result(obj)
        else:
            return events + self._ignore(str(kind))
        return events

    def _on_init(self, obj: dict[str, Any]) -> list[Event]:
        self._set_session_uid(obj.get("session_id"), replace=True)
        model = as_str(obj.get("model"))
        if model is not None and model != "auto":  # "auto": the router picks it later
            self.model = model
        data = {
            "provider": self.provider,
            "event": "init",
            "engine_session_uid": self.engine_session_uid,
            "model": model,
        }
        return [Event("session", data)]

    def _on_message(self, obj: dict[str, Any]) -> list[Event]:
        if obj.get("role") != "assistant":
            return []  # the user message echoes the prompt
        text = obj.get("content")
        if isinstance(text, str) and text:
            self._pending.append(text)
            self._pending_chars += len(text)
            if self._pending_chars > 2 * KEPT_REPLY_CHARS:  # bounded: keep the tail
                joined = reply_tail("".join(self._pending))
                self._pending, self._pending_chars = [joined], len(joined)
            self._note_progress()  # the model is answering
        return []

    def _flush_reply(self) -> list[Event]:
        if not self._pending:
            return []
        text = "".join(self._pending)
        self._pending, self._pending_chars = [], 0
        return [self._note_assistant_text(text)] if text.strip() else []

    def _on_tool_result(self, obj: dict[str, Any]) -> Event:
        error = as_dict(obj.get("error"))
        failed = obj.get("status") == "error"
        if error.get("type") == "tool_not_registered":
            # The tool does not exist in this approval mode: nothing ran, as if denied.
            self.permission_denials += 1
        result = {
            "id": obj.get("tool_id"),
            "status": obj.get("status"),
            "content": obj.get("output"),
            "is_error": failed,
        }
        if error:
            result["error"] = error
        return self._note_tool_result(result)

    def _on_error(self, obj: dict[str, Any]) -> Event:
        message = as_str(obj.get("message")) or "error"
        if obj.get("severity") == "warning":
            return self._warning(message, "stream")
        event = self._error(message, "stream")
        event.data["class"] = gemini_failure_class(message)
        return event

    def _on_result(self, obj: dict[str, Any]) -> list[Event]:
        stats = as_dict(obj.get("stats"))
        error = as_dict(obj.get("error"))
        summary = {
            "kind": "provider_result",
            "provider": self.provider,
            "status": obj.get("status"),
            "error_type": error.get("type"),
            "error": (as_str(error.get("message")) or "")[:_MESSAGE_CHARS] or None,
        }
        failure = self._result_failure(obj, error, summary)
        if not self._record_terminal(summary, failure):
            return [Event("terminal", {**summary, "extra": True})]
        duration = stats.get("duration_ms")
        if isinstance(duration, int | float) and not isinstance(duration, bool):
            self.duration_ms = float(duration)
        self.num_turns = 1
        events = [Event("terminal", summary)]
        models = as_dict(stats.get("models"))
        if models:
            # init says "auto" without -m: the model that answered is the key here.
            self.model = max(
                models, key=lambda m: as_int(as_dict(models[m]).get("total_tokens")) or 0
            )
        usage = {k: stats[k] for k in ("input_tokens", "output_tokens", "total_tokens", "cached")
                 if as_int(stats.get(k)) is not None}  # fmt: skip
        if usage and failure is None:  # an API error zeroes the stats: nothing was used
            self.usage = usage
            events.append(Event("usage", {"provider": self.provider, **usage}))
        return events

    def _result_failure(
        self, obj: dict[str, Any], error: dict[str, Any], summary: dict[str, Any]
    ) -> ProviderError | None:
        if obj.get("status") == "success":
            return None
        # A cut stream ends ``status:"error"`` with no ``error``: the error event said why.
        message = as_str(error.get("message")) or self.last_error or "gemini reported an error"
        status = status_in_text(message)
        failure_class = gemini_failure_class(message, status) or self.retry_class
        detail = {**summary, "status_in_text": status}
        if failure_class is None:
            return ProviderError(  # unclassified: the exit code may still say (finish)
                message[:_MESSAGE_CHARS], provider=self.provider, detail=detail
            )
        return classified_error(
            message[:_MESSAGE_CHARS],
            provider=self.provider,
            failure_class=failure_class,
            detail=detail,
        )

    # --- stderr ----------------------------------------------------------------------------

    def feed_stderr_line(self, line: str) -> list[Event]:
        """``Attempt N failed ...`` is a retry unless the CLI says it gave up ("Max attempts
        reached", on that line or on the next: a quota error's text spans two lines, so an
        attempt without either word waits for the next line); other lines that are not
        noise are kept as what the CLI said (a startup failure has only these)."""
        text = line.strip()
        if not text:
            return []
        events: list[Event] = []
        if self._pending_attempt is not None:
            pending, self._pending_attempt = self._pending_attempt, None
            events += self._on_attempt(pending, gave_up=_GAVE_UP in text)
        match = _ATTEMPT.match(text)
        if match is not None:
            if "Retrying" in text or _GAVE_UP in text:
                events += self._on_attempt(text, gave_up=_GAVE_UP in text)
            else:
                self._pending_attempt = text
        elif not _STDERR_NOISE.match(text) and len(self.stderr_said) < _KEPT_STDERR_LINES:
            self.stderr_said.append(text[:_MESSAGE_CHARS])
        return events

    def _on_attempt(self, text: str, *, gave_up: bool) -> list[Event]:
        match = _ATTEMPT.match(text)
        assert match is not None
        attempt = int(match.group(1))
        status = int(match.group(2)) if match.group(2) else None
        said = match.group(3) or text
        failure_class = gemini_failure_class(said, status) or (
            "network" if status is None else None
        )
        if gave_up:  # the last attempt: no retry follows, the result says the rest
            event = self._error(text, "stderr")
            event.data.update({"class": failure_class, "attempt": attempt})
            self.retrying = False
            return [event]
        data = {"attempt": attempt, "error_status": status, "message": text[:_MESSAGE_CHARS]}
        return [
            self._retry(text, data, attempt=attempt, status=status, failure_class=failure_class)
        ]

    # --- the verdict -----------------------------------------------------------------------

    def _finish_exception(
        self, exit_code: int | None, killed_by: str | None
    ) -> ProviderError | None:
        if not self.saw_terminal and self.lines_seen == 0 and killed_by is None:
            startup = self._startup_failure(exit_code)
            if startup is not None:
                return startup
        exc = super()._finish_exception(exit_code, killed_by)
        if exc is None or exc.failure_class is not None:
            return exc
        if self.saw_terminal and self._failure is None:
            return exc  # the stream said success: the exit code alone classifies nothing
        # The stream failed without saying which class: the exit code (HTTP status mod
        # 256) is the hint left, never the verdict on its own.
        status = _status_from_exit(exit_code) if killed_by is None else None
        failure_class = class_for_status(status) or (
            _EXIT_CLASSES.get(exit_code) if exit_code is not None and killed_by is None else None
        )
        if failure_class is not None:
            detail = {**exc.detail, "exit_code_hint": exit_code, "status_from_exit_code": status}
            return classified_error(
                str(exc), provider=self.provider, failure_class=failure_class, detail=detail
            )
        if self.saw_terminal:  # the CLI said it failed, not why: not retried blindly
            return classified_error(
                str(exc), provider=self.provider, retryable=False, detail=exc.detail
            )
        return exc

    def _startup_failure(self, exit_code: int | None) -> ProviderError | None:
        """Empty stdout, the CLI's sentence on stderr (no key: rc 41, untrusted: rc 55)."""
        if not self.stderr_said and exit_code in (None, 0):
            return None
        said = self.stderr_said[0] if self.stderr_said else None
        if said is not None and said.endswith(":") and len(self.stderr_said) > 1:
            said = f"{said} {self.stderr_said[1]}"  # "Invalid values:" / "Argument: ..."
        message = said or f"gemini exited with code {exit_code} before its stream started"
        failure_class = gemini_failure_class(" ".join(self.stderr_said)) or (
            _EXIT_CLASSES.get(exit_code) if exit_code is not None else None
        )
        detail = {"exit_code": exit_code, "stderr": list(self.stderr_said), "lines": 0}
        if failure_class is None:
            return classified_error(message, provider=self.provider, retryable=False, detail=detail)
        return classified_error(
            message, provider=self.provider, failure_class=failure_class, detail=detail
        )


class GeminiProvider(Provider):
    """Gemini CLI (``gemini``), headless with ``-o stream-json``, its tools registered by
    ``--approval-mode yolo`` and the run's directory trusted (``--skip-trust``)."""

    name = "gemini"
    package = "@google/gemini-cli"
    tested_versions = ("0.61.0", "0.61.0")
    capabilities = Capabilities(
        resume=True,
        session_id=True,
        reports_cost=False,
        approval_modes=("default", "auto_edit", "yolo", "plan"),
    )
    owned_flags: ClassVar[Mapping[str, str]] = {
        "-o": "lirun reads -o stream-json",
        "--output-format": "lirun reads -o stream-json",
        "-p": "lirun passes the prompt on stdin",
        "--prompt": "lirun passes the prompt on stdin",
        "-i": "lirun runs gemini headless",
        "--prompt-interactive": "lirun runs gemini headless",
    }

    def command(
        self,
        executable: str,
        *,
        model: str | None = None,
        resume: str | None = None,
        extra_args: Sequence[str] = (),
    ) -> list[str]:
        return build_gemini_command(executable, model=model, resume=resume, extra_args=extra_args)

    def new_parser(self) -> GeminiStreamParser:
        return GeminiStreamParser()

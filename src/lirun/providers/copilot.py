"""GitHub Copilot CLI: the ``--output-format json`` command and its parser.

Copilot CLI 1.0.102 (``@github/copilot``, a native binary in the npm package) writes one
JSON object per line, ``{"type", "data", "id", "timestamp", "parentId"}``, and ends every
run, failed or not, with ``{"type":"result","sessionId","exitCode","usage"}``; its exit
code is that ``exitCode`` (docs/providers.md, "GitHub Copilot CLI"). What the parser
reads:

* ``model.call_start`` names the model called; ``assistant.message_delta`` and
  ``assistant.tool_call_delta`` are the model answering (progress for the stall limit);
  ``assistant.message`` is a whole answer (its ``content`` the text, its ``model``);
* ``tool.execution_start`` / ``tool.execution_complete`` are a tool call and its result;
* ``model.call_failure`` is one failed API call (``statusCode`` when the API answered,
  ``failureKind:"transport"`` when it did not, the API's body in ``errorMessage``), and
  ``assistant.turn_retry`` says the CLI calls again (its ``reason``): a retry, shown live;
* ``session.error`` is the CLI giving up (``errorType``, ``statusCode``, its sentence);
* ``result`` is the terminal event: the engine session id, the exit code, and ``usage``
  (premium requests, API and session durations, lines changed).

The stream carries no token counts and no cost: the record has neither (the usage event
keeps what there is). A silent server is never ended by the CLI within the stall limit
(it waits on the request), so lirun's stall limit ends it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from lirun.exec.failure_text import class_for_code, class_for_status, class_for_text
from lirun.exec.stream import Event, StreamParser, as_dict, as_int, as_list, as_str
from lirun.provider_errors import ProviderError, classified_error
from lirun.providers.base import Capabilities, Provider, version_number

__all__ = ["CopilotProvider", "CopilotStreamParser", "build_copilot_command", "failure_class"]

_MESSAGE_CHARS = 4096
# ``session.error.errorType`` values that name a class by themselves (1.0.102); "query"
# (any failed request) does not: the status and the API's words say more.
_ERROR_TYPES = {"authentication": "auth", "rate_limit": "rate_limit"}
# The CLI's own wordings (1.0.102), tried before the shared table (failure_text).
_COPILOT_TEXT_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        ("auth", r"Authentication failed with provider"),
        ("rejected", r"rejected the prompt as too long|not found on provider"),
        ("overloaded", r"overloaded"),
        # A 200 whose chunks are not JSON: the connection worked, the answer did not.
        ("server_error", r"Failed to parse [\w-]+ stream chunk"),
        (
            "network",
            r"Could not connect to (?:local )?model provider|error sending request"
            r"|connection closed before message completed|error decoding response body",
        ),
    )
)
# ``assistant.turn_retry.reason`` → the class it retries on, where no failed call said.
_RETRY_REASONS = {
    "transient_auth_error": "auth",
    "rate_limit": "rate_limit",
    "api_error": "server_error",
    "streaming_error": "network",
    "forced_compaction": "rejected",
}


def build_copilot_command(
    executable: str,
    *,
    model: str | None = None,
    resume: str | None = None,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """``copilot --output-format json --allow-all-tools --no-auto-update [--model M]
    [--resume ID] [ARGS]``.

    The prompt is not an argument: without ``-p`` the CLI reads it from its stdin when
    that is not a terminal, so it stays out of ``ps``. ``--allow-all-tools`` is required
    headless (without it every tool call waits for an approval nobody gives);
    ``--no-auto-update`` runs the version installed, the one ``--version`` reported,
    never one it downloaded. ``--resume`` takes the ``result`` line's ``sessionId``.
    """
    argv = [executable, "--output-format", "json", "--allow-all-tools", "--no-auto-update"]
    if model:
        argv += ["--model", model]
    if resume:
        argv += ["--resume", resume]
    return [*argv, *extra_args]


def failure_class(
    *,
    status: int | None = None,
    error_type: str | None = None,
    code: str | None = None,
    text: str | None = None,
) -> str | None:
    """The class of a failure the CLI reported: its ``errorType`` where that names one,
    then the HTTP status (a 5xx the API calls overloaded is overloaded), the API's error
    code, the CLI's words and the shared table; None when nothing says."""
    by_type = _ERROR_TYPES.get(error_type or "")
    if by_type is not None:
        return by_type
    words = next((name for name, p in _COPILOT_TEXT_CLASSES if p.search(text or "")), None)
    if status is not None and status >= 500 and words == "overloaded":
        return "overloaded"
    return class_for_status(status) or class_for_code(code) or words or class_for_text(text)


def _api_message(raw: Any) -> str | None:
    """The API's ``message`` inside ``errorMessage`` (a JSON body), else the text itself."""
    text = as_str(raw)
    if text is None:
        return None
    try:
        body = json.loads(text)
    except ValueError:
        return text
    if isinstance(body, str):
        return body or None
    body = as_dict(body)
    return as_str(as_dict(body.get("error")).get("message")) or as_str(body.get("message")) or text


class CopilotStreamParser(StreamParser):
    """Parses ``copilot --output-format json``; ``result`` is the terminal event, and a
    ``session.error`` before it makes the run failed whatever ``exitCode`` says."""

    provider = "copilot"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._call_failure: dict[str, Any] | None = None  # the latest failed call
        self._session_error: dict[str, Any] | None = None
        self.turns = 0
        self._aborted: str | None = None

    @property
    def reply(self) -> str:
        return "" if self._failure is not None else super().reply

    def _handle(self, obj: dict[str, Any]) -> list[Event]:
        kind = str(obj.get("type"))
        data = as_dict(obj.get("data"))
        if kind in ("assistant.message_delta", "assistant.tool_call_delta"):
            # The model is answering (the stall limit's measure); the call has not gone
            # through yet (a cut stream retries it), so its retries still count on.
            self.last_progress_at = self._clock()
            return []
        if kind == "model.call_start":
            self.model = as_str(data.get("model")) or self.model
            return []
        if kind == "model.call_finished":
            if data.get("outcome") == "success":
                self._note_progress()
            return []
        if kind == "assistant.message":
            return self._on_message(data)
        if kind == "tool.execution_start":
            call = {"id": data.get("toolCallId"), "name": data.get("toolName"),
                    "input": data.get("arguments")}  # fmt: skip
            return [self._note_tool_call(call)]
        if kind == "tool.execution_complete":
            return [self._on_tool_result(data)]
        if kind == "model.call_failure":
            return [self._on_call_failure(data)]
        if kind == "assistant.turn_retry":
            return [self._on_turn_retry(data)]
        if kind == "session.error":
            return [self._on_session_error(data)]
        if kind == "session.warning":
            return [self._warning(as_str(data.get("message")) or "warning", "stream")]
        if kind == "abort":
            # A signal reached the CLI (lirun's stall limit or timeout): it stops the turn
            # and still ends with a result of exitCode 0, which is no success.
            self._aborted = as_str(data.get("reason")) or "abort"
            return [self._warning(f"copilot aborted the turn ({self._aborted})", "stream")]
        if kind == "assistant.turn_start":
            self.turns += 1
            return []
        if kind == "result":
            return self._on_result(obj)
        if kind in ("user.message", "assistant.turn_end", "assistant.idle", "session.info"):
            return []  # the prompt's echo, turn bounds; session.info repeats turn_retry
        return self._ignore(kind)

    def _on_message(self, data: dict[str, Any]) -> list[Event]:
        self.model = as_str(data.get("model")) or self.model
        text = data.get("content")
        if isinstance(text, str) and text.strip():
            return [self._note_assistant_text(text)]
        return []

    def _on_tool_result(self, data: dict[str, Any]) -> Event:
        result: dict[str, Any] = {
            "id": data.get("toolCallId"),
            "is_error": data.get("success") is not True,
            "content": as_dict(data.get("result")).get("content"),
        }
        if error := as_dict(data.get("error")):
            result["error"] = error
        return self._note_tool_result(result)

    def _on_call_failure(self, data: dict[str, Any]) -> Event:
        said = _api_message(data.get("errorMessage")) or "model call failed"
        status = as_int(data.get("statusCode"))
        kind = as_str(data.get("failureKind"))
        found = failure_class(status=status, code=as_str(data.get("errorCode")), text=said)
        if found is None and kind == "transport":
            found = "network"  # the API never answered
        attempt = as_int(data.get("retryAttempt"))
        self._call_failure = {"status": status, "class": found, "message": said,
                              "kind": kind, "attempt": attempt}  # fmt: skip
        self.last_error_status = status or self.last_error_status
        message = f"HTTP {status}: {said}" if status else said
        event = self._error(message, "model.call_failure")
        event.data.update({"class": found, "error_status": status, "failure_kind": kind})
        return event

    def _on_turn_retry(self, data: dict[str, Any]) -> Event:
        reason = as_str(data.get("reason")) or "retry"
        failed = self._call_failure or {}
        attempt = failed.get("attempt")
        said = failed.get("message") or reason
        found = failed.get("class") or _RETRY_REASONS.get(reason)
        status = failed.get("status")
        number = attempt + 1 if isinstance(attempt, int) else None
        info = {"attempt": number, "reason": reason, "error_status": status,
                "message": f"copilot retry {number or '?'} ({reason}): {said}"}  # fmt: skip
        return self._retry(said, info, attempt=number, status=status, failure_class=found)

    def _on_session_error(self, data: dict[str, Any]) -> Event:
        said = as_str(data.get("message")) or "copilot reported an error"
        self._session_error = data
        self.retrying = False  # the CLI gave up
        event = self._error(said, "session.error")
        event.data.update(
            {"error_type": data.get("errorType"), "error_status": data.get("statusCode")}
        )
        return event

    def _on_result(self, obj: dict[str, Any]) -> list[Event]:
        self._set_session_uid(obj.get("sessionId"), replace=True)
        usage = as_dict(obj.get("usage"))
        error = self._session_error or {}
        summary = {
            "kind": "provider_result",
            "provider": self.provider,
            "exit_code": obj.get("exitCode"),
            "error_type": error.get("errorType"),
            "error": (as_str(error.get("message")) or "")[:_MESSAGE_CHARS] or None,
            "turns": self.turns,
            "retries": self.retries,
        }
        failure = self._result_failure(obj, summary)
        if not self._record_terminal(summary, failure):
            return [Event("terminal", {**summary, "extra": True})]
        duration = usage.get("sessionDurationMs")
        if isinstance(duration, int | float) and not isinstance(duration, bool):
            self.duration_ms = float(duration)
        answered = self.assistant_text_count + self.tool_call_count
        self.num_turns = answered or None
        events = [Event("terminal", summary)]
        if usage:
            # No tokens and no cost in 1.0.102's stream: these counts are all it says.
            changes = as_dict(usage.get("codeChanges"))
            self.usage = {
                "premium_requests": usage.get("premiumRequests"),
                "total_api_duration_ms": usage.get("totalApiDurationMs"),
                "lines_added": changes.get("linesAdded"),
                "lines_removed": changes.get("linesRemoved"),
                "files_modified": len(as_list(changes.get("filesModified"))),
            }
            events.append(Event("usage", {"provider": self.provider, **self.usage}))
        return events

    def _result_failure(self, obj: dict[str, Any], summary: dict[str, Any]) -> ProviderError | None:
        exit_code = as_int(obj.get("exitCode"))
        error = self._session_error
        if error is None and self._aborted is not None:
            return ProviderError(  # stopped from outside: finish says by whom
                f"copilot aborted the turn ({self._aborted})",
                provider=self.provider,
                detail=summary,
            )
        if error is None and exit_code == 0:
            return None
        failed = self._call_failure or {}
        said = (as_str((error or {}).get("message")) or failed.get("message")
                or f"copilot ended with exitCode {exit_code}")  # fmt: skip
        status = as_int((error or {}).get("statusCode")) or failed.get("status")
        found = failure_class(
            status=status, error_type=as_str((error or {}).get("errorType")), text=said
        )
        found = found or failed.get("class") or self.retry_class
        detail = {**summary, "error_status": status, "last_call_failure": failed or None}
        if found is None:
            return classified_error(
                said[:_MESSAGE_CHARS], provider=self.provider, retryable=False, detail=detail
            )
        return classified_error(
            said[:_MESSAGE_CHARS], provider=self.provider, failure_class=found, detail=detail
        )

    def _finish_exception(
        self, exit_code: int | None, killed_by: str | None
    ) -> ProviderError | None:
        if killed_by == "stall" and self._aborted is not None:
            # lirun's stall limit stopped it; the result the CLI wrote on the way out
            # does not change what ended the run.
            return self._stall_failure({"exit_code": exit_code, "killed_by": killed_by})
        return super()._finish_exception(exit_code, killed_by)


class CopilotProvider(Provider):
    """GitHub Copilot CLI (``copilot``), headless with ``--output-format json``, every
    tool allowed (``--allow-all-tools``, required without a terminal). ``copilot/MODEL``
    picks the model (``--model``); a custom endpoint is the CLI's own setting
    (``COPILOT_PROVIDER_BASE_URL`` and its key), passed through from the environment."""

    name = "copilot"
    package = "@github/copilot"
    tested_versions = ("1.0.102", "1.0.102")
    capabilities = Capabilities(resume=True, session_id=True, reports_cost=False)
    owned_flags: ClassVar[Mapping[str, str]] = {
        "--output-format": "lirun reads --output-format json",
        "-p": "lirun passes the prompt on stdin",
        "--prompt": "lirun passes the prompt on stdin",
        "-i": "lirun runs copilot headless",
        "--interactive": "lirun runs copilot headless",
        "--acp": "lirun runs copilot headless",
    }

    def command(
        self,
        executable: str,
        *,
        model: str | None = None,
        resume: str | None = None,
        extra_args: Sequence[str] = (),
    ) -> list[str]:
        return build_copilot_command(executable, model=model, resume=resume, extra_args=extra_args)

    def new_parser(self) -> CopilotStreamParser:
        return CopilotStreamParser()

    def parse_version(self, output: str) -> str | None:
        """``GitHub Copilot CLI 1.0.102.`` → ``1.0.102`` (the sentence's full stop is not
        part of the version)."""
        found = version_number(output)
        return found.rstrip(".") if found else None

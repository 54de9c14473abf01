"""Claude Code: the ``-p ... --output-format stream-json --verbose`` command, its options
and its parser, as one provider (``lirun.providers.base.Provider``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from lirun.exec.failure_text import (
    class_for_code,
    class_for_status,
    class_for_text,
    is_auth_status,
    is_catch_all_code,
)
from lirun.exec.stream import (
    Event,
    StreamParser,
    as_dict,
    as_int,
    as_list,
    as_str,
    reply_tail,
)
from lirun.exec.verdict import StreamVerdict
from lirun.provider_errors import ProviderError, classified_error, is_retryable_cause
from lirun.providers.base import Capabilities, OptionKind, OptionValue, Provider

# Hitting a configured limit fails the same way on every retry, whatever else went wrong.
_LIMIT_SUBTYPES = frozenset({"error_max_turns", "error_max_budget_usd"})
# An assistant event with this model was made up by the CLI: no model call happened.
SYNTHETIC_MODEL = "<synthetic>"
_TEXT_CHARS = 1000


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
        self.api_key_source: str | None = None
        self.assistant_events = 0
        self.synthetic_events = 0
        self.assistant_error_class: str | None = None
        # What a catch-all code (``server_error`` on a dropped connection) would say: the
        # last resort, after the retry evidence.
        self.catch_all_class: str | None = None
        self.model_changes: list[dict[str, Any]] = []

    @property
    def reply(self) -> str:
        if self._failure is not None:
            return ""  # an error result's text is the provider error, not the reply
        if self.result_text:
            return self.result_text
        return super().reply

    def finish(self, exit_code: int | None, *, killed_by: str | None = None) -> StreamVerdict:
        verdict = super().finish(exit_code, killed_by=killed_by)
        verdict.evidence.extend(self.model_changes)
        if self.assistant_events and self.synthetic_events == self.assistant_events:
            # Every answer was made up by the CLI: no model was called, so none is recorded.
            verdict.model = None
            verdict.no_model_call = True
            verdict.evidence.append(
                {"kind": "provider_no_model_call", "provider": self.provider, "model": self.model}
            )
        return verdict

    def _handle(self, obj: dict[str, Any]) -> list[Event]:
        kind = obj.get("type")
        self._set_session_uid(obj.get("session_id"), replace=False)
        if kind == "system" and obj.get("subtype") == "init":
            return self._on_init(obj)
        if kind == "system" and obj.get("subtype") == "api_retry":
            return self._on_api_retry(obj)
        if kind == "system" and obj.get("subtype") == "model_fallback":
            return self._on_model_fallback(obj)
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
        self.api_key_source = as_str(obj.get("apiKeySource"))
        data = {
            "provider": self.provider,
            "event": "init",
            "engine_session_uid": self.engine_session_uid,
            "model": self.model,
            "cwd": obj.get("cwd"),
            "version": obj.get("claude_code_version"),
            "api_key_source": self.api_key_source,
            "permission_mode": obj.get("permissionMode"),
        }
        return [Event("session", data)]

    def _on_model_fallback(self, obj: dict[str, Any]) -> list[Event]:
        """``system/model_fallback``: the CLI switched models; the record names the new one."""
        new = next(
            (
                m
                for k in ("fallback_model", "to", "model", "new_model")
                if (m := as_str(obj.get(k)))
            ),
            None,
        )
        old = next((m for k in ("original_model", "from") if (m := as_str(obj.get(k)))), None)
        fact: dict[str, Any] = {"kind": "provider_model_fallback", "provider": self.provider}
        fact.update({"from": old or self.model, "to": new, "reason": obj.get("reason")})
        if new is not None:
            self.model = new
        if len(self.model_changes) < 5:
            self.model_changes.append(fact)
        return [Event("session", {**fact, "event": "model_fallback"})]

    def _on_api_retry(self, obj: dict[str, Any]) -> list[Event]:
        """``system/api_retry``: Claude Code retries a failed API call itself (providers.md)."""
        error = as_str(obj.get("error")) or "unknown"
        status = as_int(obj.get("error_status"))
        attempt, limit = as_int(obj.get("attempt")), as_int(obj.get("max_retries"))
        said = error if status is None else f"{error} (HTTP {status})"
        # No status and no code: the API never answered (refused, unreachable).
        failure_class = class_for_status(status) or class_for_code(error)
        if failure_class is None and status is None:
            failure_class = "network"
        data = {
            "attempt": attempt,
            "max_retries": limit,
            "error": error,
            "error_status": status,
            "retry_delay_ms": obj.get("retry_delay_ms"),
            "message": f"API retry {attempt or '?'}/{limit or '?'}: {said}",
        }
        if is_auth_status(status) or failure_class == "auth":
            # Claude Code retries a refused key for minutes; the first refusal says enough.
            self._flag_fatal(
                f"{said} on API attempt {attempt or '?'} of {limit or '?'}; stopped at the "
                "first refusal instead of waiting out claude's retries",
                "auth",
                {"api_retry": data, "api_key_source": self.api_key_source},
            )
        return [
            self._retry(said, data, attempt=attempt, status=status, failure_class=failure_class)
        ]

    def _on_assistant(self, obj: dict[str, Any]) -> list[Event]:
        message = as_dict(obj.get("message"))
        model = as_str(message.get("model"))
        error = as_str(obj.get("error"))
        self.assistant_events += 1
        if model == SYNTHETIC_MODEL:
            self.synthetic_events += 1
        elif error is None:
            # A completed API call: progress even when it carries only thinking.
            self._note_progress()
            if model is not None:
                self.model = model  # the model that answered (after any fallback)
        if error is not None:
            return self._on_assistant_error(error, message)
        events: list[Event] = []
        for block in as_list(message.get("content")):
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
        return events

    def _on_assistant_error(self, error: str, message: dict[str, Any]) -> list[Event]:
        """An assistant event with ``error``: its text is the CLI's error message (made up
        by the CLI, not the model's reply), so it is the error, never the answer."""
        texts = [
            text.strip()
            for block in as_list(message.get("content"))
            if as_dict(block).get("type") == "text" and (text := as_str(as_dict(block).get("text")))
        ]
        said = " ".join(t for t in texts if t)[:_TEXT_CHARS] or error
        if is_catch_all_code(error):
            failure_class = class_for_text(said)
            self.catch_all_class = class_for_code(error)
        else:
            failure_class = class_for_code(error) or class_for_text(said)
        self.assistant_error_class = failure_class
        if failure_class == "auth":
            self._flag_fatal(said, "auth", {"error": error, "api_key_source": self.api_key_source})
        event = self._error(said, "assistant")
        event.data.update({"error": error, "class": failure_class or self.catch_all_class})
        return [event]

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
        texts = [t.strip() for t in texts if t.strip()]
        # The provider's own words: the result text, else what the error subtype means.
        message = texts[0][:_TEXT_CHARS] if texts else _subtype_words(subtype, status)
        if subtype in _LIMIT_SUBTYPES:  # a configured limit, not the provider's failure
            return classified_error(
                message, provider=self.provider, retryable=False, detail=summary
            )
        # Structure and words of the result first, then the assistant's exact code, then
        # what the CLI said it was retrying, and only then a catch-all code: Claude Code
        # 2.1.332 ends a dropped connection with ``server_error``, after retrying it as one.
        failure_class = (
            _result_class(obj, status, texts)
            or self.assistant_error_class
            or self.retry_class
            or self.catch_all_class
        )
        if failure_class is not None:
            return classified_error(
                message, provider=self.provider, failure_class=failure_class, detail=summary
            )
        retryable = is_retryable_cause(
            api_error_status=status, error_codes=self.errors, messages=[*texts, *self.errors]
        )
        return classified_error(
            message, provider=self.provider, retryable=retryable, detail=summary
        )


def _result_class(obj: dict[str, Any], status: int | None, texts: list[str]) -> str | None:
    """The class a failed ``result`` names: its terminal reason, HTTP status, its
    ``api_error`` code (2.1.332: ``connection_failed``), then words."""
    if obj.get("terminal_reason") == "prompt_too_long":
        return "rejected"
    by_structure = class_for_status(status) or class_for_code(as_str(obj.get("api_error")))
    if by_structure is not None:
        return by_structure
    return next((c for t in texts if (c := class_for_text(t)) is not None), None)


def _subtype_words(subtype: str, status: int | None) -> str:
    http = f" (HTTP {status})" if status is not None else ""
    if subtype == "error_max_turns":
        return f"claude stopped at its turn limit{http}"
    if subtype == "error_max_budget_usd":
        return f"claude stopped at its budget limit{http}"
    return f"claude reported an error ({subtype or 'no subtype'}){http}"


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


class ClaudeProvider(Provider):
    """Claude Code (``claude``), headless with ``-p`` and ``stream-json``."""

    name = "claude"
    package = "@anthropic-ai/claude-code"
    tested_versions = ("2.1.197", "2.1.332")
    capabilities = Capabilities(
        resume=True,
        session_id=True,
        reports_cost=True,
        approval_modes=("default", "acceptEdits", "plan", "bypassPermissions"),
    )
    options: ClassVar[Mapping[str, OptionKind]] = {
        "permission_mode": "text",
        "allowed_tools": "texts",
        "disallowed_tools": "texts",
        "max_turns": "count",
        "append_system_prompt": "text",
        "mcp_config": "texts",
    }
    owned_flags: ClassVar[Mapping[str, str]] = {
        "-p": "lirun runs claude -p itself",
        "--print": "lirun runs claude -p itself",
        "--output-format": "lirun reads --output-format stream-json",
        "--input-format": "lirun passes the prompt as text on stdin",
    }
    version_in_stream = True

    def command(
        self,
        executable: str,
        *,
        model: str | None = None,
        resume: str | None = None,
        extra_args: Sequence[str] = (),
    ) -> list[str]:
        return build_claude_command(executable, model=model, resume=resume, extra_args=extra_args)

    def new_parser(self) -> ClaudeStreamParser:
        return ClaudeStreamParser()

    def option_args(
        self, values: Mapping[str, OptionValue], provider_args: Sequence[str]
    ) -> list[str]:
        # provider_args after the named options, so the command line's own flags win over
        # a profile's; the variadic list options stay last (nothing positional follows).
        args: list[str] = []
        if "permission_mode" in values:
            args += ["--permission-mode", str(values["permission_mode"])]
        if "max_turns" in values:
            args += ["--max-turns", str(values["max_turns"])]
        if "append_system_prompt" in values:
            # = form: a text that starts with a dash must not read as an option
            args.append(f"--append-system-prompt={values['append_system_prompt']}")
        args += provider_args
        for key, flag in (
            ("allowed_tools", "--allowedTools"),
            ("disallowed_tools", "--disallowedTools"),
            ("mcp_config", "--mcp-config"),
        ):
            listed = values.get(key)
            if isinstance(listed, tuple) and listed:
                args += [flag, *map(str, listed)]
        return args

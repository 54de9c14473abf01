"""OpenCode: the headless ``run --format json`` command and its parser (stdout and stderr).

OpenCode 1.18.33 (docs/providers.md, "OpenCode") writes one JSON line per part of the
answer: ``step_start``, ``text`` (the whole text of a part), ``tool_use`` (a tool call with
its final ``state``), ``step_finish`` (the step's ``reason``, ``tokens`` and ``cost``) and,
when the call fails for good, ``error`` (``error.name`` and ``error.data.statusCode``). There
is no closing event: a ``step_finish`` whose reason is not ``tool-calls`` ends the run, an
``error`` ends it failed, and a stream that ends with neither was cut.

What the JSON stream never says is told only in OpenCode's own log, which ``--print-logs``
writes on stderr (``key=value`` lines): the model each call went to (``message=stream
providerID=… modelID=…``), the calls that failed (``message="stream error"``) and so the
retries (a call of the same agent started after its failed one; OpenCode retries a 429,
5xx or network failure up to 5 times, 2 s doubling to 30 s, and writes nothing on stdout
meanwhile). So this parser reads stderr too (:attr:`reads_stderr`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from lirun.errors import UsageError
from lirun.exec.failure_text import class_for_status, class_for_text
from lirun.exec.stream import Event, StreamParser, as_dict, as_int, as_str
from lirun.provider_errors import ProviderError, classified_error
from lirun.providers.base import Capabilities, Provider

__all__ = ["OpencodeProvider", "OpencodeStreamParser", "build_opencode_command"]

_MESSAGE_CHARS = 4096
_TOKEN_KEYS = ("input", "output", "reasoning", "total")
# Step reasons that mean the model goes on after its tool calls (not the end of the run).
_CONTINUES = frozenset({"tool-calls"})
# OpenCode's error names that say the class whatever the status (1.18.33).
_NAME_CLASSES = {
    "ProviderAuthError": "auth",
    "ContextOverflowError": "rejected",
    "ProviderModelNotFoundError": "rejected",
    "ModelNotFoundError": "rejected",
}
# Wordings the shared table does not know: OpenAI's 500 ("The server had an error
# processing your request"), Bun's for a connection closed before an answer, and the AI
# SDK's for a body that is not the protocol.
_OPENCODE_TEXT_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        ("rejected", r"model not found|ProviderModelNotFound"),
        ("server_error", r"server had an error|AI_JSONParseError|JSON parsing failed"),
        ("network", r"socket connection was closed|cannot connect to api"),
    )
)
# OpenCode's ``UnknownError`` when its own local server failed (a model missing from its
# configuration gave this in 1.18.33): nothing the model's API said.
_OWN_FAILURE = re.compile(r"unexpected server error\. check server logs", re.IGNORECASE)
# ``key=value`` and ``key="quoted value"`` pairs of one log line.
_LOG_PAIR = re.compile(r'([\w.]+)=("(?:[^"\\]|\\.)*"|\S*)')
_PERMISSION_REFUSED = re.compile(r"rejected permission|permission .{0,20}denied", re.IGNORECASE)


def build_opencode_command(
    executable: str,
    *,
    model: str | None = None,
    resume: str | None = None,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """``opencode run --format json --print-logs --log-level INFO [-m P/M] [--session ID]``.

    ``model`` is ``PROVIDER/MODEL`` (``li agent opencode/PROVIDER/MODEL``), as ``-m`` takes
    it; none leaves the choice to OpenCode's configuration. The prompt is not an argument:
    with no message on the command line OpenCode reads stdin to its end. ``--print-logs``
    at ``INFO`` puts on stderr what the JSON stream leaves out (the model, the retries).
    ``--session`` continues the session the stream named.
    """
    argv = [executable, "run", "--format", "json", "--print-logs", "--log-level", "INFO"]
    if model:
        provider, sep, name = model.partition("/")
        if sep and (not provider.strip() or not name.strip()):
            raise UsageError(f"opencode model {model!r} is incomplete; use opencode/PROVIDER/MODEL")
        # A bare MODEL goes as given: OpenCode says what it makes of it.
        argv += ["-m", f"{provider.strip()}/{name.strip()}" if sep else model.strip()]
    if resume:
        argv += ["--session", resume]
    return [*argv, *extra_args]


def opencode_failure_class(
    text: str | None, status: int | None = None, name: str | None = None
) -> str | None:
    """The class of an OpenCode failure: its error name, then the words (OpenCode's own,
    then the shared table), then the HTTP status; None when nothing says. Words come before
    the status so that a 503 that says "overloaded" is an overload, as for every provider."""
    if name in _NAME_CLASSES:
        return _NAME_CLASSES[name]
    if text and _OWN_FAILURE.match(text):
        return None  # OpenCode's own local server failed, not the model's API
    if text:
        own = next((c for c, pattern in _OPENCODE_TEXT_CLASSES if pattern.search(text)), None)
        said = own or class_for_text(text)
        if said is not None:
            return said
    return class_for_status(status)


def parse_log_line(line: str) -> dict[str, str]:
    """One ``--print-logs`` line as its ``key=value`` pairs (quotes and escapes undone)."""
    pairs: dict[str, str] = {}
    for key, raw in _LOG_PAIR.findall(line):
        value = raw
        if len(raw) >= 2 and raw[0] == raw[-1] == '"':
            value = raw[1:-1].replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        pairs.setdefault(key, value)
    return pairs


class OpencodeStreamParser(StreamParser):
    """Parses ``opencode run --format json`` on stdout and ``--print-logs`` on stderr.

    The end of the run is the first ``step_finish`` whose reason is not ``tool-calls``
    (completed) or the first ``error`` (failed); usage and cost are summed over the steps.
    """

    provider = "opencode"
    reads_stderr: ClassVar[bool] = True

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.steps = 0
        self._tokens: dict[str, int] = {}
        self._cache: dict[str, int] = {}
        self._cost = 0.0
        self._priced = False
        # The agent whose last model call failed (its next call is a retry), and that error.
        self._failed_call: dict[str, str] = {}
        self.calling = False  # the run's first model call started (the log said so)

    @property
    def reply(self) -> str:
        return "" if self._failure is not None else super().reply

    # --- stdout ----------------------------------------------------------------------------

    def _handle(self, obj: dict[str, Any]) -> list[Event]:
        kind = obj.get("type")
        events = self._on_session(obj)
        part = as_dict(obj.get("part"))
        if kind == "step_start":
            self.steps += 1
        elif kind == "text":
            text = as_str(part.get("text"))
            if text is not None and text.strip():
                events.append(self._note_assistant_text(text))
        elif kind == "tool_use":
            events += self._on_tool(part)
        elif kind == "step_finish":
            events += self._on_step_finish(part)
        elif kind == "error":
            events += self._on_error(as_dict(obj.get("error")))
        else:
            events += self._ignore(str(kind))
        return events

    def _on_session(self, obj: dict[str, Any]) -> list[Event]:
        if self.engine_session_uid is not None or as_str(obj.get("sessionID")) is None:
            return []
        self._set_session_uid(obj.get("sessionID"), replace=False)
        data = {"provider": self.provider, "event": obj.get("type")}
        return [Event("session", {**data, "engine_session_uid": self.engine_session_uid})]

    def _on_tool(self, part: dict[str, Any]) -> list[Event]:
        """A tool call arrives once, finished: its call and its result in one line."""
        state = as_dict(part.get("state"))
        call = {"id": part.get("callID"), "name": part.get("tool"), "input": state.get("input")}
        status = as_str(state.get("status"))
        events = [self._note_tool_call(call)]
        if status not in ("completed", "error"):
            return events  # still running when written (not seen in 1.18.33)
        error = as_str(state.get("error"))
        if error is not None and _PERMISSION_REFUSED.search(error):
            self.permission_denials += 1
        result: dict[str, Any] = {
            "id": part.get("callID"),
            "status": status,
            "content": state.get("output") if status == "completed" else error,
            "is_error": status == "error",
        }
        events.append(self._note_tool_result(result))
        return events

    def _on_step_finish(self, part: dict[str, Any]) -> list[Event]:
        reason = as_str(part.get("reason")) or "unknown"
        events = self._add_usage(as_dict(part.get("tokens")), part.get("cost"))
        if reason in _CONTINUES:
            return events
        summary = {
            "kind": "provider_step_finish",
            "provider": self.provider,
            "reason": reason,
            "steps": self.steps,
        }
        if self._record_terminal(summary, None):
            self.num_turns = self.steps or 1
            return [Event("terminal", summary), *events]
        return [Event("terminal", {**summary, "extra": True}), *events]

    def _add_usage(self, tokens: dict[str, Any], cost: Any) -> list[Event]:
        """Each step reports its own tokens and cost (USD): the run's are their sums."""
        if not tokens:
            return []
        for key in _TOKEN_KEYS:
            self._tokens[key] = self._tokens.get(key, 0) + (as_int(tokens.get(key)) or 0)
        cache = as_dict(tokens.get("cache"))
        for key in ("read", "write"):
            self._cache[key] = self._cache.get(key, 0) + (as_int(cache.get(key)) or 0)
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            self._cost += float(cost)
            self._priced = True
        self.usage = {
            "input_tokens": self._tokens["input"],
            "output_tokens": self._tokens["output"],
            "reasoning_tokens": self._tokens["reasoning"],
            "total_tokens": self._tokens["total"],
            "cache_read_tokens": self._cache["read"],
            "cache_write_tokens": self._cache["write"],
        }
        self.total_cost_usd = self._cost if self._priced else None
        return [Event("usage", {"provider": self.provider, "tokens": tokens, "cost": cost})]

    def _on_error(self, error: dict[str, Any]) -> list[Event]:
        data = as_dict(error.get("data"))
        name = as_str(error.get("name")) or "error"
        message = as_str(data.get("message")) or name
        status = as_int(data.get("statusCode"))
        failure_class = opencode_failure_class(message, status, name)
        event = self._error(message, "stream")
        event.data.update({"name": name, "status": status, "class": failure_class})
        if status is not None:
            self.last_error_status = status
        summary = {
            "kind": "provider_error",
            "provider": self.provider,
            "name": name,
            "status": status,
            "retryable": data.get("isRetryable"),
            "error": message[:_MESSAGE_CHARS],
        }
        failure = self._failure_for(message, failure_class, summary)
        if not self._record_terminal(summary, failure):
            return [event, Event("terminal", {**summary, "extra": True})]
        return [event, Event("terminal", summary)]

    def _failure_for(
        self, message: str, failure_class: str | None, summary: dict[str, Any]
    ) -> ProviderError:
        if failure_class is None:  # OpenCode failed and did not say why: not retried blindly
            return classified_error(
                f"opencode failed: {message[:_MESSAGE_CHARS]}",
                provider=self.provider,
                retryable=False,
                detail=summary,
            )
        return classified_error(
            message[:_MESSAGE_CHARS],
            provider=self.provider,
            failure_class=failure_class,
            detail=summary,
        )

    # --- stderr (--print-logs) -------------------------------------------------------------

    def feed_stderr_line(self, line: str) -> list[Event]:
        """The log lines that say what stdout does not: the session and OpenCode's version,
        the model of each call, a failed call, and a call started again after it failed (a
        retry)."""
        if "message=" not in line:
            return []
        if not self.calling:
            # Starting up (config, snapshot, session) can take seconds, many on a busy
            # machine, and the log says each step: not a stall. From the run's first model
            # call on, only the model's answers and the tools are progress.
            self._note_progress()
        log = parse_log_line(line)
        message = log.get("message")
        if message == "created":
            return self._on_created(log)
        if log.get("small") != "false":  # the title and other small calls are not the run
            return []
        agent = log.get("agent") or "?"
        if message == "stream":
            return self._on_call_start(agent, log)
        if message == "stream error":
            said = log.get("error.error") or "model call failed"
            self._failed_call[agent] = said
            event = self._error(said, "stderr")
            event.data.update({"agent": agent, "class": opencode_failure_class(said)})
            return [event]
        return []

    def _on_created(self, log: dict[str, str]) -> list[Event]:
        """The session OpenCode made for the run, and its version: known before the first
        model call (a run that never gets an answer names its session too)."""
        if self.engine_session_uid is not None or as_str(log.get("id")) is None:
            return []
        self._set_session_uid(log.get("id"), replace=False)
        self.provider_version = as_str(log.get("version")) or self.provider_version
        data = {"provider": self.provider, "event": "created", "version": self.provider_version}
        return [Event("session", {**data, "engine_session_uid": self.engine_session_uid})]

    def _on_call_start(self, agent: str, log: dict[str, str]) -> list[Event]:
        provider, model = log.get("providerID"), log.get("modelID")
        if provider and model and self.model is None:
            self.model = f"{provider}/{model}"  # the run's first agent answers for it
        failed = self._failed_call.pop(agent, None)
        if failed is None:
            self.calling = True  # the stall limit counts from the call's start
            self._note_progress()
            return []
        data = {"agent": agent, "message": f"opencode retries a failed call: {failed}"}
        return [self._retry(failed, data, failure_class=opencode_failure_class(failed))]


class OpencodeProvider(Provider):
    """OpenCode (``opencode``, npm ``opencode-ai``), headless with ``run --format json``:
    ``opencode/PROVIDER/MODEL`` picks OpenCode's provider and model. Its tools run as
    OpenCode's configuration allows (``--auto`` approves what it would ask about)."""

    name = "opencode"
    package = "opencode-ai"
    tested_versions = ("1.18.33", "1.18.33")
    capabilities = Capabilities(resume=True, session_id=True, reports_cost=True)
    owned_flags: ClassVar[Mapping[str, str]] = {
        "--format": "lirun reads --format json",
        "--print-logs": "lirun reads OpenCode's log on stderr",
        "--log-level": "lirun reads OpenCode's log at INFO",
        "-i": "lirun runs opencode headless",
        "--interactive": "lirun runs opencode headless",
        "--attach": "lirun runs its own opencode process",
    }

    def command(
        self,
        executable: str,
        *,
        model: str | None = None,
        resume: str | None = None,
        extra_args: Sequence[str] = (),
    ) -> list[str]:
        return build_opencode_command(executable, model=model, resume=resume, extra_args=extra_args)

    def new_parser(self) -> OpencodeStreamParser:
        return OpencodeStreamParser()

"""Provider-neutral incremental stream parsing: events, messages and the parser base.

A parser is fed one stdout line at a time and never raises on what it reads: provider
streams grow new event types and can be cut mid-line, and supervision must go on.

Memory is bounded by design: each event is handed on as it is parsed (the caller records
it as a message) and the parser keeps only counters, the last reply and the few facts the
verdict needs, each list and text capped. An agent that makes ten thousand tool calls
costs the parser no more than one that makes ten.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from lirun.exec.failure_text import class_for_text
from lirun.exec.message import Message, MessageRole
from lirun.exec.verdict import StreamVerdict
from lirun.provider_errors import ProviderError, ProviderNonRetryableError, classified_error

EventKind = Literal[
    "session",
    "assistant_text",
    "tool_call",
    "tool_result",
    "usage",
    "terminal",
    "error",
    "retry",
    "warning",
    "unparsed",
]

_ROLE_BY_KIND: dict[str, MessageRole] = {
    "session": "system",
    "assistant_text": "assistant",
    "tool_call": "tool_call",
    "tool_result": "tool_result",
    "usage": "usage",
    "terminal": "system",
    "error": "error",
    "retry": "system",
    "warning": "system",
    "unparsed": "system",
}
# What counts as the agent getting somewhere (the stall limit): the model answered or a
# tool ran. Retry notices, warnings and unparsed lines do not.
PROGRESS_KINDS = frozenset({"assistant_text", "tool_call", "tool_result", "usage", "terminal"})
_KEPT_WARNINGS = 5
_RETRYABLE_STALLS = frozenset({"network", "rate_limit", "overloaded", "server_error"})
_SNIPPET_CHARS = 500
# Bounded memory: only the latest errors are kept (they classify a failure), plus a count,
# each cut to its start (what went wrong is said first).
_KEPT_ERRORS = 20
_KEPT_ERROR_CHARS = 4096
# The reply keeps its tail, as the record does (legs.MAX_REPLY_CHARS): the end of an
# answer is its conclusion.
KEPT_REPLY_CHARS = 64 * 1024
# Later terminal events are evidence; the first few say enough, the rest are counted.
_KEPT_EXTRA_TERMINALS = 5
# Unknown event types are counted by name; a stream that invents a name per line (an id
# in the type) must not grow the counter, so names past this many count as "other".
_KEPT_IGNORED_TYPES = 32
_IGNORED_TYPE_CHARS = 80
_OTHER_TYPES = "other"


@dataclass(frozen=True, slots=True)
class Event:
    """Something worth keeping that one stream line said."""

    kind: EventKind
    data: dict[str, Any]

    def to_message(self) -> Message:
        # Assistant text is stored verbatim: the evidence gate reads it as the answer.
        if self.kind == "assistant_text":
            return Message("assistant", str(self.data.get("text", "")))
        payload = json.dumps(self.data, sort_keys=True, default=str)
        return Message(_ROLE_BY_KIND[self.kind], payload)


def events_to_messages(events: Iterable[Event]) -> list[Message]:
    return [event.to_message() for event in events]


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def reply_tail(text: str) -> str:
    """``text`` as the parser keeps it: at most :data:`KEPT_REPLY_CHARS`, the tail."""
    return text[-KEPT_REPLY_CHARS:]


class StreamParser(ABC):
    """Shared state and the exit-code rules; subclasses map their provider's event types.

    ``finish`` decides (docs/providers.md, "Provider-neutral verdict"):

    * no terminal event, whatever the exit code: failed, plain :class:`ProviderError`
      (unclassified, so teardown may reconcile with a linked engine session);
    * a failing terminal event: failed, with the classified error built for it;
    * a successful terminal event and exit code 0, or an unknown exit code, or a kill by the
      supervisor (``killed_by``, e.g. after the post-terminal grace period): completed;
    * a successful terminal event and then a non-zero exit the supervisor did not cause:
      failed, :class:`ProviderNonRetryableError`. The CLI contradicted its own success
      (crash on shutdown, failed session write), so the run is not trusted as complete; the
      terminal event stays in the evidence for anyone who wants to look.
    """

    provider: ClassVar[str] = ""
    # True for a CLI that says part of its story only on stderr (Gemini's retries and
    # startup failures): the leg hands each stderr line to :meth:`feed_stderr_line`.
    reads_stderr: ClassVar[bool] = False

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.engine_session_uid: str | None = None
        self.model: str | None = None
        # Counts and the last reply, never the events themselves (see the module docstring).
        self.assistant_text_count = 0
        self.last_assistant_text = ""
        self.tool_call_count = 0
        self.tool_result_count = 0
        self.permission_denials = 0
        self.usage: dict[str, Any] | None = None
        self.total_cost_usd: float | None = None
        self.num_turns: int | None = None
        self.terminal: dict[str, Any] | None = None
        self.extra_terminals: list[dict[str, Any]] = []  # the first few only
        self.extra_terminal_count = 0
        self.errors: list[str] = []
        self.last_error: str | None = None
        # Attempts the provider made at an API call it retried itself (not notices), the
        # last one's HTTP status and class, and whether retrying is the last thing it did.
        self.retries = 0
        self._episode = 0  # attempts at the call being retried now (its own numbering)
        self.last_error_status: int | None = None
        self.retry_class: str | None = None
        self.retrying = False
        self.warnings: list[str] = []  # the latest few
        self.warning_count = 0
        self.started_at = clock()
        self.last_progress_at: float | None = None
        # The first unambiguous signal that the run cannot succeed (a refused key): the
        # supervisor stops the CLI at once instead of waiting out its retries.
        self.fatal: ProviderError | None = None
        self.provider_version: str | None = None
        self.duration_ms: float | None = None
        self.saw_terminal = False
        self.terminal_at: float | None = None
        self.lines_seen = 0
        self.unparsed_lines = 0
        self.ignored_types: Counter[str] = Counter()
        self.last_event_type: str | None = None
        self._failure: ProviderError | None = None

    def feed_line(self, line: str) -> list[Event]:
        """Parse one stdout line; garbage becomes an ``unparsed`` event, never an exception."""
        text = line.strip()
        if not text:
            return []
        self.lines_seen += 1
        try:
            obj = json.loads(text)
        except ValueError:
            return [self._unparsed(text, "not JSON (truncated or plain text)")]
        if not isinstance(obj, dict):
            return [self._unparsed(text, "not a JSON object")]
        kind = obj.get("type")
        self.last_event_type = kind if isinstance(kind, str) else None
        try:
            events = self._handle(obj)
        except Exception as exc:  # a drifted event schema must not stop supervision
            return [self._unparsed(text, f"malformed {kind!r} event: {exc}")]
        if any(event.kind in PROGRESS_KINDS for event in events):
            self._note_progress()
        return events

    def feed_stderr_line(self, line: str) -> list[Event]:
        """One stderr line (only when :attr:`reads_stderr`); never raises, like stdout."""
        del line
        return []

    @abstractmethod
    def _handle(self, obj: dict[str, Any]) -> list[Event]:
        """Map one decoded event to the events worth keeping, updating state."""

    @property
    def reply(self) -> str:
        return self.last_assistant_text

    def finish(self, exit_code: int | None, *, killed_by: str | None = None) -> StreamVerdict:
        """The verdict once the process is gone (see the class docstring for the rules)."""
        exception = self._finish_exception(exit_code, killed_by)
        return StreamVerdict(
            provider=self.provider,
            status="failed" if exception is not None else "completed",
            exception=exception,
            reply=self.reply,
            engine_session_uid=self.engine_session_uid,
            model=self.model,
            usage=self.usage,
            cost=self.total_cost_usd,
            num_turns=self.num_turns,
            exit_code=exit_code,
            evidence=self._evidence(exit_code, killed_by),
            provider_version=self.provider_version,
            retries=self.retries,
            last_error=self.last_error,
            last_error_status=self.last_error_status,
            retrying=self.retrying,
            retry_class=self.retry_class,
            duration_ms=self.duration_ms,
            tool_calls=self.tool_call_count,
            permission_denials=self.permission_denials,
        )

    def _finish_exception(
        self, exit_code: int | None, killed_by: str | None
    ) -> ProviderError | None:
        detail = {"exit_code": exit_code, "killed_by": killed_by}
        if killed_by == "stall" and not self.saw_terminal:
            return self._stall_failure(detail)
        if self.fatal is not None and (not self.saw_terminal or self._failure is None):
            return self.fatal
        if not self.saw_terminal:
            # The provider's own words first: "unexpected status 401 Unauthorized" says more
            # than the missing terminal event it caused.
            said = f"{self.provider} error: {self.last_error}; " if self.last_error else ""
            retried = f", after {self.retries} attempts" if self.retries else ""
            return ProviderError(
                f"{said}{self.provider} stream ended with no terminal event (exit code "
                f"{exit_code}, last event {self.last_event_type!r}{retried})",
                provider=self.provider,
                detail={**detail, "last_event_type": self.last_event_type},
            )
        if self._failure is not None:
            return self._failure
        if exit_code not in (None, 0) and killed_by is None:
            return ProviderNonRetryableError(
                f"{self.provider} reported success but exited with code {exit_code}",
                provider=self.provider,
                detail={**detail, "terminal": self.terminal},
            )
        return None

    def _evidence(self, exit_code: int | None, killed_by: str | None) -> list[dict[str, Any]]:
        evidence: list[dict[str, Any]] = []
        if self.terminal is not None:
            evidence.append(self.terminal)
        evidence.extend(
            {**extra, "kind": "provider_extra_terminal"} for extra in self.extra_terminals
        )
        if self.extra_terminal_count > len(self.extra_terminals):
            omitted = self.extra_terminal_count - len(self.extra_terminals)
            evidence.append(
                {
                    "kind": "provider_extra_terminals_omitted",
                    "provider": self.provider,
                    "count": omitted,
                }
            )
        exit_fact = {"kind": "provider_exit", "provider": self.provider, "exit_code": exit_code}
        evidence.append({**exit_fact, "killed_by": killed_by})
        if not self.saw_terminal:
            evidence.append(
                {
                    "kind": "provider_no_terminal",
                    "provider": self.provider,
                    "last_event_type": self.last_event_type,
                    "lines": self.lines_seen,
                }
            )
        if self.errors:
            evidence.append({"kind": "provider_errors", "messages": self.errors[-5:]})
        if self.retries:
            evidence.append(
                {
                    "kind": "provider_retries",
                    "provider": self.provider,
                    "count": self.retries,
                    "attempts": self.retries,
                    "last_error": self.last_error,
                    "last_error_status": self.last_error_status,
                    "class": self.retry_class,
                    "retrying_at_end": self.retrying,
                }
            )
        if self.warning_count:
            evidence.append(
                {
                    "kind": "provider_warnings",
                    "provider": self.provider,
                    "count": self.warning_count,
                    "messages": list(self.warnings),
                }
            )
        if self.unparsed_lines or self.ignored_types:
            noise = {"unparsed_lines": self.unparsed_lines, "ignored": dict(self.ignored_types)}
            evidence.append({"kind": "provider_stream_noise", **noise})
        return evidence

    def _record_terminal(self, summary: dict[str, Any], failure: ProviderError | None) -> bool:
        """Keep the first terminal event; later ones are only evidence. True when first."""
        if self.saw_terminal:
            self.extra_terminal_count += 1
            if len(self.extra_terminals) < _KEPT_EXTRA_TERMINALS:
                self.extra_terminals.append(summary)
            return False
        self.saw_terminal = True
        self.terminal_at = self._clock()
        self.terminal = summary
        self._failure = failure
        return True

    def _set_session_uid(self, value: Any, *, replace: bool) -> None:
        # ``replace`` for the event that names this run's session (a resume may get a new one)
        uid = as_str(value)
        if uid is not None and (replace or self.engine_session_uid is None):
            self.engine_session_uid = uid

    def _ignore(self, kind: str) -> list[Event]:
        kind = kind[:_IGNORED_TYPE_CHARS]
        if kind not in self.ignored_types and len(self.ignored_types) >= _KEPT_IGNORED_TYPES:
            kind = _OTHER_TYPES
        self.ignored_types[kind] += 1
        return []

    def _note_assistant_text(self, text: str) -> Event:
        self.assistant_text_count += 1
        self.last_assistant_text = reply_tail(text)
        return Event("assistant_text", {"text": text})

    def _note_tool_call(self, call: dict[str, Any]) -> Event:
        self.tool_call_count += 1
        return Event("tool_call", call)

    def _note_tool_result(self, result: dict[str, Any]) -> Event:
        self.tool_result_count += 1
        return Event("tool_result", result)

    def _unparsed(self, text: str, why: str) -> Event:
        self.unparsed_lines += 1
        return Event("unparsed", {"note": why, "line": text[:_SNIPPET_CHARS]})

    def _note_error(self, message: str) -> None:
        self.errors.append(message[:_KEPT_ERROR_CHARS])
        del self.errors[:-_KEPT_ERRORS]
        self.last_error = message[:_SNIPPET_CHARS]

    def _error(self, message: str, source: str) -> Event:
        self._note_error(message)
        return Event("error", {"provider": self.provider, "source": source, "message": message})

    def _retry(
        self,
        message: str,
        data: dict[str, Any],
        *,
        attempt: int | None = None,
        status: int | None = None,
        failure_class: str | None = None,
    ) -> Event:
        """The provider retries on its own (an API error, a lost connection): evidence to
        keep and a line to show, never noise, never terminal, never progress.

        ``attempt``: the provider's own attempt number (the highest seen counts for the
        call being retried); without one each notice is one more attempt."""
        # Each retried call numbers its attempts from 1: the count adds up the calls.
        base = self.retries - self._episode
        self._episode = max(self._episode, attempt) if attempt is not None else self._episode + 1
        self.retries = base + self._episode
        self.last_error_status = status
        self.retry_class = failure_class or class_for_text(message)
        self.retrying = True
        self._note_error(message)
        return Event(
            "retry",
            {
                "provider": self.provider,
                "count": self.retries,
                "class": self.retry_class,
                **data,
            },
        )

    def _warning(self, message: str, source: str) -> Event:
        """A notice the CLI goes on after (a transport fallback): shown and kept as
        evidence, never the run's error."""
        self.warning_count += 1
        self.warnings.append(message[:_SNIPPET_CHARS])
        del self.warnings[:-_KEPT_WARNINGS]
        return Event("warning", {"provider": self.provider, "source": source, "message": message})

    def progress_at(self) -> float:
        """When the run last made progress, for the stall limit: the last progress event
        (the start before one), or now while a tool call runs (called, no result yet: a
        long build is work, not a stall; ``--timeout`` bounds it)."""
        if self.tool_call_count > self.tool_result_count:
            return self._clock()
        return self.last_progress_at if self.last_progress_at is not None else self.started_at

    def _note_progress(self) -> None:
        self.last_progress_at = self._clock()
        self.retrying = False
        self._episode = 0  # the retried call went through; a later one counts anew

    def _flag_fatal(self, message: str, failure_class: str, detail: dict[str, Any]) -> None:
        """The first unambiguous sign the run cannot succeed; later ones add nothing."""
        if self.fatal is None:
            self.fatal = classified_error(
                message, provider=self.provider, failure_class=failure_class, detail=detail
            )

    def activity(self) -> str:
        """What the CLI was doing at the end, in a few words (for a stall or a timeout)."""
        if not self.retrying:
            return f"{self.provider} made no progress (last event {self.last_event_type!r})"
        tries = "1 attempt" if self.retries == 1 else f"{self.retries} attempts"
        status = f"HTTP {self.last_error_status}, " if self.last_error_status else ""
        return f"{self.provider} was retrying the API ({tries}; last: {status}{self.last_error})"

    def _stall_failure(self, detail: dict[str, Any]) -> ProviderError:
        since = self.last_progress_at if self.last_progress_at is not None else self.started_at
        quiet = max(0.0, self._clock() - since)
        # A stall is retryable whatever it was: the class of the retries, else "stalled".
        known = self.retry_class if self.retrying else None
        return classified_error(
            f"no progress for {quiet:.0f} s: {self.activity()}",
            provider=self.provider,
            failure_class=known if known in _RETRYABLE_STALLS else "stalled",
            detail={**detail, "attempts": self.retries, "last_error": self.last_error},
        )

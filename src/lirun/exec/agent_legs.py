"""An agent CLI's legs: its command line, its stream through the provider's parser, and
the pure judgement of how it ended (:func:`judge_agent`), beside the generic command's in
``legs``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import IO, TYPE_CHECKING, Any

from lirun.exec.agent_record import (
    agent_record,
    present,
    retry_note,
    retrying_fact,
)
from lirun.exec.capture import ChunkSink, LineSink, open_buffer
from lirun.exec.legs import LegContext, LegOutcome, base_extras, imposed_status
from lirun.exec.provider_options import ProviderOptions
from lirun.exec.trouble import PROGRESS_KINDS, progress_fields
from lirun.exec.versions import cli_version
from lirun.providers.registry import get_provider

if TYPE_CHECKING:
    from lirun.exec.stream import Event, StreamParser
    from lirun.exec.supervisor import ProcessResult, StreamProgress
    from lirun.exec.verdict import StreamVerdict

__all__ = ["CONTINUATION_PROMPT", "AgentLeg", "AgentProgram", "judge_agent", "prompt_file"]


CONTINUATION_PROMPT = (
    "The previous attempt at this task was stopped by a timeout. Continue the task from "
    "where it stopped and finish it."
)


def judge_agent(
    result: ProcessResult | None,
    signal_name: str | None,
    verdict: StreamVerdict,
    *,
    require_change: bool = False,
) -> LegOutcome:
    """An agent CLI: the stream's verdict, unless ``li``'s signal or a timer stopped it.

    A kill after the post-terminal grace period leaves the verdict standing (the parser
    is told who killed it). The verdict's exception goes to teardown so the provider
    reason and the linked-engine rule apply. ``require_change``: the reply alone is not
    evidence of work.
    """
    base = base_extras(result, signal_name)
    extras = replace(
        base,
        evidence=(*base.evidence, *verdict.evidence),
        metadata={**base.metadata, **_verdict_metadata(verdict)},
        tool_calls=verdict.tool_calls,
        permission_denials=verdict.permission_denials,
        assistant_output=bool(verdict.reply.strip()),
        require_change=require_change,
    )
    stopped = imposed_status(result, signal_name)
    if stopped == "timed_out" and verdict.retrying:
        # Timed out while the provider was retrying: the record says so, and why.
        extras = replace(
            extras,
            provider_retrying=True,
            evidence=(*extras.evidence, retrying_fact(verdict)),
        )
    return LegOutcome(
        status=stopped or verdict.status,
        exception=None if stopped else verdict.exception,
        extras=extras,
        engine_session_uid=verdict.engine_session_uid,
        reply=verdict.reply,
        exit_code=result.exit_code if result is not None else None,
        killed_by=result.killed_by if result is not None else None,
        record=agent_record(result, verdict, stopped=stopped is not None),
        summary_note=retry_note(result, verdict) if stopped else None,
    )


def _verdict_metadata(verdict: StreamVerdict) -> dict[str, Any]:
    facts = {
        "provider": verdict.provider,
        "model": verdict.model,
        "usage": verdict.usage,
        "cost_usd": verdict.cost,
        "num_turns": verdict.num_turns,
    }
    return {k: v for k, v in facts.items() if v is not None}


# --- an agent CLI -----------------------------------------------------------------------------


class AgentLeg:
    """Lines: stdout goes to ``stream/<branch>.jsonl`` and through the provider's parser.

    Every event becomes a message as it arrives; a new engine session uid is reported
    at once so the row and the branch name it while the agent is still running.
    """

    def __init__(
        self,
        argv: list[str],
        parser: StreamParser,
        ctx: LegContext,
        prompt: str = "",
        *,
        require_change: bool = False,
        environment: Callable[[Mapping[str, str]], dict[str, str]] | None = None,
        untested: Callable[[str | None], dict[str, str] | None] | None = None,
        version: str | None = None,
    ) -> None:
        self.argv = argv
        self.environment = environment  # the provider's additions for a headless run
        # The provider's tested version window, and the version asked before the start.
        self.untested = untested
        self.version = version
        self.require_change = require_change
        self.stdin: IO[bytes] | None = prompt_file(prompt)
        self.parser = parser
        self.ctx = ctx
        self.saw_assistant_text = False
        self._uid: str | None = None
        self._progress: dict[str, Any] = {}
        stream = ctx.run.stream_dir
        self.stdout: ChunkSink = LineSink(
            open_buffer(ctx.run.stream_buffer_path(ctx.branch_id)), self._on_line
        )
        stderr_fd = open_buffer(stream / "stderr.log")
        self.stderr: ChunkSink = (
            LineSink(stderr_fd, self._on_stderr_line, echo_fd=ctx.echo.stderr_fd)
            if parser.reads_stderr
            else ChunkSink(stderr_fd, echo_fd=ctx.echo.stderr_fd)
        )

    def _on_line(self, line: str) -> None:
        self._take(self.parser.feed_line(line))

    def _on_stderr_line(self, line: str) -> None:
        # A CLI that reports its retries only on stderr (Gemini): the same events, live.
        try:
            events = self.parser.feed_stderr_line(line)
        except Exception:  # stderr wording drifts; supervision must go on
            return
        self._take(events)

    def _take(self, events: list[Event]) -> None:
        progressed = False
        for event in events:
            if event.kind == "assistant_text":
                self.saw_assistant_text = True
            progressed = progressed or event.kind in PROGRESS_KINDS
            self.ctx.record(event.to_message())
            if self.ctx.on_event is not None:
                self.ctx.on_event(self.parser.provider, event)
        if progressed:
            self._report_progress()
        uid = self.parser.engine_session_uid
        if uid is not None and uid != self._uid:
            self._uid = uid
            self.ctx.on_engine_uid(uid)

    def _report_progress(self) -> None:
        fields = progress_fields(self.parser)
        changed = {k: v for k, v in fields.items() if self._progress.get(k) != v}
        if changed:
            self._progress.update(changed)
            self.ctx.on_progress(changed)

    def terminal_seen(self) -> bool:
        return self.parser.saw_terminal

    def extra_env(self, base: Mapping[str, str]) -> dict[str, str]:
        return self.environment(base) if self.environment is not None else {}

    def stream_progress(self) -> StreamProgress:
        return self

    def progress_at(self) -> float:
        return self.parser.progress_at()

    def must_stop(self) -> bool:
        return self.parser.fatal is not None

    def judge(self, result: ProcessResult | None, signal_name: str | None) -> LegOutcome:
        exit_code = result.exit_code if result is not None else None
        killed_by = result.killed_by if result is not None else None
        verdict = self.parser.finish(exit_code, killed_by=killed_by)
        if self.untested is not None:  # the version the stream names, else the one asked
            notice = self.untested(verdict.provider_version or self.version)
            verdict.evidence = [*verdict.evidence, *([notice] if notice else [])]
        return judge_agent(result, signal_name, verdict, require_change=self.require_change)

    def close(self) -> None:
        self.stdout.close()
        self.stderr.close()
        if self.stdin is not None:
            self.stdin.close()


def prompt_file(prompt: str) -> IO[bytes]:
    """The prompt as the child's stdin: an anonymous file (no name on disk, no pipe to
    keep fed), so it stays out of ``ps`` and the child sees end-of-file after it, never
    the caller's stdin (Claude Code waits on an open one)."""

    handle = tempfile.TemporaryFile()  # noqa: SIM115 (closed by the leg)
    handle.write(prompt.encode("utf-8"))
    handle.flush()
    handle.seek(0)
    return handle


@dataclass(frozen=True, slots=True)
class AgentProgram:
    """An agent CLI found at ``executable``; ``prompt`` is this execution's message.

    ``options`` are the provider's own options (profiles, playbooks, ``-- ARGS``); they
    are checked against the provider when the program is built. ``require_change``: the
    reply alone is not evidence of work (a change or a produced artifact is needed).
    """

    provider: str
    executable: str
    prompt: str
    model: str | None = None
    extra_args: tuple[str, ...] = ()
    options: ProviderOptions = field(default_factory=ProviderOptions)
    require_change: bool = False

    def __post_init__(self) -> None:
        self.options.check_for(self.provider)

    def command_line(self, resume_uid: str | None = None) -> list[str]:
        provider = get_provider(self.provider)
        return provider.command(
            self.executable,
            model=self.model,
            resume=resume_uid if provider.capabilities.resume else None,
            extra_args=[*self.extra_args, *self.options.to_args(self.provider)],
        )

    def record_fields(self) -> dict[str, Any]:
        """Columns known before the child starts: the prompt, the options, the version."""

        return present(
            {
                "prompt": self.prompt,
                "provider_options_json": self.options.to_record(),
                "provider_version": self.asked_version(),
            }
        )

    def asked_version(self) -> str | None:
        """``EXE --version``'s answer (cached per binary), unless the stream says it."""
        provider = get_provider(self.provider)
        if provider.version_in_stream:
            return None
        return cli_version(self.executable, provider.version_args, provider.parse_version)

    def new_leg(self, ctx: LegContext) -> AgentLeg:
        provider = get_provider(self.provider)
        # A provider that cannot resume starts the task again instead of continuing it.
        resumed = ctx.continuation and provider.capabilities.resume
        return AgentLeg(
            self.command_line(ctx.resume_uid),
            provider.new_parser(),
            ctx,
            CONTINUATION_PROMPT if resumed else self.prompt,
            require_change=self.require_change,
            environment=provider.environment,
            untested=provider.untested_version,
            version=self.asked_version(),
        )

"""Legs: one run of a child process inside an execution, and how its ending is judged.

An execution has one leg, or two with ``--resume-on-timeout`` (one row, one id). A
*program* (a generic command or an agent CLI) makes a fresh :class:`Leg` per run: its
command line, its stream sinks, and the pure judgement of how it ended
(:func:`judge_command`, :func:`judge_agent`) that becomes ``teardown_persist``'s input.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import IO, TYPE_CHECKING, Any, Protocol

from lirun.exec.agent_record import (
    MAX_REPLY_CHARS,
    agent_record,
    present,
    retry_note,
    retrying_fact,
    token_counts,
)
from lirun.exec.capture import DEFAULT_TAIL_BYTES, ChunkSink, LineSink, open_buffer
from lirun.exec.provider_options import ProviderOptions
from lirun.exec.providers import get_provider
from lirun.exec.trouble import PROGRESS_KINDS, progress_fields
from lirun.exec.versions import cli_version
from lirun.record.facts import TeardownExtras

if TYPE_CHECKING:  # the generic-command path never needs the stream parsers
    from lirun.exec.stream import Event, Message, StreamParser
    from lirun.exec.supervisor import ProcessResult, StreamProgress
    from lirun.exec.verdict import StreamVerdict
    from lirun.record.rundir import RunDir

__all__ = [
    "CONTINUATION_PROMPT",
    "AgentProgram",
    "CommandProgram",
    "Echo",
    "Leg",
    "LegContext",
    "LegOutcome",
    "Program",
    "judge_agent",
    "judge_command",
    "retry_note",
    "stop_status",
    "token_counts",
]


CONTINUATION_PROMPT = (
    "The previous attempt at this task was stopped by a timeout. Continue the task from "
    "where it stopped and finish it."
)


@dataclass(frozen=True, slots=True)
class Echo:
    """Where ``li`` echoes the child's streams (None: captured only)."""

    stdout_fd: int | None = None
    stderr_fd: int | None = None


@dataclass(slots=True)
class LegOutcome:
    """A leg's in-memory verdict: teardown's ``status``, ``exception`` and ``extras``."""

    status: str
    exception: BaseException | None = None
    extras: TeardownExtras = field(default_factory=TeardownExtras)
    engine_session_uid: str | None = None
    response_text: str = ""
    exit_code: int | None = None
    killed_by: str | None = None
    # Row columns saying what the leg did (RECORD_FIELDS), and a clause for the summary.
    record: dict[str, Any] = field(default_factory=dict)
    summary_note: str | None = None

    def leg_evidence(self, number: int) -> dict[str, Any]:
        return {
            "kind": "leg",
            "leg": number,
            "status": self.status,
            "exit_code": self.exit_code,
            "killed_by": self.killed_by,
        }


@dataclass(slots=True)
class LegContext:
    """What a leg needs from the execution around it."""

    run: RunDir
    branch_id: str
    echo: Echo = Echo()
    record: Callable[[Message], None] = lambda message: None
    on_engine_uid: Callable[[str], None] = lambda uid: None
    on_event: Callable[[str, Event], None] | None = None
    # The row's progress columns changed (retries, last error, model, version): written
    # while the agent runs, so ``li status`` shows them before it ends.
    on_progress: Callable[[dict[str, Any]], None] = lambda fields: None
    resume_uid: str | None = None
    continuation: bool = False


class Leg(Protocol):
    argv: list[str]
    stdout: ChunkSink
    stderr: ChunkSink
    # What the child reads: an agent's prompt; None: the execution's default.
    stdin: IO[bytes] | None

    def terminal_seen(self) -> bool: ...

    def stream_progress(self) -> StreamProgress | None: ...

    def judge(self, result: ProcessResult | None, signal_name: str | None) -> LegOutcome: ...

    def close(self) -> None: ...


class Program(Protocol):
    """A generic command or an agent CLI: what the execution row records, and its legs."""

    @property
    def provider(self) -> str: ...

    @property
    def model(self) -> str | None: ...

    def command_line(self, resume_uid: str | None = None) -> list[str]: ...

    def record_fields(self) -> dict[str, Any]: ...

    def new_leg(self, ctx: LegContext) -> Leg: ...


# --- judgement (pure) -------------------------------------------------------------------------


def stop_status(signal_name: str) -> str:
    """SIGINT to ``li`` aborts; SIGTERM (or SIGHUP) cancels (design.md §5)."""
    return "aborted" if signal_name == "SIGINT" else "cancelled"


def _stopped(result: ProcessResult | None, signal_name: str | None) -> str | None:
    """The status imposed by ``li``'s own signal or timers, if any (they outrank the child)."""
    if signal_name is not None:
        return stop_status(signal_name)
    if result is not None and result.timed_out:
        return "timed_out"
    return None


def _base_extras(result: ProcessResult | None, signal_name: str | None) -> TeardownExtras:
    if result is None:
        return TeardownExtras(
            signal=signal_name,
            cancel_cause=f"li received {signal_name}" if signal_name is not None else None,
        )
    stopped = [_stop_fact(result)] if result.killed_by is not None else []
    return TeardownExtras(
        exit_code=result.exit_code,
        signal=signal_name,
        cancel_cause=f"li received {signal_name}" if signal_name is not None else None,
        idle_timeout=result.killed_by == "idle",
        evidence=(*stopped, *result.killed_descendants),
        metadata={"duration_s": round(result.duration, 3)},
    )


def _stop_fact(result: ProcessResult) -> dict[str, Any]:
    """Evidence that li stopped the child: why, and whether SIGTERM was enough."""
    return {
        "kind": "supervisor_stop",
        "killed_by": result.killed_by,
        "li_signal": result.signal_name,
        "sigkill": result.escalated_to_sigkill,
        "exit_code": result.exit_code,
    }


def judge_command(
    result: ProcessResult | None,
    signal_name: str | None,
    stdout_tail: str = "",
    *,
    require_change: bool = False,
) -> LegOutcome:
    """A generic command: its exit code is its verdict, exit 0 completed, else failed.

    The extras mark the execution as a command, so teardown completes an exit 0 by its
    exit code (kept as evidence, as a non-zero one is for ``run.failed.exit_nonzero``)
    unless ``require_change`` (or an artifact contract) asks for evidence of work: then
    only a change or a produced artifact counts. The stdout excerpt is the command's
    output (recorded, never evidence of work).
    """
    extras = replace(_base_extras(result, signal_name), require_change=require_change, command=True)
    exit_code = result.exit_code if result is not None else None
    status = _stopped(result, signal_name) or ("completed" if exit_code == 0 else "failed")
    record = {
        "child_exit_code": exit_code,
        "reply_text": stdout_tail[-MAX_REPLY_CHARS:] if stdout_tail.strip() else None,
        "duration_s": round(result.duration, 3) if result is not None else None,
    }
    return LegOutcome(
        status=status,
        extras=extras,
        response_text=stdout_tail,
        exit_code=exit_code,
        killed_by=result.killed_by if result is not None else None,
        record=present(record),
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
    base = _base_extras(result, signal_name)
    extras = replace(
        base,
        evidence=(*base.evidence, *verdict.evidence),
        metadata={**base.metadata, **_verdict_metadata(verdict)},
        tool_calls=verdict.tool_calls,
        permission_denials=verdict.permission_denials,
        assistant_output=bool(verdict.final_text.strip()),
        require_change=require_change,
    )
    stopped = _stopped(result, signal_name)
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
        response_text=verdict.final_text,
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


# --- a generic command ------------------------------------------------------------------------


class CommandLeg:
    """Chunks, not lines: stdout and stderr are copied to ``stream/stdout.log`` / ``stderr.log``."""

    def __init__(self, argv: list[str], ctx: LegContext, *, require_change: bool = False) -> None:
        self.argv = argv
        self.stdin: IO[bytes] | None = None
        self.require_change = require_change
        stream = ctx.run.stream_dir
        self.stdout = ChunkSink(
            open_buffer(stream / "stdout.log"),
            echo_fd=ctx.echo.stdout_fd,
            tail_bytes=DEFAULT_TAIL_BYTES,
        )
        self.stderr = ChunkSink(open_buffer(stream / "stderr.log"), echo_fd=ctx.echo.stderr_fd)

    def terminal_seen(self) -> bool:
        return False

    def stream_progress(self) -> StreamProgress | None:
        return None  # a command's output says nothing about progress: no stall limit

    def judge(self, result: ProcessResult | None, signal_name: str | None) -> LegOutcome:
        return judge_command(
            result, signal_name, self.stdout.tail_text(), require_change=self.require_change
        )

    def close(self) -> None:
        self.stdout.close()
        self.stderr.close()


@dataclass(frozen=True, slots=True)
class CommandProgram:
    """A command: its exit code is its verdict. ``require_change`` (``--require-change``):
    exit 0 counts as completed only with a change in the cwd or a produced artifact."""

    argv: list[str]
    provider: str = "command"
    model: str | None = None
    require_change: bool = False

    def command_line(self, resume_uid: str | None = None) -> list[str]:
        return list(self.argv)

    def record_fields(self) -> dict[str, Any]:
        return {}

    def new_leg(self, ctx: LegContext) -> CommandLeg:
        return CommandLeg(self.command_line(), ctx, require_change=self.require_change)


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
    ) -> None:
        self.argv = argv
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
        self.stderr = ChunkSink(open_buffer(stream / "stderr.log"), echo_fd=ctx.echo.stderr_fd)

    def _on_line(self, line: str) -> None:
        progressed = False
        for event in self.parser.feed_line(line):
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
        spec = get_provider(self.provider)
        return spec.build_command(
            self.executable,
            model=self.model,
            resume=resume_uid,
            extra_args=[*self.extra_args, *self.options.to_args(self.provider)],
        )

    def record_fields(self) -> dict[str, Any]:
        """Columns known before the child starts: the prompt, the options, the version."""

        fields: dict[str, Any] = {
            "prompt": self.prompt,
            "provider_options_json": self.options.to_record(),
        }
        if not get_provider(self.provider).version_in_stream:
            fields["provider_version"] = cli_version(self.executable)
        return present(fields)

    def new_leg(self, ctx: LegContext) -> AgentLeg:
        prompt = CONTINUATION_PROMPT if ctx.continuation else self.prompt
        argv = self.command_line(ctx.resume_uid)
        parser = get_provider(self.provider).new_parser()
        return AgentLeg(argv, parser, ctx, prompt, require_change=self.require_change)

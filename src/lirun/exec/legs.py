"""Legs: one run of a child process inside an execution, and how its ending is judged.

An execution has one leg, or two with ``--resume-on-timeout`` (one row, one id). A
*program* (a generic command or an agent CLI) makes a fresh :class:`Leg` per run: its
command line, its stream sinks, and the pure judgement of how it ended
(:func:`judge_command`, :func:`judge_agent`) that becomes ``teardown_persist``'s input.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from lirun.exec.capture import DEFAULT_TAIL_BYTES, ChunkSink, LineSink, open_buffer

if TYPE_CHECKING:  # the generic-command path never needs the stream parsers
    from lirun.exec.stream import Event, Message, StreamParser
    from lirun.exec.supervisor import ProcessResult
    from lirun.exec.verdict import Verdict
    from lirun.rundir import RunDir

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
    "stop_status",
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
    extras: dict[str, Any] = field(default_factory=dict)
    engine_session_uid: str | None = None
    response_text: str = ""
    exit_code: int | None = None
    killed_by: str | None = None

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
    resume_uid: str | None = None
    continuation: bool = False


class Leg(Protocol):
    argv: list[str]
    stdout: ChunkSink
    stderr: ChunkSink

    def terminal_seen(self) -> bool: ...

    def judge(self, result: ProcessResult | None, signal_name: str | None) -> LegOutcome: ...

    def close(self) -> None: ...


class Program(Protocol):
    """A generic command or an agent CLI: what the execution row records, and its legs."""

    @property
    def provider(self) -> str: ...

    @property
    def model(self) -> str | None: ...

    def command_line(self, resume_uid: str | None = None) -> list[str]: ...

    def new_leg(self, ctx: LegContext) -> Leg: ...


# --- judgement (pure) -------------------------------------------------------------------------


def stop_status(signal_name: str) -> str:
    """SIGINT to ``li`` aborts; SIGTERM (or SIGHUP) cancels (DESIGN §5)."""
    return "aborted" if signal_name == "SIGINT" else "cancelled"


def _stopped(result: ProcessResult | None, signal_name: str | None) -> str | None:
    """The status imposed by ``li``'s own signal or timers, if any (they outrank the child)."""
    if signal_name is not None:
        return stop_status(signal_name)
    if result is not None and result.timed_out:
        return "timed_out"
    return None


def _base_extras(result: ProcessResult | None, signal_name: str | None) -> dict[str, Any]:
    extras: dict[str, Any] = {}
    if result is not None and result.exit_code is not None:
        extras["exit_code"] = result.exit_code
    if signal_name is not None:
        extras["signal"] = signal_name
        extras["cancel_cause"] = f"li received {signal_name}"
    if result is not None and result.killed_by is not None:
        extras["idle_timeout"] = result.killed_by == "idle"
        extras["evidence"] = [_stop_fact(result)]
    if result is not None and result.killed_descendants:
        extras["evidence"] = [*extras.get("evidence", []), *result.killed_descendants]
    if result is not None:
        extras["metadata"] = {"duration_s": round(result.duration, 3)}
    return extras


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
    result: ProcessResult | None, signal_name: str | None, stdout_tail: str = ""
) -> LegOutcome:
    """A generic command: exit 0 is a completed candidate; anything else fails.

    The child's own exit code goes to teardown as evidence (``run.failed.exit_nonzero``);
    its stdout excerpt is the response text the evidence gate reads.
    """
    extras = _base_extras(result, signal_name)
    exit_code = result.exit_code if result is not None else None
    status = _stopped(result, signal_name) or ("completed" if exit_code == 0 else "failed")
    if stdout_tail.strip():
        extras["assistant_output"] = True
    return LegOutcome(
        status=status,
        extras=extras,
        response_text=stdout_tail,
        exit_code=exit_code,
        killed_by=result.killed_by if result is not None else None,
    )


def judge_agent(
    result: ProcessResult | None, signal_name: str | None, verdict: Verdict
) -> LegOutcome:
    """An agent CLI: the stream's verdict, unless ``li``'s signal or a timer stopped it.

    A kill after the post-terminal grace period leaves the verdict standing (the parser
    is told who killed it). The verdict's exception goes to teardown so the provider
    reason and the linked-engine rule apply.
    """
    extras = _base_extras(result, signal_name)
    extras["evidence"] = [*extras.get("evidence", []), *verdict.evidence]
    extras["metadata"] = {**extras.get("metadata", {}), **_verdict_metadata(verdict)}
    if verdict.final_text.strip():
        extras["assistant_text"] = verdict.final_text
    stopped = _stopped(result, signal_name)
    return LegOutcome(
        status=stopped or verdict.status,
        exception=None if stopped else verdict.exception,
        extras=extras,
        engine_session_uid=verdict.engine_session_uid,
        response_text=verdict.final_text,
        exit_code=result.exit_code if result is not None else None,
        killed_by=result.killed_by if result is not None else None,
    )


def _verdict_metadata(verdict: Verdict) -> dict[str, Any]:
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

    def __init__(self, argv: list[str], ctx: LegContext) -> None:
        self.argv = argv
        stream = ctx.run.stream_dir
        self.stdout = ChunkSink(
            open_buffer(stream / "stdout.log"),
            echo_fd=ctx.echo.stdout_fd,
            tail_bytes=DEFAULT_TAIL_BYTES,
        )
        self.stderr = ChunkSink(open_buffer(stream / "stderr.log"), echo_fd=ctx.echo.stderr_fd)

    def terminal_seen(self) -> bool:
        return False

    def judge(self, result: ProcessResult | None, signal_name: str | None) -> LegOutcome:
        return judge_command(result, signal_name, self.stdout.tail_text())

    def close(self) -> None:
        self.stdout.close()
        self.stderr.close()


@dataclass(frozen=True, slots=True)
class CommandProgram:
    argv: list[str]
    provider: str = "command"
    model: str | None = None

    def command_line(self, resume_uid: str | None = None) -> list[str]:
        return list(self.argv)

    def new_leg(self, ctx: LegContext) -> CommandLeg:
        return CommandLeg(self.command_line(), ctx)


# --- an agent CLI -----------------------------------------------------------------------------


class AgentLeg:
    """Lines: stdout goes to ``stream/<branch>.jsonl`` and through the provider's parser.

    Every event becomes a message as it arrives; a new engine session uid is reported
    at once so the row and the branch name it while the agent is still running.
    """

    def __init__(self, argv: list[str], parser: StreamParser, ctx: LegContext) -> None:
        self.argv = argv
        self.parser = parser
        self.ctx = ctx
        self.saw_assistant_text = False
        self._uid: str | None = None
        stream = ctx.run.stream_dir
        self.stdout: ChunkSink = LineSink(
            open_buffer(ctx.run.stream_buffer_path(ctx.branch_id)), self._on_line
        )
        self.stderr = ChunkSink(open_buffer(stream / "stderr.log"), echo_fd=ctx.echo.stderr_fd)

    def _on_line(self, line: str) -> None:
        for event in self.parser.feed_line(line):
            if event.kind == "assistant_text":
                self.saw_assistant_text = True
            self.ctx.record(event.to_message())
            if self.ctx.on_event is not None:
                self.ctx.on_event(self.parser.provider, event)
        uid = self.parser.engine_session_uid
        if uid is not None and uid != self._uid:
            self._uid = uid
            self.ctx.on_engine_uid(uid)

    def terminal_seen(self) -> bool:
        return self.parser.saw_terminal

    def judge(self, result: ProcessResult | None, signal_name: str | None) -> LegOutcome:
        exit_code = result.exit_code if result is not None else None
        killed_by = result.killed_by if result is not None else None
        verdict = self.parser.finish(exit_code, killed_by=killed_by)
        return judge_agent(result, signal_name, verdict)

    def close(self) -> None:
        self.stdout.close()
        self.stderr.close()


@dataclass(frozen=True, slots=True)
class AgentProgram:
    """An agent CLI found at ``executable``; ``prompt`` is this execution's message."""

    provider: str
    executable: str
    prompt: str
    model: str | None = None
    extra_args: tuple[str, ...] = ()

    def command_line(
        self, resume_uid: str | None = None, *, prompt: str | None = None
    ) -> list[str]:
        from lirun.exec.providers import get_provider

        spec = get_provider(self.provider)
        return spec.build_command(
            self.executable,
            self.prompt if prompt is None else prompt,
            model=self.model,
            resume=resume_uid,
            extra_args=self.extra_args,
        )

    def new_leg(self, ctx: LegContext) -> AgentLeg:
        from lirun.exec.providers import get_provider

        prompt = CONTINUATION_PROMPT if ctx.continuation else None
        argv = self.command_line(ctx.resume_uid, prompt=prompt)
        return AgentLeg(argv, get_provider(self.provider).new_parser(), ctx)

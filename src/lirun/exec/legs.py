"""Legs: one run of a child process inside an execution, and how its ending is judged.

An execution has one leg, or two with ``--resume-on-timeout`` (one row, one id). A
*program* (a generic command here, an agent CLI in ``agent_legs``) makes a fresh
:class:`Leg` per run: its command line, its stream sinks, and the pure judgement of how
it ended (:func:`judge_command`, ``agent_legs.judge_agent``) that becomes
``teardown_persist``'s input. ``li run`` loads this module and not the agent side (the
providers' stream parsers).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import IO, TYPE_CHECKING, Any, Protocol

from lirun.exec.agent_record import MAX_REPLY_CHARS, present
from lirun.exec.capture import DEFAULT_TAIL_BYTES, ChunkSink, open_buffer
from lirun.record.facts import TeardownExtras

if TYPE_CHECKING:
    from lirun.exec.stream import Event, Message
    from lirun.exec.supervisor import ProcessResult, StreamProgress
    from lirun.record.rundir import RunDir

__all__ = [
    "CommandProgram",
    "Echo",
    "Leg",
    "LegContext",
    "LegOutcome",
    "Program",
    "base_extras",
    "imposed_status",
    "judge_command",
    "stop_status",
]


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
    reply: str = ""
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

    def extra_env(self, base: Mapping[str, str]) -> dict[str, str]:
        """Variables the program adds to the child's environment ``base``."""
        ...

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


def imposed_status(result: ProcessResult | None, signal_name: str | None) -> str | None:
    """The status imposed by ``li``'s own signal or timers, if any (they outrank the child)."""
    if signal_name is not None:
        return stop_status(signal_name)
    if result is not None and result.timed_out:
        return "timed_out"
    return None


def base_extras(result: ProcessResult | None, signal_name: str | None) -> TeardownExtras:
    if result is None:
        return TeardownExtras(
            signal=signal_name,
            cancel_cause=f"li received {signal_name}" if signal_name is not None else None,
        )
    stopped = [_stop_fact(result)] if result.killed_by is not None else []
    received = f"li received {signal_name}" if signal_name is not None else None
    return TeardownExtras(
        exit_code=result.exit_code,
        signal=signal_name,
        cancel_cause=result.stop_cause or received,
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
    extras = replace(base_extras(result, signal_name), require_change=require_change, command=True)
    exit_code = result.exit_code if result is not None else None
    status = imposed_status(result, signal_name) or ("completed" if exit_code == 0 else "failed")
    record = {
        "child_exit_code": exit_code,
        "reply_text": stdout_tail[-MAX_REPLY_CHARS:] if stdout_tail.strip() else None,
        "duration_s": round(result.duration, 3) if result is not None else None,
    }
    return LegOutcome(
        status=status,
        extras=extras,
        reply=stdout_tail,
        exit_code=exit_code,
        killed_by=result.killed_by if result is not None else None,
        record=present(record),
    )


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

    def extra_env(self, base: Mapping[str, str]) -> dict[str, str]:
        return {}  # a command gets the environment it was given

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
        """Internal (the ``Program`` protocol the executor drives): the argv to start."""
        return list(self.argv)

    def record_fields(self) -> dict[str, Any]:
        """Internal: the session fields this program adds to the record (none)."""
        return {}

    def new_leg(self, ctx: LegContext) -> CommandLeg:
        """Internal: the leg that runs this program once."""
        return CommandLeg(self.command_line(), ctx, require_change=self.require_change)

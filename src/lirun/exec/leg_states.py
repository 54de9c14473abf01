"""The supervisor loop's states, and its transitions as one pure function.

A leg is RUNNING (wall-clock, idle and stall timers armed) until a terminal stream event
moves it to GRACE (only the grace timer runs), a timer, a signal to ``li`` or the stream's
word that the run cannot succeed (a refused key) moves it to STOPPING
(SIGTERM, or the signal ``li`` got, sent to the child's group), and ``kill_grace`` later
or a second signal to KILLED (SIGKILL sent). Whatever the state, the child's exit moves
it to DRAINING (output still read for ``drain`` seconds, a grandchild may hold the pipe;
only ``LEFTOVER_DRAIN`` when what holds it was left behind and is being ended, so the
leg's outcome is recorded before their grace), then DONE. ``advance`` decides from facts
alone (the time, what the loop saw); the loop in ``supervisor`` does the I/O the returned
actions name. Times are the loop's monotonic clock.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Literal

__all__ = [
    "DEFAULT_STALL_TIMEOUT",
    "KILL",
    "LEFTOVER_DRAIN",
    "Kill",
    "KillCause",
    "LegState",
    "Limits",
    "Seen",
    "Stop",
    "Watch",
    "advance",
    "stall_limit",
]

# "stall": no progress event for stall_timeout; "provider": the stream said the run cannot
# succeed (a refused key) while the CLI would go on retrying.
KillCause = Literal["timeout", "idle", "grace", "signal", "stall", "provider"]

# An agent run with no progress (assistant text, a tool call or result, a completed API
# call) for this long is stopped: a CLI retrying an unreachable API never ends by itself.
DEFAULT_STALL_TIMEOUT = 600.0

# The drain once the child's leftovers got their first signal: they hold the pipe only
# while they die (or ignore it), and the outcome waits for no more than what they had
# written; their end is not the leg's work.
LEFTOVER_DRAIN = 0.1


def stall_limit(value: float | None) -> float | None:
    """An agent run's stall limit: None (not set) is the default, 0 turns it off."""
    if value is None:
        return DEFAULT_STALL_TIMEOUT
    return None if value <= 0 else float(value)


@dataclass(frozen=True, slots=True)
class Limits:
    """Timers for one leg, in seconds; None disables a timer.

    ``grace`` starts at the first terminal stream event: a provider that has said its last
    word but does not exit is stopped then, and the event's verdict stands. A terminal
    event disarms the wall-clock, idle and stall timers. ``stall_timeout``: no progress
    event for that long (an agent leg only; retry notices and warnings are not progress;
    a command has no progress to measure). ``kill_grace`` is the wait between
    SIGTERM and SIGKILL; ``drain`` how long output is still read after the child exits
    (a background grandchild may hold the pipe open).
    """

    timeout: float | None = None
    idle_timeout: float | None = None
    stall_timeout: float | None = None
    grace: float | None = 10.0
    kill_grace: float = 3.0
    drain: float = 1.0


class LegState(enum.Enum):
    RUNNING = "running"
    GRACE = "grace"  # a terminal stream event was seen; the child may still exit by itself
    STOPPING = "stopping"  # li sent SIGTERM (or its own signal) and waits kill_grace
    KILLED = "killed"  # li sent SIGKILL and waits for the exit
    DRAINING = "draining"  # the child exited; what is left in the pipes is still read
    DONE = "done"


_ALIVE = (LegState.RUNNING, LegState.GRACE)


@dataclass(frozen=True, slots=True)
class Watch:
    """The loop's state, and when it was entered (``since``); the leg started at ``started``."""

    state: LegState
    since: float
    started: float

    @classmethod
    def start(cls, now: float) -> Watch:
        return cls(LegState.RUNNING, now, now)


@dataclass(frozen=True, slots=True)
class Seen:
    """What the loop knows at ``now``: facts only, gathered after one wake-up."""

    now: float
    last_output: float
    terminal: bool = False  # a terminal stream event has been read
    exited: bool = False  # the child has exited (not yet reaped)
    pipes_open: bool = True  # a stdout/stderr pipe still has a writer
    signal: bool = False  # li received SIGINT/SIGTERM/…
    signals: int = 0  # how many
    # When the stream last showed progress (an agent leg; None: not measured, no stall).
    last_progress: float | None = None
    stop_now: bool = False  # the stream said the run cannot succeed: stop the child
    leftovers: bool = False  # the exited child left processes, which got their first signal


@dataclass(frozen=True, slots=True)
class Stop:
    """Stop the child's group: SIGTERM for a timer, ``li``'s own signal for ``signal``."""

    cause: KillCause


@dataclass(frozen=True, slots=True)
class Kill:
    """SIGKILL the child's group."""


KILL = Kill()
Action = Stop | Kill


def _due(watch: Watch, limits: Limits, seen: Seen) -> KillCause | None:
    """Which timer has expired; after a terminal event only the grace timer counts."""
    now = seen.now
    if watch.state is LegState.GRACE:
        if limits.grace is not None and now >= watch.since + limits.grace:
            return "grace"
        return None
    if limits.timeout is not None and now >= watch.started + limits.timeout:
        return "timeout"
    if limits.idle_timeout is not None and now >= seen.last_output + limits.idle_timeout:
        return "idle"
    stall_at = _stall_deadline(watch, limits, seen)
    if stall_at is not None and now >= stall_at:
        return "stall"
    return None


def _stall_deadline(watch: Watch, limits: Limits, seen: Seen) -> float | None:
    if limits.stall_timeout is None or seen.last_progress is None:
        return None
    return max(watch.started, seen.last_progress) + limits.stall_timeout


def _drain(limits: Limits, seen: Seen) -> float:
    return min(limits.drain, LEFTOVER_DRAIN) if seen.leftovers else limits.drain


def advance(watch: Watch, limits: Limits, seen: Seen) -> tuple[Watch, tuple[Action, ...]]:
    """The next state and what the loop must do now (in order); pure."""
    now = seen.now
    if watch.state is LegState.DONE:
        return watch, ()
    if seen.exited and watch.state is not LegState.DRAINING:
        watch = replace(watch, state=LegState.DRAINING, since=now)
    if watch.state is LegState.DRAINING:
        if not seen.pipes_open or now >= watch.since + _drain(limits, seen):
            return replace(watch, state=LegState.DONE, since=now), ()
        return watch, ()
    actions: list[Action] = []
    if seen.signal and watch.state in _ALIVE:
        watch = replace(watch, state=LegState.STOPPING, since=now)
        actions.append(Stop("signal"))
    elif seen.signal and seen.signals > 1 and watch.state is LegState.STOPPING:
        # A second signal to li: stop waiting politely.
        watch = replace(watch, state=LegState.KILLED, since=now)
        actions.append(KILL)
    if seen.terminal and watch.state is LegState.RUNNING:
        watch = replace(watch, state=LegState.GRACE, since=now)
    if seen.stop_now and watch.state in _ALIVE:
        watch = replace(watch, state=LegState.STOPPING, since=now)
        actions.append(Stop("provider"))
    if watch.state in _ALIVE and (cause := _due(watch, limits, seen)) is not None:
        watch = replace(watch, state=LegState.STOPPING, since=now)
        actions.append(Stop(cause))
    if watch.state is LegState.STOPPING and now >= watch.since + limits.kill_grace:
        watch = replace(watch, state=LegState.KILLED, since=now)
        actions.append(KILL)
    return watch, tuple(actions)


def next_wake(watch: Watch, limits: Limits, seen: Seen, fallback: float) -> float:
    """Seconds until the nearest deadline of this state (at most ``fallback``)."""
    now, state = seen.now, watch.state
    deadlines = [now + fallback]
    if state is LegState.DRAINING:
        deadlines.append(watch.since + _drain(limits, seen))
    elif state is LegState.STOPPING:
        deadlines.append(watch.since + limits.kill_grace)
    elif state is LegState.GRACE and limits.grace is not None:
        deadlines.append(watch.since + limits.grace)
    elif state is LegState.RUNNING:
        if limits.timeout is not None:
            deadlines.append(watch.started + limits.timeout)
        if limits.idle_timeout is not None:
            deadlines.append(seen.last_output + limits.idle_timeout)
        if (stall_at := _stall_deadline(watch, limits, seen)) is not None:
            deadlines.append(stall_at)
    # KILLED waits for the exit (the pidfd wakes the loop), DONE for nothing.
    return max(0.0, min(deadlines) - now)

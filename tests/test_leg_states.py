"""The supervisor loop's transitions, as a table: state, limits, what was seen → next, actions."""

from __future__ import annotations

import pytest

from lirun.exec.leg_states import (
    KILL,
    LegState,
    Limits,
    Seen,
    Stop,
    Watch,
    advance,
    next_wake,
)

R, G, S, K, D, X = (
    LegState.RUNNING,
    LegState.GRACE,
    LegState.STOPPING,
    LegState.KILLED,
    LegState.DRAINING,
    LegState.DONE,
)
LIM = Limits(timeout=60, idle_timeout=20, grace=5, kill_grace=3, drain=1)


def at(state: LegState, since: float = 0.0) -> Watch:
    return Watch(state, since, started=0.0)


@pytest.mark.parametrize(
    ("watch", "seen", "state", "actions"),
    [
        # running: the timers, in the loop's order (wall clock before idle)
        (at(R), Seen(now=10, last_output=9), R, ()),
        (at(R), Seen(now=60, last_output=59), S, (Stop("timeout"),)),
        (at(R), Seen(now=70, last_output=10), S, (Stop("timeout"),)),
        (at(R), Seen(now=30, last_output=10), S, (Stop("idle"),)),
        (at(R), Seen(now=30, last_output=10, terminal=True), G, ()),
        # a signal to li beats every timer
        (at(R), Seen(now=70, last_output=0, signal=True, signals=1), S, (Stop("signal"),)),
        (at(G, 1), Seen(now=2, last_output=2, signal=True, signals=1), S, (Stop("signal"),)),
        # two signals before the first look: stop first; escalation waits for the next look
        (at(R), Seen(now=1, last_output=1, signal=True, signals=2), S, (Stop("signal"),)),
        # grace: only the grace timer counts after a terminal event
        (at(G, 10), Seen(now=14, last_output=0), G, ()),
        (at(G, 10), Seen(now=15, last_output=0), S, (Stop("grace"),)),
        (at(G, 10), Seen(now=100, last_output=0, terminal=True), S, (Stop("grace"),)),
        # stopping: kill_grace, then SIGKILL; a second signal cuts it short; one does not
        (at(S, 60), Seen(now=62, last_output=0), S, ()),
        (at(S, 60), Seen(now=63, last_output=0), K, (KILL,)),
        (at(S, 60), Seen(now=61, last_output=0, signal=True, signals=2), K, (KILL,)),
        (at(S, 60), Seen(now=61, last_output=0, signal=True, signals=1), S, ()),
        (at(K, 63), Seen(now=1000, last_output=0, signal=True, signals=5), K, ()),
        # the exit ends every state; the pipes are drained, at most `drain` seconds
        (at(R), Seen(now=5, last_output=5, exited=True), D, ()),
        (at(K, 63), Seen(now=64, last_output=0, exited=True), D, ()),
        (at(R), Seen(now=5, last_output=5, exited=True, pipes_open=False), X, ()),
        (at(D, 5), Seen(now=5.5, last_output=5, exited=True), D, ()),
        (at(D, 5), Seen(now=6, last_output=5, exited=True), X, ()),
        # leftovers that got their first signal hold the pipe: only LEFTOVER_DRAIN (0.1 s),
        # so the outcome is recorded before their grace
        (at(D, 5), Seen(now=5.05, last_output=5, exited=True, leftovers=True), D, ()),
        (at(D, 5), Seen(now=5.1, last_output=5, exited=True, leftovers=True), X, ()),
        (at(X, 6), Seen(now=9, last_output=5, exited=True, signal=True, signals=1), X, ()),
    ],
)
def test_advance(watch: Watch, seen: Seen, state: LegState, actions: tuple[object, ...]) -> None:
    after, done = advance(watch, LIM, seen)
    assert (after.state, done) == (state, actions)
    assert after.started == watch.started
    if after.state is not watch.state:
        assert after.since == seen.now


def test_zero_kill_grace_stops_and_kills_in_one_look() -> None:
    limits = Limits(timeout=1, kill_grace=0)
    after, actions = advance(at(R), limits, Seen(now=1, last_output=0))
    assert (after.state, actions) == (K, (Stop("timeout"), KILL))


def test_no_grace_means_a_terminal_event_never_stops_the_child() -> None:
    limits = Limits(timeout=1, grace=None)
    watch, _ = advance(at(R), limits, Seen(now=0.5, last_output=0, terminal=True))
    after, actions = advance(watch, limits, Seen(now=1e6, last_output=0))
    assert (after.state, actions) == (G, ())


@pytest.mark.parametrize(
    ("watch", "seen", "wake"),
    [
        (at(R), Seen(now=10, last_output=5), 1.0),  # the fallback is nearer than any timer
        (at(R), Seen(now=59.5, last_output=59), 0.5),  # the wall clock
        (at(R), Seen(now=24.75, last_output=5), 0.25),  # idle
        (at(G, 10), Seen(now=14.5, last_output=0), 0.5),
        (at(S, 60), Seen(now=62.8, last_output=0), pytest.approx(0.2)),
        (at(K, 63), Seen(now=100, last_output=0), 1.0),  # only the exit wakes it
        (at(D, 5), Seen(now=5.75, last_output=0), 0.25),
        (at(D, 5), Seen(now=5.05, last_output=0, leftovers=True), pytest.approx(0.05)),
        (at(D, 5), Seen(now=9, last_output=0), 0.0),  # overdue: at once, never negative
    ],
)
def test_next_wake(watch: Watch, seen: Seen, wake: float) -> None:
    assert next_wake(watch, LIM, seen, fallback=1.0) == wake


STALL = Limits(timeout=60, idle_timeout=20, stall_timeout=10, grace=5, kill_grace=3, drain=1)


@pytest.mark.parametrize(
    ("watch", "seen", "state", "actions"),
    [
        # no progress for stall_timeout, while output goes on (retry notices): stopped
        (at(R), Seen(now=9, last_output=9, last_progress=0), R, ()),
        (at(R), Seen(now=10, last_output=9, last_progress=0), S, (Stop("stall"),)),
        (at(R), Seen(now=15, last_output=14, last_progress=6), R, ()),  # progress restarts it
        (at(R), Seen(now=16, last_output=15, last_progress=6), S, (Stop("stall"),)),
        # progress is not measured (a command): no stall, however long
        (at(R), Seen(now=59, last_output=58), R, ()),
        # the wall clock and idle timers come first when both are due
        (at(R), Seen(now=60, last_output=59, last_progress=0), S, (Stop("timeout"),)),
        # a terminal event disarms it
        (at(G, 1), Seen(now=3, last_output=0, last_progress=-20), G, ()),
        # the stream says the run cannot succeed: stopped at once, whatever the timers
        (at(R), Seen(now=1, last_output=1, last_progress=0, stop_now=True), S, (Stop("provider"),)),
        (at(G, 1), Seen(now=2, last_output=1, stop_now=True), S, (Stop("provider"),)),
        (at(S, 1), Seen(now=2, last_output=1, stop_now=True), S, ()),
    ],
)
def test_stall_and_provider_stops(
    watch: Watch, seen: Seen, state: LegState, actions: tuple[object, ...]
) -> None:
    after, done = advance(watch, STALL, seen)
    assert (after.state, done) == (state, actions)


def test_next_wake_includes_the_stall_deadline() -> None:
    seen = Seen(now=12, last_output=11.9, last_progress=4)
    assert next_wake(at(R), STALL, seen, fallback=5.0) == pytest.approx(2.0)


@pytest.mark.parametrize(("given", "limit"), [(None, 600.0), (0, None), (0.0, None), (30, 30.0)])
def test_stall_limit_defaults_to_ten_minutes_and_zero_turns_it_off(
    given: float | None, limit: float | None
) -> None:
    from lirun.exec.leg_states import DEFAULT_STALL_TIMEOUT, stall_limit

    assert DEFAULT_STALL_TIMEOUT == 600.0
    assert stall_limit(given) == limit

"""The pool flows and shows run their executions in: each piece of work has a trap of its
own, ``stop`` reaches every trap registered and every trap registered after it, with the
first signal it was given."""

from __future__ import annotations

import signal
import threading

from lirun.orchestra.pool import Pool


def test_stop_reaches_running_work_and_work_that_starts_after_it() -> None:
    pool: Pool[tuple[str, int | None]] = Pool("test")
    inside = threading.Event()

    def running() -> None:
        with pool.trapped("a") as trap:
            inside.set()
            assert pool.wait_stopped(10)
            pool.results.put(("a", trap.received))

    pool.start("a", running)
    assert inside.wait(10)
    pool.stop(signal.SIGINT)
    pool.stop(signal.SIGTERM)  # the later signal reaches running work; the first one stays
    assert pool.results.get(timeout=10) == ("a", signal.SIGINT)

    def late() -> None:
        with pool.trapped("b") as trap:
            pool.results.put(("b", trap.received))

    pool.start("b", late)
    assert pool.results.get(timeout=10) == ("b", signal.SIGINT)
    assert pool.stopping == signal.SIGINT
    pool.join_all()
    assert pool.busy == 0


def test_threads_are_known_by_key_until_joined() -> None:
    pool: Pool[str] = Pool("test")
    release = threading.Event()

    def held() -> None:
        release.wait()

    pool.start("agent:x", held)
    pool.start("gate:x", held)
    assert pool.running("agent:x")
    assert pool.busy == 2
    assert sorted(pool.started()) == ["agent:x", "gate:x"]
    release.set()
    pool.join("agent:x")
    assert not pool.running("agent:x")
    assert pool.started() == ["gate:x"]
    pool.join("agent:x")  # joining a thread already forgotten is nothing
    pool.join_all()
    assert pool.busy == 0
    assert not pool.stopped


def test_a_trap_is_no_longer_reached_once_its_work_ended() -> None:
    pool: Pool[None] = Pool("test")
    with pool.trapped("a") as trap:
        pass
    pool.stop(signal.SIGTERM)
    assert trap.received is None
    assert pool.wait_stopped(0)  # stop was given

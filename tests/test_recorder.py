"""The background message writer: what it holds while the database is behind is bounded."""

from __future__ import annotations

import functools
import threading

import pytest

from lirun.exec import recorder
from lirun.exec.recorder import Recorder


def test_a_write_waits_while_the_pending_bytes_are_over_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(recorder, "MAX_PENDING_BYTES", 100)
    gate = threading.Event()
    submitted = threading.Event()
    with Recorder() as rec:
        rec.submit(gate.wait, size=60)  # the database is slow: the writer is stuck on this

        def submit_more() -> None:
            rec.submit(lambda: None, size=60)
            submitted.set()

        thread = threading.Thread(target=submit_more)
        thread.start()
        assert not submitted.wait(0.3), "120 bytes pending over a budget of 100"
        assert rec.pending_bytes == 60
        gate.set()
        assert submitted.wait(5)
        thread.join()
        rec.flush()
        assert (rec.pending_bytes, rec.written) == (0, 2)


def test_a_write_larger_than_the_budget_goes_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recorder, "MAX_PENDING_BYTES", 100)
    written: list[int] = []
    with Recorder() as rec:
        for n in range(3):
            rec.submit(functools.partial(written.append, n), size=1000)
        rec.flush()
        assert rec.pending_bytes == 0
    assert written == [0, 1, 2]


def test_a_failed_write_gives_its_bytes_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recorder, "MAX_PENDING_BYTES", 100)
    with Recorder(on_error=lambda exc: None) as rec:
        for _ in range(3):
            rec.submit(lambda: 1 / 0, size=80)
        rec.flush()
        assert (rec.pending_bytes, rec.failures) == (0, 3)


def test_the_queue_holds_a_bounded_number_of_writes() -> None:
    rec = Recorder()
    assert rec._queue.maxsize == recorder.MAX_PENDING <= 1024

"""Runs supervised side by side in one process (a flow's legs) never end each other's
processes as their own leftovers."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from lirun.exec import descendants
from lirun.exec.capture import ChunkSink, open_buffer
from lirun.exec.supervisor import ProcessResult, supervise


def _run(tmp_path: Path, name: str, argv: list[str], results: dict[str, ProcessResult]) -> None:
    out = ChunkSink(open_buffer(tmp_path / f"{name}.out"), tail_bytes=256)
    err = ChunkSink(open_buffer(tmp_path / f"{name}.err"))
    results[name] = supervise(argv, stdout=out, stderr=err)


@pytest.mark.parametrize("subreaper", [False, True], ids=["plain", "subreaper"])
def test_a_short_run_ending_leaves_its_siblings_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, subreaper: bool
) -> None:
    # As a subreaper the sweep also looks at this process's new children; the flag alone
    # is what the scan reads (the prctl itself would outlive the test).
    monkeypatch.setattr(descendants, "_subreaper", subreaper)
    short_started, long_started = tmp_path / "short-started", tmp_path / "long-started"
    results: dict[str, ProcessResult] = {}
    # The short run starts first and ends once its sibling runs: the sibling's child is
    # then a child of this process that appeared during the short run.
    wait_for_long = f': > "{short_started}"; while [ ! -e "{long_started}" ]; do sleep 0.01; done'
    short = threading.Thread(
        target=_run, args=(tmp_path, "short", ["sh", "-c", wait_for_long], results)
    )
    long = threading.Thread(
        target=_run,
        args=(
            tmp_path,
            "long",
            ["sh", "-c", f': > "{long_started}"; sleep 1; echo survived'],
            results,
        ),
    )
    short.start()
    while not short_started.exists():
        short.join(0.01)
        assert short.is_alive(), results
    long.start()
    short.join()
    long.join()
    assert results["short"].killed_descendants == []
    assert results["long"].exit_code == 0
    assert (tmp_path / "long.out").read_text() == "survived\n"

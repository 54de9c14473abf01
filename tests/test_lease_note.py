"""Who ended the work when an owner's lease lapsed: the guard's note (``exec.lease_note``).

The guard looks at a run's child before its first kill after a lapse and leaves the note;
the execution reads it, so a child the guard stopped is recorded as stopped by its
owner's lapsed lease (not as a signal ``li`` received, nor as its own failure), and one
that had ended by itself keeps its outcome with the lapse as evidence.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from lirun.exec.lease_note import NOTE_NAME, LeaseNote, judged, take, write
from lirun.exec.legs import LegOutcome
from lirun.record.facts import TeardownExtras
from lirun.store import open_store

STOPPED = LeaseNote(at=10.0, lapsed_at=9.9, leader_ended=False)
ENDED = LeaseNote(at=10.0, lapsed_at=9.9, leader_ended=True)


def test_a_child_the_guard_stopped_is_cancelled_by_the_lapse() -> None:
    own = LegOutcome(status="failed", extras=TeardownExtras(exit_code=-9), exit_code=-9)
    leg = judged(own, STOPPED)
    assert (leg.status, leg.killed_by) == ("cancelled", "lease")
    assert leg.extras.cancel_cause is not None
    assert "guard stopped it" in leg.extras.cancel_cause
    assert leg.extras.evidence[-1]["child_ended_before"] is False


def test_a_child_that_had_ended_keeps_its_own_verdict() -> None:
    own = LegOutcome(status="completed", extras=TeardownExtras(exit_code=0), exit_code=0)
    leg = judged(own, ENDED)
    assert leg.status == "completed"
    assert leg.extras.cancel_cause is None
    assert leg.extras.evidence[-1]["kind"] == "lease_lapsed"
    assert judged(own, None) is own


def test_li_own_stop_stands_beside_the_guards() -> None:
    own = LegOutcome(status="cancelled", extras=TeardownExtras(signal="SIGTERM"))
    assert judged(own, STOPPED).extras.signal == "SIGTERM"


def test_the_note_is_taken_once_and_only_for_its_leg(tmp_path: Path) -> None:
    write(str(tmp_path), STOPPED)
    assert take(tmp_path, since=11.0) is None  # left for an earlier leg
    assert not (tmp_path / NOTE_NAME).exists()
    write(str(tmp_path), STOPPED)
    assert take(tmp_path, since=9.0) == STOPPED
    assert take(tmp_path, since=9.0) is None
    (tmp_path / NOTE_NAME).write_text("{not json")
    assert take(tmp_path, since=0.0) is None


OWNER = """\
import sys, time
from lirun import CommandProgram, RunRequest, execute
from lirun.settings import Settings
from lirun.exec.fence import Fence

fence = Fence(2.0).start()  # never renewed: its guard kills at 1.5 s
request = RunRequest(
    program=CommandProgram(["sleep", "30"]), cwd=sys.argv[1],
    settings=Settings(db_url=sys.argv[2], run_id=sys.argv[3]),
)
result = execute(request)
print(result.status, result.reason, result.lease_lapse is not None, flush=True)
"""


def test_a_run_its_guard_stopped_is_recorded_as_the_guards(tmp_path: Path) -> None:
    """A real owner whose lease lapses while its child runs: the guard kills the child at
    lease - margin and the record says the lease's guard stopped it, with the lapse."""
    url = str(tmp_path / "state.db")
    env = {**os.environ, "LIRUN_HOME": str(tmp_path / "home"), "LIRUN_CGROUP": "off"}
    run_id = "20261204T000000-guard1"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", OWNER, str(tmp_path), url, run_id],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert time.monotonic() - started < 20, done.stderr[-2000:]
    assert done.stdout.split() == ["cancelled", "run.cancelled.system", "True"], done.stderr
    store = open_store(url)
    try:
        row = store.get_entity("session", run_id)
    finally:
        store.close()
    assert row is not None
    assert "guard stopped it" in str(row["status_reason_summary"])
    evidence = json.dumps(row["status_evidence_refs"])
    assert '"child_ended_before": false' in evidence
    assert "li received" not in str(row["status_reason_summary"])

"""`li gc` killed with SIGKILL (or stopped by SIGINT, exit 130) in the middle, on both
backends: every record is whole (its columns and run directory untouched) or a
tombstone, and the next gc finishes the job."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

from lirun.liveness import host_name
from lirun.store import Store
from support.cli import li_command

RECORDS = 1500
BATCH = 25


def old_runs(store: Store, home: Path) -> list[str]:
    """RECORDS finished runs ended a day ago, each with a run directory of two files."""
    ended = time.time() - 86400
    rows = []
    for n in range(RECORDS):
        run_id = f"20261101T000000-{n:06x}"
        run_dir = home / "runs" / run_id
        (run_dir / "stream").mkdir(parents=True)
        (run_dir / "stream" / "out.jsonl").write_text('{"type": "result"}\n' * 20)
        (run_dir / "run.json").write_text("{}")
        rows.append(
            {
                "id": run_id,
                "status": "completed",
                "reason_code": "run.completed.ok",
                "reason_summary": "done",
                "prompt": f"prompt {n} " * 20,
                "created_at": ended - 60,
                "ended_at": ended,
                "run_dir": str(run_dir),
                "artifacts_path": str(run_dir / "artifacts"),
            }
        )
    store.sessions.import_many(rows)
    return [str(r["id"]) for r in rows]


def kill_mid_gc(env: dict[str, str], signum: int) -> None:
    """Start `li gc`, send it ``signum`` a moment after its first progress line."""
    proc = subprocess.Popen(
        li_command("gc", "--older-than", "1h", "--batch", str(BATCH)),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert "examined" in line, line
    time.sleep(random.uniform(0, 0.05))
    os.kill(proc.pid, signum)
    proc.wait(timeout=30)
    assert proc.returncode == (130 if signum == signal.SIGINT else -signum), proc.returncode


def check_whole_or_tombstone(store: Store, ids: list[str]) -> tuple[int, int]:
    whole = tombstones = 0
    for run_id in ids:
        row = store.get_entity("session", run_id)
        assert row is not None
        run_dir = Path(str(row["run_dir"]))
        if row["pruned_at"] is None:
            whole += 1
            assert row["prompt"], run_id
            assert row["status"] == "completed", run_id
            assert (run_dir / "stream" / "out.jsonl").is_file()
            assert (run_dir / "run.json").is_file()
        else:
            tombstones += 1
            assert row["prompt"] is None, run_id
            assert row["status"] == "completed", run_id
            if row["files_removed_at"] is not None:
                assert not run_dir.exists(), run_id
    return whole, tombstones


def test_a_killed_gc_leaves_each_record_whole_or_tombstoned(
    store: Store, li_env: dict[str, str], lirun_home: Path
) -> None:
    ids = old_runs(store, lirun_home)
    seen = []
    for signum in (signal.SIGKILL, signal.SIGINT, signal.SIGKILL):
        kill_mid_gc(li_env, signum)
        seen.append(check_whole_or_tombstone(store, ids))
    assert seen[-1][1] > 0, seen  # the kills came after some tombstones
    done = subprocess.run(
        li_command("gc", "--older-than", "1h", "--json"),
        env=li_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert check_whole_or_tombstone(store, ids) == (0, RECORDS)
    assert store.retention.unremoved_files(host=host_name(), limit=10) == []
    assert list((lirun_home / "runs").iterdir()) == []

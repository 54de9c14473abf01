"""Orchestration overhead of a show per play. Prints ``name: value`` lines.

    .venv/bin/python bench/bench_show.py [--plays 20] [--parallel 4] [--runs 3]

Each run is a fresh git repository and a fresh SQLite database in a throwaway
LIRUN_HOME, and one show of ``--plays`` independent plays at ``--parallel``. Every play's
agent is trivial (a shell command that writes one file and commits) and so is the gate
(``true``): what is measured is lirun's own work per play: worktree, execution records,
the merge into the integration head, the gate's execution record, the ref move, the
worktree removal and every status write.

- ``show.per_play_s``: wall time of ``run_show`` / plays, median over the runs (the
  figure held to the 0.5 s target); ``show.wall_s`` the median wall time.
- ``show.play_latency_median_s``: per play, from ``prepared`` to ``merged`` (queueing
  behind the merge queue included), median over all plays of all runs.
- ``show.agent_median_s`` / ``show.gate_median_s``: the median execution (agent, gate)
  as its own record measures it, supervision and teardown included.
- ``show.merge_queue_per_play_s``: (last merge - first merge) / (plays - 1): how fast the
  serialized gate-and-merge step drains.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TypedDict

from benchkit import out

TARGET_PER_PLAY_S = 0.5
_GIT = ["git", "-c", "user.name=b", "-c", "user.email=b@example.invalid"]
_AGENT = "echo {i} > f{i}.txt && git add -A && git -c user.name=b -c user.email=b@x commit -qm p{i}"


def _repo(path: Path) -> None:
    path.mkdir()
    subprocess.run([*_GIT, "init", "-q", "-b", "main"], cwd=path, check=True)
    (path / "README").write_text("bench\n")
    subprocess.run([*_GIT, "add", "README"], cwd=path, check=True)
    subprocess.run([*_GIT, "commit", "-qm", "base"], cwd=path, check=True)


class ShowRun(TypedDict):
    """One timed show: its wall time, per-play latencies and agent/gate durations (s)."""

    wall: float
    latency: list[float]
    agents: list[float]
    gates: list[float]
    queue: float


def _one_run(plays: int, parallel: int) -> ShowRun:
    from lirun.exec.task import Task
    from lirun.shows.engine import ShowOptions, run_show
    from lirun.shows.spec import Gate, PlaySpec, ShowSpec
    from lirun.store import open_store

    with tempfile.TemporaryDirectory(prefix="lirun-bench-show-") as tmp:
        os.environ["LIRUN_HOME"] = os.path.join(tmp, "home")
        repo = Path(tmp) / "repo"
        _repo(repo)
        spec = ShowSpec(
            topic="bench",
            repo=str(repo),
            base="main",
            integration="show/bench",
            gate=Gate("true"),
            plays=tuple(
                PlaySpec(name=f"p{i}", task=Task(run=("sh", "-c", _AGENT.format(i=i))))
                for i in range(plays)
            ),
        )
        db = os.path.join(tmp, "state.db")
        started = time.perf_counter()
        report = run_show(spec, db_url=db, options=ShowOptions(parallel=parallel))
        wall = time.perf_counter() - started
        if report.status != "completed":
            raise SystemExit(f"the bench show did not complete: {report.to_dict()}")
        store = open_store(db)
        try:
            latency: list[float] = []
            agents: list[float] = []
            gates: list[float] = []
            merged: list[float] = []
            for p in report.plays:
                prepared = next(
                    t.created_at
                    for t in store.list_transitions("play", p.id)
                    if t.status == "prepared"
                )
                assert p.merged_at is not None
                latency.append(p.merged_at - prepared)
                merged.append(p.merged_at)
                for s in store.shows.list_play_sessions(p.id):
                    assert s.ended_at is not None
                    assert s.started_at is not None
                    took = s.ended_at - s.started_at
                    (gates if s.metadata_json["role"] == "gate" else agents).append(took)
        finally:
            store.close()
    merged.sort()
    return {
        "wall": wall,
        "latency": latency,
        "agents": agents,
        "gates": gates,
        "queue": (merged[-1] - merged[0]) / max(1, plays - 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plays", type=int, default=20)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    runs = [_one_run(args.plays, args.parallel) for _ in range(args.runs)]
    walls = [r["wall"] for r in runs]
    per_play = statistics.median(w / args.plays for w in walls)
    out("show.plays", args.plays)
    out("show.parallel", args.parallel)
    out("show.runs", args.runs)
    out("show.wall_s", statistics.median(walls))
    out("show.per_play_s", per_play)
    out("show.play_latency_median_s", statistics.median(x for r in runs for x in r["latency"]))
    out("show.agent_median_s", statistics.median(x for r in runs for x in r["agents"]))
    out("show.gate_median_s", statistics.median(x for r in runs for x in r["gates"]))
    out("show.merge_queue_per_play_s", statistics.median(r["queue"] for r in runs))
    out("show.target_per_play_s", TARGET_PER_PLAY_S)
    out("show.within_target", "yes" if per_play <= TARGET_PER_PLAY_S else "no")


if __name__ == "__main__":
    main()

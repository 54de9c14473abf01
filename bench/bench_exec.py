"""Supervision overhead and capture throughput of ``li run``. Prints ``name: value`` lines.

    .venv/bin/python bench/bench_exec.py [--runs 20] [--lines 50000,200000,400000]
        [--tool-results 1000,5000,10000] [--result-kb 20]

Figures (SQLite database in a throwaway LIRUN_HOME, cwd a clean git repo):
- ``overhead.li_run_true_median_ms``: whole-process wall time of ``li run -- true``
  (``python -m lirun``: interpreter start, imports, run dir, row, heartbeat thread,
  supervision, teardown with the git evidence probes); ``overhead.bare_true_median_ms``
  the same for ``true`` alone; ``overhead.difference_ms`` the supervision overhead.
- ``capture.<N>_lines.lines_per_s``: ``li run -- cat FILE`` where FILE holds N JSON lines
  (~90 bytes each), li's stdout to /dev/null; N / whole-process wall time, overhead
  included. ``capture.<N>_lines.mb_per_s`` the same in MB/s.
- ``capture.<N>_lines.peak_rss_mb``: peak resident set size of li (the maximum over li
  and its waited-for children, from ``getrusage(RUSAGE_CHILDREN)`` of a fresh wrapper
  process per measurement; li is the largest of them). Flat in N means the stream is
  never held in memory.
- ``capture.marginal_lines_per_s``: (N_max - N_min) / (wall_max - wall_min), the copy rate
  with the fixed start-up and teardown cost taken out.
- ``agent.<N>_tool_results.peak_rss_mb``: ``li agent claude`` supervising the fake provider
  (tests/fake_provider.py) replaying a generated Claude Code stream of N tool calls, each
  answered by a tool result of ``--result-kb`` KB; same peak RSS measure as above. Every
  event is parsed and recorded as a message row, so flat in N means neither the parser
  nor the record path holds the stream. ``agent.<N>_tool_results.wall_s`` the wall time,
  ``agent.<N>_tool_results.stream_mb`` the size of the replayed stream.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

# Runs the command, then prints its wall time and peak RSS (KiB) as JSON.
_WRAPPER = """
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
code = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL)
wall = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"code": code, "wall": wall, "rss_kib": rss}))
"""


def _git_repo(path: Path) -> Path:
    path.mkdir()
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
    for argv in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "-c", "user.email=b@x", "-c", "user.name=b", "commit", "-q", "--allow-empty",
         "-m", "init"],
    ):  # fmt: skip
        subprocess.run(argv, cwd=path, check=True, env=env)
    return path


def _timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def _measured(argv: list[str], cwd: Path, env: dict[str, str]) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", _WRAPPER, *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout)
    return result


def bench_overhead(runs: int, repo: Path, env: dict[str, str]) -> None:
    li = [sys.executable, "-m", "lirun", "run", "--", "true"]
    _timed(li, repo, env)  # warm the bytecode cache and create the database
    supervised = statistics.median(_timed(li, repo, env) for _ in range(runs))
    bare = statistics.median(_timed(["true"], repo, env) for _ in range(runs))
    print(f"overhead.li_run_true_median_ms: {supervised * 1000:.1f}")
    print(f"overhead.bare_true_median_ms: {bare * 1000:.1f}")
    print(f"overhead.difference_ms: {(supervised - bare) * 1000:.1f}")


def _line_file(path: Path, n: int) -> int:
    line = '{"type":"item.completed","item":{"id":"item_%07d","type":"agent_message","text":"x"}}\n'
    with path.open("w") as fh:
        for i in range(n):
            fh.write(line % i)
    return path.stat().st_size


def bench_capture(counts: list[int], repo: Path, env: dict[str, str], work: Path) -> None:
    walls: dict[int, float] = {}
    for n in counts:
        data = work / f"lines-{n}.jsonl"
        size = _line_file(data, n)
        argv = [sys.executable, "-m", "lirun", "run", "--", "cat", str(data)]
        m = _measured(argv, repo, env)
        if m["code"] != 0:
            raise SystemExit(f"li run -- cat exited {m['code']} for {n} lines")
        print(f"capture.{n}_lines.lines_per_s: {n / m['wall']:.0f}")
        print(f"capture.{n}_lines.mb_per_s: {size / m['wall'] / 1e6:.1f}")
        print(f"capture.{n}_lines.peak_rss_mb: {m['rss_kib'] / 1024:.1f}")
        walls[n] = m["wall"]
        data.unlink()
    low, high = min(walls), max(walls)
    if high > low and walls[high] > walls[low]:
        marginal = (high - low) / (walls[high] - walls[low])
        print(f"capture.marginal_lines_per_s: {marginal:.0f}")


_SESSION = "22222222-2222-4222-8222-222222222222"
_FAKE_PROVIDER = Path(__file__).resolve().parent.parent / "tests" / "fake_provider.py"


def _claude_line(obj: Mapping[str, object]) -> str:
    return json.dumps({**obj, "session_id": _SESSION}) + "\n"


def _tool_stream(path: Path, n: int, result_bytes: int) -> int:
    """A Claude Code stream: init, N (tool_use, tool_result) pairs, a reply, a result."""
    init = {"type": "system", "subtype": "init", "model": "bench", "claude_code_version": "0"}
    filler = "r" * result_bytes
    with path.open("w") as fh:
        fh.write(_claude_line(init))
        for i in range(n):
            use = {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash",
                   "input": {"command": f"step {i}"}}  # fmt: skip
            fh.write(_claude_line({"type": "assistant", "message": {"content": [use]}}))
            result = {"type": "tool_result", "tool_use_id": f"toolu_{i}",
                      "content": f"{i} {filler}", "is_error": False}  # fmt: skip
            fh.write(_claude_line({"type": "user", "message": {"content": [result]}}))
        reply = {"type": "text", "text": f"Done after {n} tool calls."}
        fh.write(_claude_line({"type": "assistant", "message": {"content": [reply]}}))
        fh.write(_claude_line({"type": "result", "subtype": "success", "is_error": False,
                               "num_turns": n + 1, "result": f"Done after {n} tool calls.",
                               "permission_denials": []}))  # fmt: skip
    return path.stat().st_size


def bench_agent(counts: list[int], result_kb: int, repo: Path, env: dict[str, str],
                work: Path) -> None:  # fmt: skip
    fake = work / "fake-claude"
    fake.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{_FAKE_PROVIDER}" "$@"\n')
    fake.chmod(0o755)
    for n in counts:
        data = work / f"tools-{n}.jsonl"
        size = _tool_stream(data, n, result_kb * 1000)
        agent_env = {**env, "LIRUN_CLAUDE_BIN": str(fake), "LIRUN_FAKE_FIXTURE": str(data)}
        argv = [sys.executable, "-m", "lirun", "agent", "claude", "go", "--quiet"]
        m = _measured(argv, repo, agent_env)
        if m["code"] not in (0, 1):  # 1: judged (e.g. no change), still fully supervised
            raise SystemExit(f"li agent exited {m['code']} for {n} tool results")
        print(f"agent.{n}_tool_results.stream_mb: {size / 1e6:.1f}")
        print(f"agent.{n}_tool_results.wall_s: {m['wall']:.1f}")
        print(f"agent.{n}_tool_results.peak_rss_mb: {m['rss_kib'] / 1024:.1f}")
        data.unlink()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--lines", default="50000,200000,400000")
    parser.add_argument("--tool-results", default="1000,5000,10000")
    parser.add_argument("--result-kb", type=int, default=20)
    parser.add_argument("--only", choices=("overhead", "capture", "agent"), default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lirun-bench-exec-") as tmp:
        work = Path(tmp)
        repo = _git_repo(work / "repo")
        env = {**os.environ, "LIRUN_HOME": str(work / "home")}
        env.pop("LIRUN_DB_URL", None)
        if args.only in (None, "overhead"):
            bench_overhead(args.runs, repo, env)
        if args.only in (None, "capture"):
            bench_capture([int(x) for x in args.lines.split(",")], repo, env, work)
        if args.only in (None, "agent"):
            counts = [int(x) for x in args.tool_results.split(",")]
            bench_agent(counts, args.result_kb, repo, env, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())

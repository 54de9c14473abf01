"""Start-up budgets (issue 20: one named fast path). Prints ``name: value`` lines.

    .venv/bin/python bench/bench_startup.py [--runs N] [--only startup,write,pg,idle]

Every figure is measured beside its reference in the same run, so a busy machine moves
both alike (budgets in brackets; ARCHITECTURE.md, "The fast path"):
- ``startup.<cmd>_median_ms`` and ``startup.<cmd>_ratio``: whole-process wall time of
  ``li wait ID`` on SQLite (a finished id) [<= 4x], ``li --help`` [<= 2.5x],
  ``li status`` (the recent list) [<= 15x] and ``li run -- true`` [<= 12x], each against
  ``startup.python_bare_median_ms`` (``python -c pass``); the commands alternate run by
  run, ``--runs`` (>= 20) each, after the bytecode is compiled.
- ``write.raw_per_s`` / ``write.async_per_s`` / ``write.async_to_raw_ratio``: guarded
  terminal writes on SQLite through ``StateDB`` against a raw ``sqlite3`` loop doing the
  same statements (BEGIN IMMEDIATE, read, guarded UPDATE, history INSERT, COMMIT; WAL,
  synchronous=NORMAL) [>= 0.5].
- ``pg.wait_median_ms`` / ``pg.wait_ratio``: ``li wait ID`` on PostgreSQL, psycopg
  imported when the URL is opened [<= 20x].
- ``idle.<backend>_cpu_pct``: CPU share of one ``li wait`` on one running id while
  nothing changes [<= 0.5 %].

PostgreSQL uses ``$LIRUN_BENCH_PG_URL`` (default the local ``test`` database) with a
throwaway schema. Unset PYTHONDONTWRITEBYTECODE before measuring.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

from benchkit import complete, completed_write, out, postgres_url, running_sessions, sqlite_url
from lirun.store import StateDB, open_store

PY = sys.executable
LI = os.path.join(os.path.dirname(PY), "li")


def env_for(url: str, home: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env.update(LIRUN_DB_URL=url, LIRUN_HOME=home)
    return env


def compile_bytecode() -> None:
    """An installed package has its .pyc files; measure that, not a compile per start."""
    import lirun

    compileall.compile_dir(os.path.dirname(lirun.__file__), quiet=1)


def finished_id(url: str) -> str:
    store = open_store(url)
    try:
        sid = store.sessions.create(id="bench-finished").id
        complete(store, sid)
        return sid
    finally:
        store.close()


def alternating_ms(
    commands: dict[str, Sequence[str]], env: dict[str, str], runs: int, cwd: str
) -> dict[str, float]:
    """Median wall ms per command, the commands taking turns run by run."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for argv in commands.values():  # one warm-up each (page cache, first .pyc)
        subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=False)
    for _ in range(runs):
        for name, argv in commands.items():
            start = time.perf_counter()
            subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=False)
            times[name].append((time.perf_counter() - start) * 1000)
    return {name: statistics.median(values) for name, values in times.items()}


def bench_startup(runs: int) -> None:
    with sqlite_url() as url, tempfile.TemporaryDirectory(prefix="lirun-bench-") as home:
        sid = finished_id(url)
        medians = alternating_ms(
            {
                "python_bare": [PY, "-c", "pass"],
                "wait": [LI, "wait", sid],
                "help": [LI, "--help"],
                "status": [LI, "status"],
                "run_true": [LI, "run", "--", "true"],
            },
            env_for(url, home),
            runs,
            cwd=home,
        )
    bare = medians["python_bare"]
    out("startup.python_bare_median_ms", bare)
    for name in ("wait", "help", "status", "run_true"):
        out(f"startup.{name}_median_ms", medians[name])
        out(f"startup.{name}_ratio", medians[name] / bare)


# -- guarded terminal writes ------------------------------------------------------


def raw_writes_per_s(path: str, ids: list[str]) -> float:
    """The same statements the store runs, straight through sqlite3."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    start = time.perf_counter()
    for sid in ids:
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute(
            "SELECT id, status, updated_at FROM sessions WHERE id = ?", (sid,)
        ).fetchone()
        now = time.time()
        changed = conn.execute(
            "UPDATE sessions SET status = 'completed', status_reason_code = 'run.completed.ok', "
            "status_reason_summary = '', status_evidence_refs = NULL, updated_at = ?, "
            "ended_at = ?, exit_code = 0 WHERE id = ? AND status IS ?",
            (now, now, sid, row[1]),
        ).rowcount
        if changed:
            conn.execute(
                "INSERT INTO status_transitions (id, entity_type, entity_id, previous_status, "
                "status, reason_code, reason_summary, evidence_refs, source, actor, created_at, "
                "metadata) VALUES (?, 'session', ?, ?, 'completed', 'run.completed.ok', '', "
                "NULL, 'executor', NULL, ?, NULL)",
                (f"t-{sid}", sid, row[1], now),
            )
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return len(ids) / elapsed


async def async_writes_per_s(url: str, ids: list[str]) -> float:
    async with StateDB(url) as db:
        start = time.perf_counter()
        for sid in ids:
            await db.update_status("session", sid, **completed_write())
        return len(ids) / (time.perf_counter() - start)


def bench_writes(rows: int, rounds: int = 5) -> None:
    raw, wrapped = [], []
    with sqlite_url() as url:
        for r in range(rounds):  # alternate, so both see the same background load
            raw.append(raw_writes_per_s(url, running_sessions(url, f"raw{r}", rows)))
            wrapped.append(
                asyncio.run(async_writes_per_s(url, running_sessions(url, f"as{r}", rows)))
            )
    out("write.raw_per_s", statistics.median(raw))
    out("write.async_per_s", statistics.median(wrapped))
    out("write.async_to_raw_ratio", statistics.median(wrapped) / statistics.median(raw))


# -- PostgreSQL li wait, idle waiters ---------------------------------------------


def bench_pg_wait(runs: int) -> None:
    with postgres_url() as url, tempfile.TemporaryDirectory(prefix="lirun-bench-") as home:
        sid = finished_id(url)
        medians = alternating_ms(
            {"python_bare": [PY, "-c", "pass"], "wait": [LI, "wait", sid]},
            env_for(url, home),
            runs,
            cwd=home,
        )
    out("pg.python_bare_median_ms", medians["python_bare"])
    out("pg.wait_median_ms", medians["wait"])
    out("pg.wait_ratio", medians["wait"] / medians["python_bare"])


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu_pct(url: str, seconds: float) -> float:
    with tempfile.TemporaryDirectory(prefix="lirun-bench-") as home:
        (sid,) = running_sessions(url, "idle", 1)
        proc = subprocess.Popen(
            [LI, "wait", sid],
            env=env_for(url, home),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,  # "interrupted by SIGTERM" at the end is expected
            cwd=home,
        )
        try:
            time.sleep(1.5)  # start-up and the first reads are not idle time
            before, start = cpu_seconds(proc.pid), time.monotonic()
            time.sleep(seconds)
            used = cpu_seconds(proc.pid) - before
            return 100 * used / (time.monotonic() - start)
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def bench_idle(seconds: float) -> None:
    with sqlite_url() as url:
        open_store(url).close()
        out("idle.sqlite_cpu_pct", idle_cpu_pct(url, seconds))
    with postgres_url() as url:
        open_store(url).close()
        out("idle.postgres_cpu_pct", idle_cpu_pct(url, seconds))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="runs per command (>= 20)")
    parser.add_argument("--rows", type=int, default=500, help="writes per write round")
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--only", default="startup,write,pg,idle", help="comma-separated parts")
    args = parser.parse_args()
    parts = set(args.only.split(","))
    compile_bytecode()
    if "startup" in parts:
        bench_startup(args.runs)
    if "write" in parts:
        bench_writes(args.rows)
    if "pg" in parts:
        bench_pg_wait(args.runs)
    if "idle" in parts:
        bench_idle(args.idle_seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())

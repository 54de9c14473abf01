"""`li gc` on a large store: pruning time, space reclaimed, and `li wait` on a pruned id
against a kept one. Prints ``name: value``.

    .venv/bin/python bench/bench_gc.py [--backend sqlite|postgres|both] [--records N]
        [--dirs N] [--prompt-bytes N] [--batch N] [--vacuum]

Figures, per backend:
- ``<backend>.records`` / ``.run_dirs``: finished runs ended 30 days ago (each with a
  ``--prompt-bytes`` prompt), and how many of them have a run directory on disk (two
  small files each; 100,000 directories are slow on a shared disk, so ``--dirs``).
- ``<backend>.gc_seconds`` / ``.gc_records_per_s``: one ``collect_garbage`` pass over
  them all (what ``li gc --older-than 7d`` runs), batches of ``--batch``.
- ``<backend>.columns_cleared_mb`` / ``.files_removed_mb``: what the tombstones cleared.
- ``sqlite.file_mb_before`` / ``_after_gc`` / ``_after_vacuum``: the database file (with
  its WAL). Without ``--vacuum`` the freed pages stay in the file for new rows to reuse;
  ``li gc --vacuum`` (or ``VACUUM`` in sqlite3) gives them back. ``.vacuum_seconds``.
- ``postgres.tables_mb_before`` / ``_after_gc`` / ``_after_vacuum``: the lirun tables and
  their indexes and TOAST (``pg_total_relation_size``); plain ``VACUUM`` makes dead
  tuples reusable without shrinking files (``VACUUM FULL`` would, under an exclusive lock).
- ``<backend>.wait_kept_median_ms`` / ``.wait_pruned_median_ms`` / ``.wait_pruned_ratio``:
  a whole ``python -m lirun wait ID`` process on a kept and on a pruned terminal id,
  median of ``--wait-trials`` each, interleaved.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchkit import out, postgres_url, sqlite_url
from lirun.record.retention import GcOptions, collect_garbage
from lirun.record.retention_rules import RetentionPolicy
from lirun.store import open_store
from lirun.store.core import Store

DAY = 86400
CHUNK = 5000


def make_runs(store: Store, home: Path, records: int, dirs: int, prompt_bytes: int) -> None:
    ended = time.time() - 30 * DAY
    for start in range(0, records, CHUNK):
        rows = []
        for n in range(start, min(records, start + CHUNK)):
            run_id = f"20261101T000000-{n:06x}"
            run_dir = home / "runs" / run_id
            if n < dirs:
                (run_dir / "stream").mkdir(parents=True)
                (run_dir / "stream" / "out.jsonl").write_bytes(b"{}\n" * 100)
                (run_dir / "run.json").write_bytes(b"{}")
            rows.append(
                {
                    "id": run_id,
                    "status": "completed" if n % 10 else "failed",
                    "reason_code": "run.completed.ok" if n % 10 else "run.failed.exception",
                    "reason_summary": "done",
                    "prompt": os.urandom(prompt_bytes // 2).hex(),
                    "created_at": ended - 60,
                    "ended_at": ended,
                    "run_dir": str(run_dir),
                    "artifacts_path": str(run_dir / "artifacts"),
                    "input_tokens": 100,
                    "output_tokens": 200,
                    "cost_usd": 0.01,
                }
            )
        store.sessions.import_many(rows)


def kept_run(store: Store) -> str:
    """A run that ended now: gc keeps it whole."""
    store.sessions.import_many(
        [
            {
                "id": "20261201T000000-kept00",
                "status": "completed",
                "reason_code": "run.completed.ok",
                "reason_summary": "done",
                "created_at": time.time() - 1,
                "ended_at": time.time(),
            }
        ]
    )
    return "20261201T000000-kept00"


def sqlite_mb(path: str) -> float:
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p)) / 1e6


def postgres_mb(url: str) -> float:
    import psycopg

    from lirun.store.postgres import split_schema

    conninfo, schema = split_schema(url)
    with psycopg.connect(conninfo) as conn:
        row = conn.execute(
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema,),
        ).fetchone()
    return float(row[0] if row else 0) / 1e6


def wait_ms(url: str, run_id: str) -> float:
    env = {**os.environ, "LIRUN_DB_URL": url}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "lirun", "wait", run_id], env=env, capture_output=True, text=True
    )
    elapsed = (time.perf_counter() - began) * 1000
    assert done.returncode in (0, 1), done.stderr
    return elapsed


def wait_figures(name: str, url: str, kept: str, pruned: str, trials: int) -> None:
    kept_ms, pruned_ms = [], []
    for _ in range(trials):
        kept_ms.append(wait_ms(url, kept))
        pruned_ms.append(wait_ms(url, pruned))
    k, p = statistics.median(kept_ms), statistics.median(pruned_ms)
    out(f"{name}.wait_kept_median_ms", k)
    out(f"{name}.wait_pruned_median_ms", p)
    out(f"{name}.wait_pruned_ratio", p / k)


def bench(name: str, url: str, home: Path, args: Any) -> None:
    os.environ["LIRUN_HOME"] = str(home)
    size = (lambda: sqlite_mb(url)) if name == "sqlite" else (lambda: postgres_mb(url))
    store = open_store(url)
    try:
        make_runs(store, home, args.records, args.dirs, args.prompt_bytes)
        kept = kept_run(store)
        out(f"{name}.records", args.records)
        out(f"{name}.run_dirs", args.dirs)
        out(f"{name}.{'file' if name == 'sqlite' else 'tables'}_mb_before", size())
        policy = RetentionPolicy(older_than=7 * DAY, batch=args.batch)
        began = time.perf_counter()
        tally = collect_garbage(store, policy, GcOptions(actor="bench"))
        seconds = time.perf_counter() - began
        pruned = sum(tally.pruned.values())
        assert pruned == args.records, tally.pruned
        out(f"{name}.gc_seconds", seconds)
        out(f"{name}.gc_records_per_s", pruned / seconds)
        out(f"{name}.columns_cleared_mb", tally.bulk_bytes / 1e6)
        out(f"{name}.files_removed_mb", tally.file_bytes / 1e6)
        out(f"{name}.{'file' if name == 'sqlite' else 'tables'}_mb_after_gc", size())
        if args.vacuum:
            began = time.perf_counter()
            store.retention.reclaim_space()
            out(f"{name}.vacuum_seconds", time.perf_counter() - began)
            out(f"{name}.{'file' if name == 'sqlite' else 'tables'}_mb_after_vacuum", size())
    finally:
        store.close()
    wait_figures(name, url, kept, "20261101T000000-000001", args.wait_trials)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--dirs", type=int, default=10_000)
    parser.add_argument("--prompt-bytes", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--wait-trials", type=int, default=15)
    parser.add_argument("--vacuum", action="store_true")
    args = parser.parse_args()
    import tempfile

    for name in ("sqlite", "postgres"):
        if args.backend not in (name, "both"):
            continue
        with tempfile.TemporaryDirectory(prefix="lirun-bench-gc-") as home:
            opener = sqlite_url() if name == "sqlite" else postgres_url()
            with opener as url:
                bench(name, url, Path(home), args)


if __name__ == "__main__":
    main()

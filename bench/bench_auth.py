"""How soon an auth refusal is on the record. Prints ``name: value`` lines.

    .venv/bin/python bench/bench_auth.py [--runs 10]

A fake ``claude`` prints its ``init`` and one ``system/api_retry`` with ``error_status``
401 (Claude Code 2.1.197 with a bad key, docs/providers.md), notes the wall-clock time it
flushed that line, then sleeps for ten minutes as the real CLI goes on retrying for about
three. ``li agent claude`` (SQLite in a throwaway LIRUN_HOME, cwd a clean git repo, no
``--timeout``) must stop it and record ``failed`` / ``run.failed.provider_auth``.

- ``auth_signal_to_record_s``: median over the runs of the row's ``updated_at`` (the
  terminal status write) minus the time the fake wrote the 401 line (noted just before
  it); the budget is 5 s.
- ``auth_signal_to_teardown_s``: the same to ``ended_at`` (li's teardown began: the
  child was stopped and reaped).
- ``auth_signal_to_record_max_s``: the slowest run.
- ``auth_signal_to_exit_s``: median time from the 401 line to ``li`` having exited.
- ``auth_reason_ok``: runs whose record was ``run.failed.provider_auth`` / all runs.
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
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import out

_FAKE = """\
import json, sys, time
sys.stdin.read()
sid = "b0b0b0b0-0000-4000-8000-000000000001"
init = {"type": "system", "subtype": "init", "session_id": sid, "model": "claude-opus-4-8",
        "apiKeySource": "ANTHROPIC_API_KEY", "claude_code_version": "2.1.197"}
retry = {"type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 10,
         "retry_delay_ms": 512.0, "error_status": 401, "error": "authentication_failed",
         "session_id": sid}
print(json.dumps(init), flush=True)
time.sleep(0.2)
with open(MARK, "w") as fh:  # noted just before: li may stop it as soon as it is out
    fh.write(repr(time.time()))
print(json.dumps(retry), flush=True)
time.sleep(600)
"""


def _fake(directory: Path, mark: Path) -> Path:
    path = directory / "claude"
    body = _FAKE.replace("MARK", repr(str(mark)))
    path.write_text(f"#!{sys.executable}\n{body}", encoding="utf-8")
    path.chmod(0o755)
    return path


def _repo(directory: Path) -> Path:
    repo = directory / "repo"
    repo.mkdir()
    run: dict[str, Any] = {"cwd": repo, "check": True, "capture_output": True}
    subprocess.run(["git", "init", "-q", "-b", "main"], **run)
    (repo / "README").write_text("bench\n")
    subprocess.run(["git", "add", "-A"], **run)
    subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "init"], **run
    )
    return repo


def one_run(tmp: Path, n: int) -> dict[str, float | str]:
    home = tmp / f"home{n}"
    mark = tmp / f"mark{n}"
    fake = _fake(tmp, mark)
    env = {**os.environ, "LIRUN_HOME": str(home), "LIRUN_DB_URL": str(home / "state.db")}
    proc = subprocess.run(
        [sys.executable, "-m", "lirun", "agent", "claude", "go", "--bin", str(fake), "--json"],
        cwd=tmp / "repo",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    exited = time.time()
    signal_at = float(mark.read_text())
    summary = json.loads(proc.stdout)
    from lirun.store import open_store

    store = open_store(env["LIRUN_DB_URL"])
    try:
        row = store.get_entity("session", summary["run_id"])
    finally:
        store.close()
    assert row is not None
    return {
        "record_s": float(row["updated_at"]) - signal_at,
        "teardown_s": float(row["ended_at"]) - signal_at,
        "exit_s": exited - signal_at,
        "reason": str(row["status_reason_code"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lirun-bench-auth-") as name:
        tmp = Path(name)
        _repo(tmp)
        runs = [one_run(tmp, n) for n in range(args.runs)]
    record = [float(r["record_s"]) for r in runs]
    out("runs", len(runs))
    out("auth_signal_to_record_s", statistics.median(record))
    out("auth_signal_to_record_max_s", max(record))
    out("auth_signal_to_teardown_s", statistics.median(float(r["teardown_s"]) for r in runs))
    out("auth_signal_to_exit_s", statistics.median(float(r["exit_s"]) for r in runs))
    ok = sum(r["reason"] == "run.failed.provider_auth" for r in runs)
    out("auth_reason_ok", f"{ok}/{len(runs)}")


if __name__ == "__main__":
    main()

"""Every provider's real CLI against the mock API: how soon lirun records an auth
failure, and how soon a stalled run ends. Prints ``name: value`` lines.

    .venv/bin/python bench/bench_providers.py [--runs 3] [--provider gemini ...]

Runs the pinned CLIs (``scripts/install-clis``) exactly as the contract suite does
(``tests/support/contracts``: a network namespace, the mock on loopback, a private HOME),
so it needs root and the cached CLIs. Per provider:

- ``auth_<p>_record_after_answer_s``: median over the runs of the row's ``updated_at``
  (the terminal status write) minus the time the mock answered the CLI's first call with
  401 (the CLI's first sign of it); the budget is 5 s. ``..._max_s``: the slowest run.
- ``auth_<p>_reason_ok``: runs recorded ``run.failed.provider_auth`` / all runs.
- ``stall_<p>_end_after_limit_s``: median of the row's ``updated_at`` minus the moment
  the mock sent its last byte (the first chunk of a stalled body), minus
  ``--stall-timeout``; the budget is 5 s. Negative when the CLI's last event came before
  that byte (Claude Code and Codex print nothing for a partial answer, so the limit
  counts from their last line). ``stall_<p>_reason_ok`` as above.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))

from benchkit import out  # noqa: E402
from support.contracts import CONTRACTS, STALL, Case  # noqa: E402
from support.execkit import git_repo, li_argv, session_rows  # noqa: E402
from support.netns import netns_argv, netns_missing  # noqa: E402
from support.realcli import RealClis, cli_env, real_clis  # noqa: E402

CASE_NAMES = {"auth": "401", "stall": "stall"}
WANTED = {"auth": "run.failed.provider_auth", "stall": "run.failed.provider_stalled"}


def _one(case: Case, clis: RealClis) -> tuple[float, str]:
    """(the record's terminal write minus the mock's last answer, the reason code)."""
    with tempfile.TemporaryDirectory(prefix="lirun-bench-providers-") as name:
        tmp = Path(name)
        repo = git_repo(tmp / "repo")
        log = tmp / "requests.jsonl"
        args = ["agent", f"{case.provider}/{case.model}", "Say hello.", *case.li_args]
        if case.provider_args:
            args += ["--", *case.provider_args]
        env = cli_env(case, clis, tmp)
        subprocess.run(
            netns_argv(case.scenario, log, li_argv(*args)),
            env=env,
            cwd=repo,
            capture_output=True,
            timeout=case.max_seconds + 60,
            check=False,
        )
        (row,) = session_rows(env["LIRUN_DB_URL"])
        requests = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        posts = [r for r in requests if r["path"].startswith(case.contract.api_path)]
        answered = float(posts[0]["t"]) if posts else float(row["started_at"])
        return float(row["updated_at"]) - answered, str(row["status_reason_code"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--provider", action="append", choices=sorted(CONTRACTS))
    args = parser.parse_args()
    missing = netns_missing()
    clis = real_clis()
    if missing or isinstance(clis, str):
        print(f"bench_providers: cannot run: {missing or clis}", file=sys.stderr)
        return 2
    for provider in args.provider or list(CONTRACTS):
        cases = {c.name: c for c in CONTRACTS[provider].cases}
        for what, name in CASE_NAMES.items():
            case = cases[name]
            results = [_one(case, clis) for _ in range(args.runs)]
            delays = [delay for delay, _ in results]
            if what == "stall":  # the mock's last byte was the first chunk: the limit's start
                delays = [delay - float(STALL) for delay in delays]
                out(f"stall_{provider}_end_after_limit_s", statistics.median(delays))
                out(f"stall_{provider}_end_after_limit_max_s", max(delays))
            else:
                out(f"auth_{provider}_record_after_answer_s", statistics.median(delays))
                out(f"auth_{provider}_record_after_answer_max_s", max(delays))
            ok = sum(reason == WANTED[what] for _, reason in results)
            out(f"{what}_{provider}_reason_ok", f"{ok}/{len(results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

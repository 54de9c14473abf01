"""Contract tests: the real agent CLIs under ``li agent``, pinned or newest.

Each case (``support.realcases``) runs the CLI from the cache (``scripts/install-clis``)
inside a new network namespace (``unshare -n``, loopback up) beside a mock API that
answers one scenario: a text reply, a tool call that writes a file, 401, 403, 404 (an
unknown model), 429 with ``retry-after``, 500, 503, 529, 400 "prompt too long",
connection refused, a connection closed without an answer, one closed mid-stream, a
stream that is not JSON, a server that accepts and never answers, one that stalls after
the first chunk, and lirun's own timeout while the CLI retries. Each test asserts what lirun
stored: status and reason (the class, never the CLI's sentence), a summary and provider
error, the retries counted, model, the CLI version the executable reports (``--version``),
and how long the run took.

Every scenario makes sense for every CLI, so each runs all of them; how each CLI is
pointed at the mock and how few retries it is given is its contract's
(``support.contracts.<provider>``). Each CLI gets a
private HOME and TMPDIR; the database is SQLite (these tests are about the CLIs' streams,
not the store, which the rest of the suite runs on both backends).

Without the CLIs (and no way to install them) or without ``unshare -n`` the tests skip
naming what is missing; ``LIRUN_TEST_REQUIRE_REAL_CLI=1`` (CI) turns that into a failure.
``LIRUN_TEST_CLI_VERSIONS=latest`` runs the newest versions (``scripts/install-clis
--latest``) instead of the pins. ``LIRUN_TEST_RECORD_FIXTURES=1`` copies each run's stream
to its fixture (``tests/fixtures/<provider>/real-<version>-<case>.jsonl``, beside it a
``.json`` of what lirun recorded), replayed by ``tests/test_real_streams.py``.
``LIRUN_TEST_DRIFT_DIR=DIR`` writes the same pair for every case to DIR, pass or fail, for
``scripts/drift`` to compare with the pinned version's fixtures.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from lirun.lifecycle import EXIT_CODE_BY_STATUS
from lirun.providers.registry import get_provider
from support.contracts import CASES, Case
from support.execkit import git_repo, li_argv, session_rows
from support.mockapi import REPLY_TEXT, TOOL_FILE, TOOL_FILE_CONTENT, TOOL_REPLY_TEXT
from support.netns import netns_argv, netns_missing
from support.providerkit import fixture_path
from support.realcli import REQUIRE_ENV, RealClis, cache_dir, cli_env, real_clis

pytestmark = [pytest.mark.real_cli, pytest.mark.slow]

PROMPTS = {"text": "Say hello.", "tool": f"Write {TOOL_FILE}."}
RECORD = os.environ.get("LIRUN_TEST_RECORD_FIXTURES") == "1"
DRIFT_DIR = os.environ.get("LIRUN_TEST_DRIFT_DIR")


@pytest.fixture(scope="module")
def clis() -> RealClis:
    missing = netns_missing()
    found = real_clis()
    if isinstance(found, str):
        missing = f"{found}; {missing}" if missing else found
    if missing:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {missing}")
        pytest.skip(missing)
    assert isinstance(found, RealClis)
    return found


def _command(case: Case) -> list[str]:
    prompt = PROMPTS.get(case.scenario, PROMPTS["text"])
    args = ["agent", f"{case.provider}/{case.model}", prompt, "--json", *case.li_args]
    if case.provider_args:
        args += ["--", *case.provider_args]
    return li_argv(*args)


def _requests(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def _facts(row: dict[str, Any], version: str, problems: list[str]) -> dict[str, Any]:
    """What lirun recorded of a live run, kept beside its stream for scripts/drift."""
    keys = ("status", "status_reason_code", "child_exit_code", "provider_retries",
            "provider_error", "status_reason_summary", "provider_version", "model")  # fmt: skip
    return {"cli_version": version, **{k: row.get(k) for k in keys}, "problems": problems}


def _keep_stream(
    case: Case, row: dict[str, Any], target: Path, facts: dict[str, Any], tmp_path: Path
) -> None:
    stream = Path(row["run_dir"]) / "stream" / f"{row['branch_id']}.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(stream, target)
    target.with_suffix(".json").write_text(json.dumps(facts, indent=1, sort_keys=True) + "\n")
    if get_provider(case.provider).new_parser().reads_stderr:  # its retries are there
        # The test's own paths (its temp directory, the CLI cache) say nothing: named.
        text = (Path(row["run_dir"]) / "stream" / "stderr.log").read_text(errors="replace")
        text = text.replace(str(tmp_path), "$TEST").replace(str(cache_dir()), "$CLI_CACHE")
        target.with_name(target.name.removesuffix(".jsonl") + ".stderr.txt").write_text(text)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_real_cli_against_the_mock_api(clis: RealClis, tmp_path: Path, case: Case) -> None:
    repo = git_repo(tmp_path / "repo")
    log = tmp_path / "requests.jsonl"
    env = cli_env(case, clis, tmp_path)
    started = time.monotonic()
    proc = subprocess.run(
        netns_argv(case.scenario, log, _command(case)),
        env=env,
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=case.max_seconds + 60,
        check=False,
    )
    elapsed = time.monotonic() - started
    (tmp_path / "li-stderr.txt").write_text(proc.stderr)
    context = f"li stderr (tail):\n{proc.stderr[-3000:]}\nrequests: {log}"
    rows = session_rows(env["LIRUN_DB_URL"]) if Path(env["LIRUN_DB_URL"]).exists() else []
    if len(rows) != 1:
        pytest.fail(f"li (exit {proc.returncode}) recorded {len(rows)} runs\n{context}")
    row = rows[0]
    version = clis.versions[case.provider]
    problems = _problems(case, version, row, proc.returncode, elapsed, _requests(log), repo)
    facts = _facts(row, version, problems)
    if RECORD:
        _keep_stream(case, row, fixture_path(case.fixture_for(version)), facts, tmp_path)
    if DRIFT_DIR:
        _keep_stream(case, row, Path(DRIFT_DIR) / case.fixture_for(version), facts, tmp_path)
    assert not problems, "\n".join([*problems, context])


def _problems(
    case: Case,
    version: str,
    row: dict[str, Any],
    exit_code: int,
    elapsed: float,
    requests: list[dict[str, Any]],
    repo: Path,
) -> list[str]:
    """Every way the record differs from the case, so one run reports all of them."""
    problems: list[str] = []

    def check(ok: bool, what: str) -> None:
        if not ok:
            problems.append(what)

    summary = row["status_reason_summary"] or ""
    got = (row["status"], row["status_reason_code"])
    check(
        got == (case.status, case.reason),
        f"status/reason {got}, want {case.status}/{case.reason}: {summary}",
    )
    check(exit_code == EXIT_CODE_BY_STATUS[case.status], f"li exit code {exit_code}")
    check(case.summary_matches(summary), f"summary {summary!r} lacks /{case.lirun_words}/")
    attempts = row["provider_retries"] or 0
    check(
        attempts >= case.min_attempts, f"{attempts} retries recorded, want >= {case.min_attempts}"
    )
    if case.max_attempts is not None:
        check(
            attempts <= case.max_attempts,
            f"{attempts} retries recorded, want <= {case.max_attempts}",
        )
    check(row["model"] == case.recorded_model, f"model {row['model']!r}")
    check(
        row["provider_version"] == version,
        f"CLI version {row['provider_version']!r}, the executable reports {version!r}",
    )
    check(
        case.min_seconds <= elapsed <= case.max_seconds,
        f"took {elapsed:.1f} s, want {case.min_seconds}..{case.max_seconds} s",
    )
    check(
        row["duration_s"] is not None and row["duration_s"] <= elapsed,
        f"duration_s {row['duration_s']}",
    )
    api_path = case.contract.api_path
    posts = [r for r in requests if r["method"] == "POST" and r["path"].startswith(api_path)]
    if case.scenario == "refused":
        check(requests == [], "a request reached a port nobody listens on?")
    else:
        check(bool(posts), f"the CLI never called {api_path} on the mock")
        check(all(case.contract.model_sent(r) == case.api_model for r in posts), "model sent")
    if case.status == "completed":
        check(
            row["provider_error"] is None,
            f"a warning became the provider error: {row['provider_error']!r}",
        )
        expected = TOOL_REPLY_TEXT if case.scenario == "tool" else REPLY_TEXT
        check(row["reply_text"] == expected, f"reply {row['reply_text']!r}")
    else:
        check(bool((row["provider_error"] or "").strip()), "no provider error recorded")
    if case.scenario == "tool":
        written = repo / TOOL_FILE
        check(written.exists() and written.read_text() == TOOL_FILE_CONTENT, "file not written")
        check(len(posts) >= 2, "no second turn carrying the tool's result")
    return problems

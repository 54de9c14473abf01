"""The streams the real CLIs produced in the contract tests, replayed without them.

``tests/test_real_clis.py`` (``-m real_cli``) records each live run's stream as
``tests/fixtures/<provider>/real-<version>-<case>.jsonl``, for the pinned version and each
newer one the suite passed on. Here the fake provider replays each one through ``li
agent`` and the run must end with the status and reason the live run asserts
(``support.contracts``), whichever version wrote it. Where lirun ended the live CLI
itself (a stall, a timeout, the stop at the first auth signal) the replay keeps the fake
running after its last line, and a short lirun timer ends it the same way. No network, no
real CLI.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lirun.lifecycle import EXIT_CODE_BY_STATUS
from support import TESTS_DIR
from support.contracts import CASES, CONTRACTS, Case
from support.execkit import git_repo, only_row, run_li
from support.providerkit import FIXTURES_DIR, fake_env, fixture_path

RECORDED = [(case, v) for case in CASES for v in case.recorded_versions(FIXTURES_DIR)]


def test_every_contract_case_has_its_pinned_stream() -> None:
    missing = sorted(case.fixture for case in CASES if not fixture_path(case.fixture).exists())
    assert missing == [], "record them: LIRUN_TEST_RECORD_FIXTURES=1 pytest -m real_cli"


@pytest.mark.parametrize(("case", "version"), RECORDED, ids=[f"{c.id}-{v}" for c, v in RECORDED])
def test_recorded_stream_ends_as_it_did_live(
    tmp_path: Path, lirun_home: Path, fake_bin: Path, case: Case, version: str
) -> None:
    """SQLite only: the parsers and the outcome rules are under test here, not the store."""
    repo = git_repo(tmp_path / "repo")
    db = str(tmp_path / "state.db")
    li_env = {**os.environ, "LIRUN_HOME": str(lirun_home), "LIRUN_DB_URL": db}
    env = fake_env(
        case.fixture_for(version),
        exit_code=0 if case.status == "completed" else 1,
        hang_after=case.replay_hang,
        touch=case.touch,
        base=li_env,
    )
    env["LIRUN_FAKE_VERSION"] = case.contract.version_line.format(version)
    env[f"LIRUN_{case.provider.upper()}_BIN"] = str(fake_bin / case.provider)
    args = ["agent", f"{case.provider}/{case.model}", "replay", "--json", *case.replay_args]
    proc = run_li(*args, env=env, cwd=repo)
    assert proc.returncode == EXIT_CODE_BY_STATUS[case.status], proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert (summary["status"], summary["reason"]) == (case.status, case.reason)
    row = only_row(db)
    assert case.summary_matches(row["status_reason_summary"] or ""), row["status_reason_summary"]
    assert (row["model"], row["provider_version"]) == (case.recorded_model, version)
    if case.status == "completed":
        # Retries and warnings the CLI got past are evidence, not how the run ended.
        assert row["provider_error"] is None, row["provider_error"]


def test_install_clis_installs_every_contracts_cli() -> None:
    """scripts/install-clis (bash, run by CI before Python) holds the same table as the
    contracts: one ``install_one NAME PACKAGE PIN BIN`` line per provider."""
    script = (TESTS_DIR.parent / "scripts" / "install-clis").read_text()
    lines = {tuple(ln.split()[1:5]) for ln in script.splitlines() if ln.startswith("install_one ")}
    wanted = {(c.cli_name, c.package, c.pinned, c.bin) for c in CONTRACTS.values()}
    assert lines == wanted

"""Importing the library stays light: no driver, no CLI toolkit, no rich at import time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = {"psycopg", "rich", "argparse"}


def modules_after(code: str) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


def top_level(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


@pytest.mark.parametrize(
    "code",
    ["import lirun", "import lirun.store", "from lirun import StateDB, TransitionRejectedError"],
)
def test_the_library_imports_no_driver_cli_or_rich(code: str) -> None:
    loaded = top_level(modules_after(code))
    assert "lirun" in loaded
    assert not loaded & HEAVY, loaded & HEAVY


def test_the_cli_entry_point_imports_no_driver_or_rich() -> None:
    loaded = top_level(modules_after("import lirun.cli.main"))
    assert not loaded & {"psycopg", "rich"}


def test_opening_a_sqlite_store_does_not_import_psycopg(tmp_path: Path) -> None:
    code = (
        "from lirun.store import open_store\n"
        f"s = open_store({str(tmp_path / 'state.db')!r})\n"
        "s.create_session(id='x')\n"
        "s.close()"
    )
    loaded = top_level(modules_after(code))
    assert "sqlite3" in loaded
    assert not loaded & HEAVY, loaded & HEAVY


def test_the_probe_sees_what_is_imported() -> None:
    assert "argparse" in top_level(modules_after("import argparse"))


def test_every_public_name_resolves_without_driver_cli_or_rich() -> None:
    """DESIGN §6: the public contract, loaded name by name, stays a library."""
    code = "import lirun\nfor name in lirun.__all__:\n    getattr(lirun, name)"
    loaded = top_level(modules_after(code))
    assert not loaded & HEAVY, loaded & HEAVY


def test_the_public_contract_names_of_design_section_6() -> None:
    import lirun

    contract = {
        "lirun_home", "runs_root", "RunDir", "allocate_run",
        "VALID_STATUSES_BY_ENTITY_TYPE", "TERMINAL_STATUSES_BY_ENTITY_TYPE",
        "SUCCESS_STATUSES_BY_ENTITY_TYPE", "VALID_SESSION_STATUSES",
        "SESSION_TERMINAL_STATUSES", "EXIT_CODE_BY_STATUS", "VALID_REASON_CODES",
        "VALID_SOURCES", "StateDB", "TransitionRejectedError", "ArtifactPathError",
        "validate_artifact_contract", "resolve_artifact_contract", "verify_artifact_contract",
        "check_completion_evidence", "setup_persist", "teardown_persist",
        "wait_for_terminal", "format_wait_line", "run_wait",
        "execute", "ExecutionRequest", "ExecutionResult",
    }  # fmt: skip
    assert contract <= set(lirun.__all__)

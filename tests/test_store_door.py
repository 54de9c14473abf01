"""The store is the only door to SQL, and driver errors stop at it."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import lirun
from lirun.errors import LirunError
from lirun.store import Store, open_store
from lirun.store.queries import check_slots

SRC = Path(lirun.__file__).resolve().parent


def sources(where: Path) -> dict[str, str]:
    return {
        str(p.relative_to(SRC)): p.read_text(encoding="utf-8")
        for p in sorted(where.rglob("*.py"))
        if "store" not in p.relative_to(SRC).parts
    }


@pytest.mark.parametrize(
    "pattern",
    [r"\.connector\.", r"\.sql\(", r"\bload_queries\b", r"\.dialect\s*==", r"\bsqlite3\b"],
)
def test_no_module_outside_the_store_runs_sql_itself(pattern: str) -> None:
    found = [name for name, text in sources(SRC).items() if re.search(pattern, text)]
    assert found == [], f"{pattern} outside store/: {found}"


def test_the_cli_never_imports_a_backend_module_or_the_connector() -> None:
    pattern = re.compile(r"store\.postgres|store\.sqlite|\.connector\b")
    found = [name for name, text in sources(SRC / "cli").items() if pattern.search(text)]
    assert found == []


def test_redact_url_needs_no_backend_module() -> None:
    probe = (
        "import json, sys\n"
        "from lirun.cli import db, status\n"
        "from lirun.store.urls import redact_url\n"
        "assert redact_url('postgresql://u:pw@h/d') == 'postgresql://u:***@h/d'\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert not set(json.loads(out)) & {"lirun.store.postgres", "psycopg"}


@pytest.mark.parametrize(
    "slots",
    [
        {"table": "sessions; DROP TABLE sessions"},
        {"table": "status_transitions"},
        {"columns": "id, status) VALUES (1, 2); --"},
        {"assignments": "status = 'completed'"},
        {"extra_set": ", exit_code = 0"},
        {"where": "1 = 1"},
    ],
)
def test_a_template_slot_takes_only_closed_identifiers(slots: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="not a known identifier list"):
        check_slots(slots)


def test_the_template_slots_the_store_fills_pass() -> None:
    check_slots(
        {
            "table": "sessions",
            "columns": "id, status",
            "values": ":id, :status",
            "assignments": "ended_at = :ended_at, exit_code = :exit_code",
            "extra_set": ", ended_at = :x_ended_at, exit_code = :x_exit_code",
        }
    )
    check_slots({"extra_set": ""})


def test_wait_reads_bind_any_number_of_ids_on_either_backend(store: Store) -> None:
    ids = [f"run-{i}" for i in range(300)]
    for sid in ids:
        store.sessions.create(id=sid, owner_pid=None)
    inv = store.invocations.create(skill="review", id="inv-1").id
    store.sessions.create(id="child", invocation_id=inv, owner_pid=None, run_dir="/tmp/rd")
    rows = store.waits.fetch_rows({"session": ids, "invocation": [inv], "play": []})
    assert {(r.kind, r.id) for r in rows} == {("session", i) for i in ids} | {("invocation", inv)}
    assert next(r for r in rows if r.kind == "invocation").run_dir == "/tmp/rd"
    assert store.waits.fetch_rows({}) == []
    exact = store.waits.resolve_exact([*ids[:5], "nope"])
    assert {r.input for r in exact} == set(ids[:5])
    assert store.waits.resolve_exact([]) == []
    [match] = store.waits.match_ids("-299", limit=10)
    assert (match.kind, match.id, match.total) == ("session", "run-299", 1)
    assert [s.id for s in store.waits.invocation_sessions(inv)] == ["child"]


def test_fetch_wait_rows_refuses_a_kind_that_is_not_waited_on(store: Store) -> None:
    with pytest.raises(KeyError, match="team"):
        store.waits.fetch_rows({"team": ["t"]})


def test_change_token_after_close_is_a_lirun_error(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "state.db"))
    assert store.connector.change_token() is not None
    store.close()
    with pytest.raises(LirunError) as caught:
        store.connector.change_token()
    assert not isinstance(caught.value, sqlite3.Error)
    assert isinstance(caught.value.__cause__, sqlite3.ProgrammingError)

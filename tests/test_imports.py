"""Importing the library stays light: no driver, no CLI toolkit, no rich at import time."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.pg import make_pg_url

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
        "s.sessions.create(id='x')\n"
        "s.close()"
    )
    loaded = top_level(modules_after(code))
    assert "sqlite3" in loaded
    assert not loaded & HEAVY, loaded & HEAVY


def test_the_probe_sees_what_is_imported() -> None:
    assert "argparse" in top_level(modules_after("import argparse"))


def test_every_public_name_resolves_without_driver_cli_or_rich() -> None:
    """design.md §6: the public contract, loaded name by name, stays a library."""
    code = "import lirun\nfor name in lirun.__all__:\n    getattr(lirun, name)"
    loaded = top_level(modules_after(code))
    assert not loaded & HEAVY, loaded & HEAVY


# -- the fast path: `li wait`, `li --help`, `li status` (bench/bench_startup.py) ----------

# Every lirun module those commands load, as ARCHITECTURE.md lists it ("The fast path").
# A module joining the path must be added here and there, on purpose.
FAST_PATH = {
    "lirun", "lirun.async_twin", "lirun.errors", "lirun.hints", "lirun.lifecycle",
    "lirun.logs", "lirun.paths", "lirun.platform", "lirun.platform.linux", "lirun.reasons",
    "lirun.signals", "lirun.run_output", "lirun.visible", "lirun.settings",
    "lirun.cli", "lirun.cli.common", "lirun.cli.diagnostics", "lirun.cli.main", "lirun.cli.parser",
    "lirun.cli.outcome_lines", "lirun.cli.render", "lirun.cli.status", "lirun.cli.wait",
    "lirun.record", "lirun.record.work",
    "lirun.store", "lirun.store.base", "lirun.store.bulk_import", "lirun.store.connector",
    "lirun.store.core",
    "lirun.store.dbfile", "lirun.store.invocation_records", "lirun.store.list_reads",
    "lirun.store.metric_reads", "lirun.store.queries", "lirun.store.records",
    "lirun.store.repository", "lirun.store.retention_records", "lirun.store.retry",
    "lirun.store.rows", "lirun.store.session_records",
    "lirun.store.rows.base", "lirun.store.rows.reads", "lirun.store.rows.runs",
    "lirun.store.rows.schedules",
    "lirun.store.rows.shows",
    "lirun.store.rows.teams",
    "lirun.store.schedule_records",
    "lirun.store.show_records", "lirun.store.sql_script", "lirun.store.sqlite",
    "lirun.store.status_write", "lirun.store.team_records", "lirun.store.transitions",
    "lirun.store.ui_reads", "lirun.store.urls", "lirun.store.wait_reads",
    "lirun.store.worker_records", "lirun.store.bounds",
    "lirun.teams", "lirun.teams.talk",
    "lirun.views", "lirun.views.detail",
    "lirun.wait", "lirun.wait.api", "lirun.wait.fswatch", "lirun.wait.outcome",
    "lirun.wait.resolve", "lirun.wait.wake", "lirun.wait.watch",
}  # fmt: skip

# What no `li wait` may load: each costs start-up time the command does not need.
NOT_ON_THE_WAIT_PATH = {
    "psycopg", "rich", "argparse", "asyncio", "typing", "re", "enum", "json", "pathlib",
    "dataclasses", "uuid", "random", "secrets", "subprocess", "threading", "signal",
    "urllib", "inspect", "importlib_metadata", "jsonschema", "prometheus_client",
}  # fmt: skip


# The handler of `li: …` lines: installed by every command, importing no logging until used.
CLI_LOGS = "lirun.cli.diagnostics"


def modules_loaded_by(code: str) -> set[str]:
    """Like ``modules_after``, but the probe itself imports nothing (no json)."""
    import ast

    probe = f"{code}\nimport sys\nprint(sorted(sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    return set(ast.literal_eval(out.splitlines()[-1]))


def finished_sqlite_db(tmp_path: Path) -> str:
    return finished_db(str(tmp_path / "state.db"))


def finished_db(url: str) -> str:
    from lirun.store import open_store

    store = open_store(url)
    store.sessions.create(id="done-1")
    store.update_status(
        "session", "done-1", new_status="completed", reason_code="run.completed.ok",
        expected_statuses={"running"}, extra_fields={"exit_code": 0},
    )  # fmt: skip
    store.close()
    return url


def cli_modules(argv: list[str], env_db: str, home: Path) -> set[str]:
    code = (
        "import os\n"
        f"os.environ['LIRUN_DB_URL'] = {env_db!r}\n"
        f"os.environ['LIRUN_HOME'] = {str(home)!r}\n"
        "from lirun.cli.main import main\n"
        f"main({argv!r})"
    )
    return modules_loaded_by(code)


def test_li_wait_on_sqlite_loads_only_what_it_needs(tmp_path: Path) -> None:
    url = finished_sqlite_db(tmp_path)
    loaded = cli_modules(["wait", "done-1"], url, tmp_path / "home")
    assert "lirun.wait.watch" in loaded
    assert "sqlite3" in loaded
    assert not top_level(loaded) & NOT_ON_THE_WAIT_PATH, top_level(loaded) & NOT_ON_THE_WAIT_PATH
    other_commands = {m for m in loaded if m.startswith(("lirun.cli.", "lirun.exec"))}
    assert other_commands <= {"lirun.cli.main", "lirun.cli.wait", "lirun.cli.common", CLI_LOGS}


@pytest.fixture
def pg_only_url() -> Iterator[str]:
    yield from make_pg_url()


def test_li_wait_on_postgres_imports_the_driver_and_no_other_command(
    tmp_path: Path, pg_only_url: str
) -> None:
    """psycopg comes in only because a PostgreSQL URL was opened (and brings its own
    imports); of lirun, only the wait command and the store's PostgreSQL connector."""
    url = finished_db(pg_only_url)
    loaded = cli_modules(["wait", "done-1"], url, tmp_path / "home")
    assert {"psycopg", "lirun.store.postgres", "lirun.wait.watch"} <= loaded
    other_commands = {m for m in loaded if m.startswith(("lirun.cli.", "lirun.exec"))}
    assert other_commands <= {"lirun.cli.main", "lirun.cli.wait", "lirun.cli.common", CLI_LOGS}
    assert not top_level(loaded) & {"rich", "argparse"}


def test_li_help_loads_no_command_module_and_no_heavy_import(tmp_path: Path) -> None:
    loaded = cli_modules(["--help"], str(tmp_path / "state.db"), tmp_path / "home")
    assert {m for m in loaded if m.startswith("lirun.")} <= {
        "lirun.cli",
        "lirun.cli.main",
        "lirun.errors",
    }
    assert not top_level(loaded) & NOT_ON_THE_WAIT_PATH


def test_import_lirun_loads_the_client_only_when_a_client_name_is_used() -> None:
    assert not {m for m in modules_loaded_by("import lirun") if m.startswith("lirun.client")}
    loaded = modules_loaded_by("import lirun\nlirun.Client")
    assert "lirun.client.sync" in loaded
    assert not top_level(loaded) & HEAVY  # no driver, no argparse, no rich to make one


def test_the_async_face_imports_asyncio_only_when_awaited() -> None:
    loaded = top_level(modules_loaded_by("from lirun import StateDB\nStateDB(':memory:')"))
    assert "asyncio" not in loaded


def test_hints_namedtuple_is_a_namedtuple_at_run_time() -> None:
    code = (
        "from lirun.hints import NamedTuple\n"
        "class P(NamedTuple):\n"
        "    x: int\n"
        "    y: int = 2\n"
        "    def total(self) -> int:\n"
        "        return self.x + self.y\n"
        "p = P(1)\n"
        "assert p == (1, 2) and p.total() == 3 and P._fields == ('x', 'y')\n"
        "assert p._replace(y=5).y == 5 and P._field_defaults == {'y': 2}\n"
    )
    loaded = top_level(modules_loaded_by(code))
    assert "typing" not in loaded


@pytest.mark.parametrize(
    "argv", [["wait", "done-1"], ["--help"], ["status"], ["status", "done-1"]], ids=" ".join
)
def test_the_fast_path_commands_load_only_the_fast_path(tmp_path: Path, argv: list[str]) -> None:
    url = finished_sqlite_db(tmp_path)
    loaded = cli_modules(argv, url, tmp_path / "home")
    assert "lirun.cli.main" in loaded  # the probe saw the command
    assert {m for m in loaded if m.startswith("lirun")} - FAST_PATH == set()
    assert not {m for m in loaded if m.startswith("lirun.client")}  # the Python client
    assert not top_level(loaded) & {"psycopg", "yaml", "jinja2"}


def test_li_status_of_a_failed_run_reads_its_stderr_on_the_fast_path(tmp_path: Path) -> None:
    """The last lines of a failed run's stderr cost two small modules (os, and the escape
    of invisible characters), not the reader of ``li logs``."""
    from lirun.store import open_store

    run_dir = tmp_path / "runs" / "failed-1"
    (run_dir / "stream").mkdir(parents=True)
    (run_dir / "stream" / "stderr.log").write_text("boom\n")
    url = str(tmp_path / "state.db")
    store = open_store(url)
    store.sessions.create(id="failed-1", run_dir=str(run_dir))
    store.update_status(
        "session", "failed-1", new_status="failed", reason_code="run.failed.exit_nonzero",
        expected_statuses={"running"}, extra_fields={"exit_code": 1},
    )  # fmt: skip
    store.close()
    loaded = cli_modules(["status", "failed-1"], url, tmp_path / "home")
    assert {"lirun.run_output", "lirun.visible"} <= loaded
    assert {m for m in loaded if m.startswith("lirun")} - FAST_PATH == set()


def test_architecture_md_lists_the_fast_path() -> None:
    text = (Path(__file__).parent.parent / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## The fast path", 1)[1].split("\n## ", 1)[0]
    listed = {
        "lirun." + name if name != "lirun" else name for name in re.findall(r"`([\w.]+)`", section)
    }
    assert listed == FAST_PATH


def test_li_run_of_a_command_loads_no_agent_side(tmp_path: Path) -> None:
    """`li run -- true` (bench_startup.py holds it to 12x) runs a command: the providers,
    their stream parsers' table and the agent legs are `li agent`'s, and PyYAML is read only
    for a named profile or playbook."""
    loaded = cli_modules(["run", "--", "true"], str(tmp_path / "state.db"), tmp_path / "home")
    assert "lirun.exec.legs" in loaded  # the probe ran the command
    agent_side = {"lirun.exec.agent_legs", "lirun.exec.task", "lirun.exec.provider_options"}
    agent_side |= {m for m in loaded if m == "lirun.providers" or m.startswith("lirun.providers.")}
    agent_side |= {"lirun.exec.stream", "lirun.exec.failure_text"}  # the stream parsers
    assert not loaded & agent_side, loaded & agent_side
    assert "yaml" not in top_level(loaded)


def test_the_guard_process_starts_light() -> None:
    """The owner's guard starts beside every `li run` (on the machine's other core, if it
    has one): it imports what kills and notes, never the store, the record or the legs."""
    src = str(Path(__file__).parent.parent / "src")
    code = f"import sys; sys.path[:0] = [{src!r}]; import lirun.exec.guard"
    probe = f"{code}\nimport json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    loaded = set(json.loads(out.splitlines()[-1]))
    heavy = {m for m in loaded if m.startswith(("lirun.store", "lirun.exec.legs", "lirun.record."))}
    assert heavy <= {"lirun.record.credential"}, heavy

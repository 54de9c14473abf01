"""One settings value (issue 20, item 4): the ``LIRUN_*`` variables parsed once, flags over
the environment, bad values refused in one line, and no new reads scattered about."""

from __future__ import annotations

import ast
import copy
import os
import pickle
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lirun.cli.main import main
from lirun.errors import UsageError
from lirun.exec.execution import HEARTBEAT_INTERVAL, _intervals, execute
from lirun.exec.legs import CommandProgram
from lirun.exec.request import RunRequest
from lirun.exec.task import Task
from lirun.flows.engine import FlowOptions, run_flow
from lirun.flows.spec import FlowSpec, LegSpec
from lirun.schedules.runner import Runner, RunnerConfig
from lirun.settings import DEFAULT_WRITE_RETRY_SECONDS, Settings
from lirun.shows.engine import ShowOptions, run_show
from lirun.store.retry import write_retry_seconds
from support.cli import li_command
from support.showkit import play, show_repo, writes
from support.showkit import spec as show_spec
from support.storekit import opened
from support.workerkit import add_schedule, run_row

SRC = Path(__file__).resolve().parents[1] / "src" / "lirun"


def test_defaults_from_an_empty_environment() -> None:
    settings = Settings.from_env({})
    assert settings == Settings()
    assert settings.heartbeat_interval is None
    assert settings.write_retry_seconds == DEFAULT_WRITE_RETRY_SECONDS
    assert settings.cgroup is True
    assert settings.guard is True


def test_every_variable_is_read() -> None:
    settings = Settings.from_env(
        {
            "LIRUN_HOME": "/h",  # not a field: paths reads it (settings.env_home)
            "LIRUN_DB_URL": "/h/x.db",
            "LIRUN_HEARTBEAT_INTERVAL": "2.5",
            "LIRUN_WRITE_RETRY_SECONDS": "-3",
            "LIRUN_CGROUP": "Off",
            "LIRUN_GUARD": "0",
            "LIONAGI_RUN_ID": "lion",
            "LIRUN_CLAUDE_BIN": "/bin/claude",
            "LIRUN_CODEX_BIN": " ",
            "LIRUN_UI_TOKEN": "tok",
            "LIRUN_MEMBER": "alice",
            "LIRUN_PARENT_RUN_ID": "parent",
        }
    )
    assert settings == Settings(
        db_url="/h/x.db",
        heartbeat_interval=2.5,
        write_retry_seconds=0.0,  # a negative bound is no retrying, as before
        cgroup=False,
        guard=False,
        run_id="lion",
        provider_bins=(("LIRUN_CLAUDE_BIN", "/bin/claude"),),  # a blank one is unset
        ui_token="tok",
        member="alice",
        parent_run_id="parent",
    )
    assert settings.provider_bin("claude") == "/bin/claude"
    assert settings.provider_bin("codex") is None


def test_settings_are_a_frozen_value() -> None:
    """Compared, hashed, copied and pickled by their fields, and never changed in place
    (a named tuple: settings.py is on the fast path, which loads no dataclasses)."""
    settings = Settings(db_url="/x.db", provider_bins=(("LIRUN_X_BIN", "/x"),), cgroup=False)
    for twin in (
        copy.copy(settings),
        copy.deepcopy(settings),
        pickle.loads(pickle.dumps(settings)),
    ):
        assert twin == settings
        assert type(twin) is Settings
        assert hash(twin) == hash(settings)
    assert settings != Settings(db_url="/y.db")
    assert settings != "/x.db"
    with pytest.raises(AttributeError):
        settings.db_url = "/y.db"  # type: ignore[misc]  # frozen: the write must raise
    assert settings.with_flags(db_url="/y.db", run_id=None) == Settings(
        db_url="/y.db", provider_bins=(("LIRUN_X_BIN", "/x"),), cgroup=False
    )
    assert settings.with_flags(run_id=None) is settings
    assert repr(Settings(db_url="/x.db")).startswith("Settings(db_url='/x.db', ")
    with pytest.raises(TypeError, match="not a setting: home"):
        settings.with_flags(home="/h")


def test_any_provider_finds_its_bin_variable_by_its_name() -> None:
    """No provider list in the settings: the variable is derived from the name."""
    settings = Settings.from_env({"LIRUN_MY_CLI_BIN": " /opt/my-cli ", "LIRUN_X_BIN": ""})
    assert settings.provider_bin("my-cli") == "/opt/my-cli"
    assert settings.provider_bin("x") is None
    assert settings.provider_bin("other") is None


def test_lirun_run_id_wins_over_the_lionagi_one() -> None:
    env = {"LIRUN_RUN_ID": "ours", "LIONAGI_RUN_ID": "theirs"}
    assert Settings.from_env(env).run_id == "ours"


def test_a_duration_setting_takes_the_duration_grammar() -> None:
    settings = Settings.from_env(
        {"LIRUN_HEARTBEAT_INTERVAL": "1m", "LIRUN_WRITE_RETRY_SECONDS": "-5"}
    )
    assert (settings.heartbeat_interval, settings.write_retry_seconds) == (60.0, 0.0)


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("LIRUN_HEARTBEAT_INTERVAL", "soon", "LIRUN_HEARTBEAT_INTERVAL 'soon' is not a duration"),
        ("LIRUN_HEARTBEAT_INTERVAL", "0", "LIRUN_HEARTBEAT_INTERVAL '0' is zero"),
        ("LIRUN_HEARTBEAT_INTERVAL", "nan", "LIRUN_HEARTBEAT_INTERVAL 'nan' is not a duration"),
        ("LIRUN_WRITE_RETRY_SECONDS", "inf", "LIRUN_WRITE_RETRY_SECONDS 'inf' is not a duration"),
        ("LIRUN_WRITE_RETRY_SECONDS", "x", "LIRUN_WRITE_RETRY_SECONDS 'x' is not a duration"),
        ("LIRUN_CGROUP", "maybe", "LIRUN_CGROUP: expected on or off"),
        ("LIRUN_GUARD", "nope", "LIRUN_GUARD: expected on or off"),
    ],
)
def test_a_bad_value_names_its_variable(name: str, value: str, expected: str) -> None:
    with pytest.raises(UsageError) as caught:
        Settings.from_env({name: value})
    assert str(caught.value).startswith(expected)
    assert "\n" not in str(caught.value)


def test_flags_win_over_the_environment_and_none_is_not_given() -> None:
    env = Settings.from_env({"LIRUN_DB_URL": "/env.db", "LIRUN_RUN_ID": "env-id"})
    flagged = env.with_flags(db_url="/flag.db", run_id=None)
    assert flagged.db_url == "/flag.db"
    assert flagged.run_id == "env-id"
    assert env.db_url == "/env.db"  # frozen: a new value, the old one unchanged
    with pytest.raises(TypeError, match="not a setting: colour"):
        env.with_flags(colour="red")


def test_li_refuses_a_bad_setting_in_one_line_exit_2(tmp_path: Path) -> None:
    env = {**os.environ, "LIRUN_HEARTBEAT_INTERVAL": "soon", "LIRUN_DB_URL": str(tmp_path / "s.db")}
    done = subprocess.run(
        li_command("run", "--", "true"), env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "li run: error: LIRUN_HEARTBEAT_INTERVAL 'soon' is not a duration; give a number of "
        "seconds (90, 2.5) or 30s, 5m, 2h, 1d, 1h30m"
    ]
    assert not (tmp_path / "s.db").exists()  # refused before anything was written


def test_global_db_flag_wins_and_leaves_the_environment_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from_env, from_flag = str(tmp_path / "env.db"), str(tmp_path / "flag.db")
    monkeypatch.setenv("LIRUN_DB_URL", from_env)
    assert main(["--db", from_flag, "db", "path"]) == 0
    assert capsys.readouterr().out.strip() == from_flag
    assert os.environ["LIRUN_DB_URL"] == from_env  # passed down, not put in os.environ
    assert main(["db", "path"]) == 0  # the next command in this process: the environment's
    assert capsys.readouterr().out.strip() == from_env


def test_global_db_flag_reaches_the_child(tmp_path: Path) -> None:
    """``li --db URL run``: the child's LIRUN_DB_URL is that database, as before."""
    db = str(tmp_path / "flag.db")
    out = tmp_path / "seen"
    env = {k: v for k, v in os.environ.items() if k != "LIRUN_DB_URL"}
    done = subprocess.run(
        li_command("--db", db, "run", "--", "sh", "-c", f'printf %s "$LIRUN_DB_URL" > {out}'),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert out.read_text() == db
    assert Path(db).exists()


def test_a_library_caller_gets_the_heartbeat_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    request = RunRequest(program=CommandProgram(["true"]), cwd=".")
    assert _intervals(request)[0] == HEARTBEAT_INTERVAL
    monkeypatch.setenv("LIRUN_HEARTBEAT_INTERVAL", "100")
    assert _intervals(request) == (100.0, 400.0)  # the lease holds four beats
    given = RunRequest(
        program=CommandProgram(["true"]), cwd=".", settings=Settings(heartbeat_interval=2.0)
    )
    assert _intervals(given)[0] == 2.0  # what the caller gave wins


def _leases(db: str) -> list[float]:
    """Every session's lease in the SQLite file ``db`` (one run's, flow's or show's)."""
    with sqlite3.connect(db) as conn:
        return [row[0] for row in conn.execute("SELECT lease_seconds FROM sessions")]


def test_a_library_run_records_the_lease_of_the_environment_interval(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`execute()` without settings: $LIRUN_HEARTBEAT_INTERVAL and $LIRUN_DB_URL, as `li run`."""
    monkeypatch.setenv("LIRUN_HEARTBEAT_INTERVAL", "100")
    db = str(tmp_path / "lib.db")
    monkeypatch.setenv("LIRUN_DB_URL", db)
    request = RunRequest(program=CommandProgram(["true"]), cwd=str(tmp_path))
    execute(request)
    assert _leases(db) == [400.0]  # four beats of 100 s


def test_a_library_caller_with_a_bad_setting_gets_usage_error_before_anything_exists(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, lirun_home: Path
) -> None:
    monkeypatch.setenv("LIRUN_HEARTBEAT_INTERVAL", "-1")
    monkeypatch.setenv("LIRUN_DB_URL", str(tmp_path / "lib.db"))
    monkeypatch.setenv("LIRUN_RUN_ID", "given-id")
    request = RunRequest(program=CommandProgram(["true"]), cwd=str(tmp_path))
    with pytest.raises(UsageError, match=r"^LIRUN_HEARTBEAT_INTERVAL '-1' is negative"):
        execute(request)
    assert not (lirun_home / "runs" / "given-id").exists()  # no run directory was left


# An owner's lease asks for its guard switch on each renewal (not a run's setting).
_READ_WHERE_USED = {"lirun.exec.guard"}


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[Settings]:
    """Every ``Settings.from_env()`` this process makes from now on, as a list, but the
    owner's guard switch (``exec.guard.renew``)."""
    reads: list[Settings] = []
    real = Settings.from_env.__func__  # type: ignore[attr-defined]  # the classmethod's function

    def counted(cls: type[Settings], environ: object = None) -> Settings:
        settings = real(cls, environ)
        if sys._getframe(1).f_globals["__name__"] not in _READ_WHERE_USED:
            reads.append(settings)
        return settings

    monkeypatch.setattr(Settings, "from_env", classmethod(counted))
    return reads


def test_a_command_gets_the_settings_li_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`li` reads the environment once and hands that value, ``li --db`` over it, down."""
    from lirun.cli import db as db_cli

    seen: list[Settings] = []

    def db_main(argv: list[str], settings: Settings) -> int:
        seen.append(settings)
        return 0

    monkeypatch.setattr(db_cli, "main", db_main)
    monkeypatch.setenv("LIRUN_RUN_ID", "env-id")
    monkeypatch.setenv("LIRUN_DB_URL", str(tmp_path / "env.db"))
    reads = _count_reads(monkeypatch)
    assert main(["--db", str(tmp_path / "flag.db"), "db", "path"]) == 0
    assert len(reads) == 1  # read once, by li, for the command
    assert seen == [reads[0].with_flags(db_url=str(tmp_path / "flag.db"))]
    assert seen[0].run_id == "env-id"
    assert seen[0].db_url == str(tmp_path / "flag.db")  # the flag wins


def test_a_bad_setting_is_refused_once_before_the_command_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lirun.cli import db as db_cli

    started: list[list[str]] = []

    def db_main(argv: list[str], settings: Settings) -> int:
        started.append(argv)
        return 0

    monkeypatch.setattr(db_cli, "main", db_main)
    monkeypatch.setenv("LIRUN_GUARD", "maybe")
    reads = _count_reads(monkeypatch)
    assert main(["db", "path"]) == 2
    assert started == []  # the command never ran
    assert len(reads) == 0  # the one read raised: nothing was read twice
    assert capsys.readouterr().err.splitlines() == [
        "li db: error: LIRUN_GUARD: expected on or off (1/0, yes/no, true/false), got 'maybe'"
    ]


def test_the_run_id_flag_wins_over_the_environment(tmp_path: Path) -> None:
    env = {**os.environ, "LIRUN_RUN_ID": "env-id", "LIRUN_DB_URL": str(tmp_path / "s.db")}
    done = subprocess.run(
        li_command("run", "--run-id", "flag-id", "--json", "--", "true"),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert '"run_id": "flag-id"' in done.stdout


def test_execute_uses_the_settings_it_is_given_not_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A library caller's ``Settings``: its run id and heartbeat interval, while the
    environment says otherwise (a bad value there is not even read)."""
    monkeypatch.setenv("LIRUN_RUN_ID", "env-id")
    monkeypatch.setenv("LIRUN_HEARTBEAT_INTERVAL", "soon")
    db = str(tmp_path / "lib.db")
    monkeypatch.setenv("LIRUN_DB_URL", str(tmp_path / "env.db"))
    settings = Settings(run_id="given-id", heartbeat_interval=50.0, guard=False, db_url=db)
    request = RunRequest(program=CommandProgram(["true"]), cwd=str(tmp_path), settings=settings)
    result = execute(request)
    assert result.run_id == "given-id"
    assert _leases(db) == [200.0]  # four beats of the given 50 s, in the given database
    assert not (tmp_path / "env.db").exists()  # not the environment's


def test_a_request_holds_its_database_id_and_interval_in_its_settings_only() -> None:
    """One place for each: ``RunRequest`` has no copies of the settings' fields."""
    names = set(RunRequest.__dataclass_fields__)
    assert "settings" in names
    assert names & set(Settings._fields) == set()


GIVEN = Settings(heartbeat_interval=50.0, guard=False)


def test_a_flows_legs_run_on_the_settings_it_is_given(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``FlowOptions.settings`` reach every leg's execution, while the environment says
    otherwise (the flow's own lease is the owner's, not a setting's)."""
    monkeypatch.setenv("LIRUN_HEARTBEAT_INTERVAL", "100")
    db = str(tmp_path / "flow.db")
    spec = FlowSpec(
        legs=(LegSpec("a", Task(run=("true",))), LegSpec("b", Task(run=("true",)))),
        cwd=str(tmp_path),
    )
    options = FlowOptions(retry_delay=0.0, settings=GIVEN)
    report = run_flow(spec, db_url=db, options=options)
    assert report.status == "completed", report.to_dict()
    assert _leases(db) == [200.0, 200.0]  # the given 50 s, four beats, for each leg (not 400)


def test_a_shows_plays_and_gates_run_on_the_settings_it_is_given(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``ShowOptions.settings`` reach the play's execution, its gate and the final gate,
    while the environment says otherwise."""
    monkeypatch.setenv("LIRUN_HEARTBEAT_INTERVAL", "100")
    db = str(tmp_path / "show.db")
    repo = show_repo(tmp_path)
    plays = [play("a", writes("a.txt", "A"))]
    options = ShowOptions(settings=GIVEN)
    report = run_show(
        show_spec(repo, plays, final_gate="test -f a.txt"), db_url=db, options=options
    )
    assert report.status == "completed", report.to_dict()
    assert _leases(db) == [200.0, 200.0, 200.0]  # the play, its gate, the final gate (not 400)


def test_a_workers_run_uses_the_settings_it_is_given(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``RunnerConfig.settings`` (``li worker``'s) reach a scheduled run's execution."""
    monkeypatch.setenv("LIRUN_HEARTBEAT_INTERVAL", "100")
    db = str(tmp_path / "worker.db")
    with opened(db) as store:
        schedule = add_schedule(store, tmp_path, "nightly", ["run", "true"])
        run = store.schedules.insert_due_run(
            schedule_id=schedule.id, due_at=int(time.time()), action_kind="run"
        )
    assert run is not None
    Runner(RunnerConfig(db_url=db, worker_id="w", settings=GIVEN)).handle(run.id)
    with opened(db) as store:
        assert run_row(store, run.id)["status"] == "completed"
    assert _leases(db) == [200.0]  # four beats of the given 50 s (not 400)


def test_execute_reads_the_environment_once_when_given_no_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LIRUN_GUARD", "off")
    monkeypatch.setenv("LIRUN_DB_URL", str(tmp_path / "lib.db"))
    request = RunRequest(program=CommandProgram(["true"]), cwd=str(tmp_path))
    reads = _count_reads(monkeypatch)
    execute(request)
    assert len(reads) == 1


def test_a_flow_given_no_settings_reads_the_environment_once_for_all_its_legs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LIRUN_HEARTBEAT_INTERVAL", "100")
    db = str(tmp_path / "flow.db")
    spec = FlowSpec(
        legs=(LegSpec("a", Task(run=("true",))), LegSpec("b", Task(run=("true",)))),
        cwd=str(tmp_path),
    )
    reads = _count_reads(monkeypatch)
    report = run_flow(spec, db_url=db, options=FlowOptions(retry_delay=0.0))
    assert report.status == "completed", report.to_dict()
    assert len(reads) == 1  # at the flow's entry, not once per leg
    assert _leases(db) == [400.0, 400.0]  # both legs on the environment's 100 s


def test_a_bad_retry_bound_keeps_the_default_in_a_teardown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LIRUN_WRITE_RETRY_SECONDS", "7")
    assert write_retry_seconds() == 7.0
    monkeypatch.setenv("LIRUN_WRITE_RETRY_SECONDS", "soon")
    assert write_retry_seconds() == DEFAULT_WRITE_RETRY_SECONDS


# --- no LIRUN_* variable is read outside settings.py ------------------------------------

_READ_METHODS = {"get", "pop", "setdefault", "__getitem__", "__contains__"}


def _is_environ(node: ast.expr) -> bool:
    """``os.environ`` or a bare ``environ`` (``from os import environ``)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ" and isinstance(node.value, ast.Name) and node.value.id == "os"
    return isinstance(node, ast.Name) and node.id == "environ"


def _is_getenv(node: ast.expr) -> bool:
    """``os.getenv``, or a bare ``getenv`` (``from os import getenv``)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "getenv" and isinstance(node.value, ast.Name) and node.value.id == "os"
    return isinstance(node, ast.Name) and node.id == "getenv"


def lirun_constants(tree: ast.Module) -> set[str]:
    """The module-level names ``tree`` binds to a ``LIRUN_…`` string (``FENCE_ENV``)."""
    found = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and _names_lirun(node.value):
            found |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found |= {node.target.id} if node.value and _names_lirun(node.value) else set()
    return found


def _names_lirun(node: ast.expr, constants: frozenset[str] = frozenset()) -> bool:
    """Whether ``node``, an environment key, is a ``LIRUN_…`` name: a string, an f-string
    starting so (``f"LIRUN_{name}_BIN"``), or a constant that holds one (``X_ENV``,
    ``module.X_ENV``)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value.startswith("LIRUN_")
    if isinstance(node, ast.JoinedStr):
        return bool(node.values) and _names_lirun(node.values[0])
    if isinstance(node, ast.Name):
        return node.id in constants
    if isinstance(node, ast.Attribute):
        return node.attr in constants
    return False


def lirun_reads(source: str, constants: frozenset[str]) -> list[int]:
    """The lines of ``source`` that read a ``LIRUN_…`` variable from the environment:
    ``os.environ.get(K)`` (``pop``, ``setdefault``), ``os.environ[K]``, ``K in os.environ``,
    ``os.getenv(K)``, where K names one (``_names_lirun``). Writes are not reads."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        key: ast.expr | None = None
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            if _is_getenv(func):
                key = node.args[0]
            elif isinstance(func, ast.Attribute) and func.attr in _READ_METHODS:
                key = node.args[0] if _is_environ(func.value) else None
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice if _is_environ(node.value) else None
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In | ast.NotIn):
            key = node.left if _is_environ(node.comparators[0]) else None
        if key is not None and isinstance(node, ast.expr) and _names_lirun(key, constants):
            lines.append(node.lineno)
    return lines


def _package() -> dict[str, str]:
    return {p.relative_to(SRC).as_posix(): p.read_text() for p in SRC.rglob("*.py")}


def test_no_lirun_variable_is_read_outside_settings() -> None:
    """A ``LIRUN_*`` variable is read in settings.py only (docs/configuration.md: every
    module else takes the ``Settings`` it is given, or a settings.py function)."""
    sources = _package()
    constants = frozenset().union(*(lirun_constants(ast.parse(s)) for s in sources.values()))
    assert {"FENCE_ENV", "TREE_ENV", "PLATFORM_ENV", "TEAM_ENV"} <= constants  # it sees them
    found = {
        name: lines
        for name, source in sources.items()
        if name != "settings.py" and (lines := lirun_reads(source, constants))
    }
    assert found == {}, "read these in settings.py (docs/configuration.md)"


@pytest.mark.parametrize(
    "line",
    [
        'os.environ.get("LIRUN_NEW", "")',
        "os.environ['LIRUN_X']",
        'os.getenv("LIRUN_X")',
        "getenv(FENCE_ENV)",
        "environ.get(containment.TREE_ENV)",
        'os.environ.pop(f"LIRUN_{name}_BIN", None)',
        '"LIRUN_X" in os.environ',
        "if LIRUN_LIKE not in os.environ: pass",
    ],
)
def test_the_check_finds_a_read(line: str) -> None:
    constants = frozenset({"FENCE_ENV", "TREE_ENV", "LIRUN_LIKE"})
    assert lirun_reads(line, constants) == [1]


@pytest.mark.parametrize(
    "line",
    [
        'os.environ.get("HOME")',
        'os.environ["LIRUN_X"] = "1"',  # a write: what a child is given
        "env.get(FENCE_ENV)",  # a child's environment being built, not this process's
        'os.getenv("PATH")',
        "os.environ.get(OTHER_ENV)",
    ],
)
def test_the_check_lets_other_reads_be(line: str) -> None:
    assert lirun_reads(line, frozenset({"FENCE_ENV"})) == []


def test_the_check_finds_the_constants() -> None:
    tree = ast.parse(
        'A_ENV = "LIRUN_A"\nB: str = "LIRUN_B"\nC = "HOME"\ndef f():\n    D = "LIRUN_D"'
    )
    assert lirun_constants(tree) == {"A_ENV", "B"}


def test_every_variable_in_the_package_is_in_the_table() -> None:
    table = (SRC.parents[1] / "docs" / "configuration.md").read_text()
    used = {
        name
        for path in SRC.rglob("*.py")
        for name in re.findall(r"\bLIRUN_[A-Z][A-Z_]*[A-Z]\b", path.read_text())
    }
    assert used, "the pattern finds the package's variables"
    assert {name for name in used if f"`{name}`" not in table} == set()

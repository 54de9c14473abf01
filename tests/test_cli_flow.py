"""``li flow``: help, usage errors (exit 2, nothing written), dry-run, and whole flows of
command legs run end to end on both backends."""

from __future__ import annotations

import json
import re
import signal
import textwrap
from pathlib import Path

import pytest

from lirun.cli.main import main as li
from support.execkit import opened_store, run_li, send, start_li, wait_for_running_row
from support.system import need_graphviz

DIAMOND = """
vars: {x: none}
parallel: 2
legs:
  - id: a
    run: [echo, alpha]
  - id: b
    depends_on: [a]
    run: [sh, -c, "echo b-{{ legs.a.reply | trim }}"]
  - id: c
    run: [echo, "c-{{ vars.x }}"]
  - id: d
    depends_on: [b, c]
    run: [echo, "{{ legs.b.reply | trim }}+{{ legs.c.reply | trim }}"]
"""

BROKEN = """
legs:
  - id: plan
    run: [echo, "{{ legs.review.reply }}"]
  - id: review
    depends_on: [plan]
    run: [echo, ok]
    isolation: maybe
"""


def write(directory: Path, text: str, name: str = "flow.yaml") -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


# --- in-process: nothing here starts a leg ------------------------------------------------------


def test_help_lists_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["flow", "--help"], ["flow", "run", "--help"], ["flow", "resume", "--help"]):
        with pytest.raises(SystemExit) as caught:
            li(argv)
        assert caught.value.code == 0
        out = capsys.readouterr().out
        assert out.startswith("usage: li flow")
        for code in ("0 ", "1 ", "2 ", "124", "130", "143"):
            assert f"\n  {code}" in out, (argv, code)


def test_a_flow_file_with_problems_exits_2_and_writes_nothing(
    tmp_path: Path, lirun_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, BROKEN)
    db = tmp_path / "state.db"
    assert li(["flow", "run", str(path), "--db", str(db)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert lines[0] == f"li flow: error: {path}: 2 problems; nothing was started"
    assert lines[1].startswith(f"  {path}:3: leg 'plan': run: reads legs.review, but it is not")
    assert lines[2].startswith(f"  {path}:7: isolation must be worktree or shared")
    assert not db.exists()
    assert list(lirun_home.iterdir()) == []


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--var", "x"], "expected KEY=VALUE"),
        (["--var", "x=1", "--var", "x=2"], "--var x is given twice"),
        (["--var", "y=1"], "the flow declares no variable 'y'"),
    ],
)
def test_bad_vars_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    path = write(tmp_path, DIAMOND)
    assert li(["flow", "run", str(path), "--dry-run", *argv]) == 2
    assert fragment in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["flow"],
        ["flow", "run"],
        ["flow", "run", "f.yaml", "--parallel", "0"],
        ["flow", "run", "f.yaml", "--parallel", "33"],
        ["flow", "walk"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        li(argv)
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert "usage:" not in err  # one line and a hint, never argparse's usage block
    first, hint = err.splitlines()
    assert first.startswith("li flow")
    assert ": error: " in first
    assert hint.startswith("try 'li flow")
    assert hint.endswith(" --help'")


def test_a_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert li(["flow", "run", str(tmp_path / "nope.yaml")]) == 2
    assert "cannot read the flow file" in capsys.readouterr().err


def test_dry_run_prints_the_plan(
    tmp_path: Path, lirun_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, DIAMOND)
    assert li(["flow", "run", str(path), "--dry-run", "--var", "x=7", "--detach"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"flow {path} (sha256 ")
    assert "parallel 2" in out[1]
    assert out[2] == "vars: x=7"
    assert out[3:] == [
        "wave 1:",
        "  a  command echo alpha  [shared]",
        "  c  command echo 'c-{{ vars.x }}'  [shared]",
        "wave 2:",
        "  b  command echo b-{{ legs.a.reply | trim }}  [shared]  <- a",  # run: as typed
        "wave 3:",
        "  d  command echo '{{ legs.b.reply | trim }}+{{ legs.c.reply | trim }}'  [shared]"
        "  <- b, c",
        "4 node(s) from 4 leg(s); nothing was run",
    ]
    assert list(lirun_home.iterdir()) == []


def test_dry_run_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, DIAMOND)
    assert li(["flow", "run", str(path), "--dry-run", "--json", "--parallel", "3"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["waves"] == [["a", "c"], ["b"], ["d"]]
    assert data["parallel"] == 3
    assert data["vars"] == {"x": "none"}
    assert data["path"] == str(path)
    assert [n["id"] for n in data["nodes"]] == ["a", "c", "b", "d"]


# --- end to end: real legs, real records, both backends -----------------------------------------


@pytest.mark.graphviz
def test_a_diamond_passes_outputs_along(
    tmp_path: Path, db_url: str, li_env: dict[str, str]
) -> None:
    path = write(tmp_path, DIAMOND)
    result = run_li("flow", "run", str(path), "--var", "x=1", "--json", env=li_env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["status"], report["exit_code"]) == ("completed", 0)
    legs = {leg["id"]: leg for leg in report["legs"]}
    assert set(legs) == {"a", "b", "c", "d"}
    assert {leg["status"] for leg in legs.values()} == {"completed"}
    with opened_store(db_url) as store:
        row = store.get_entity("session", legs["d"]["session_id"])
    assert row["invocation_id"] == report["invocation_id"]
    assert row["reply_text"].strip() == "b-alpha+c-1"
    invocation = report["invocation_id"]
    waited = run_li("wait", invocation, env=li_env, cwd=tmp_path)
    assert waited.returncode == 0, waited.stderr
    assert "status=completed" in waited.stdout, waited.stderr
    status = run_li("status", invocation, env=li_env, cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert "LEG" in status.stdout
    assert "SESSION" in status.stdout
    assert "d  completed  <- b, c" in status.stdout
    need_graphviz()  # last: everything above holds without Graphviz too
    picture = Path(report["run_dir"]) / "artifacts" / "flow_dag.png"
    assert picture.read_bytes().startswith(b"\x89PNG"), "flow_dag.png drawn with Graphviz"


def test_a_failed_leg_stops_its_dependents_and_fails_the_flow(
    tmp_path: Path, db_url: str, li_env: dict[str, str]
) -> None:
    path = write(
        tmp_path,
        """
        legs:
          - {id: broken, run: [sh, -c, "exit 3"]}
          - {id: after, depends_on: [broken], run: [echo, never]}
          - {id: aside, run: [echo, fine]}
        """,
    )
    result = run_li("flow", "run", str(path), env=li_env, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    [line] = result.stdout.splitlines()
    invocation, status, reason, run_dir, code = line.split("\t")
    assert run_dir.startswith("run_dir=")
    assert run_dir.endswith(invocation)
    assert (status, reason, code) == ("status=failed", "reason=run.failed.leg", "exit_code=1")
    assert "after" in result.stderr
    assert "broken" in result.stderr
    waited = run_li("wait", invocation, env=li_env, cwd=tmp_path)
    assert waited.returncode == 1
    assert "status=failed" in waited.stdout


def test_detach_returns_the_invocation_id(
    tmp_path: Path, db_url: str, li_env: dict[str, str]
) -> None:
    path = write(tmp_path, "legs: [{id: only, run: [echo, hi]}]\n")
    result = run_li("flow", "run", str(path), "--detach", env=li_env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    invocation = result.stdout.strip()
    waited = run_li("wait", invocation, "--timeout", "60", env=li_env, cwd=tmp_path)
    assert waited.returncode == 0
    assert waited.stdout.startswith(f"{invocation}\tstatus=completed")


def test_resume_reruns_only_what_did_not_complete(
    tmp_path: Path, db_url: str, li_env: dict[str, str]
) -> None:
    path = write(
        tmp_path,
        """
        legs:
          - {id: a, run: [echo, alpha]}
          - {id: b, depends_on: [a], run: [sh, -c, "test -f ok || exit 4; echo fine"]}
        """,
    )
    first = run_li("flow", "run", str(path), "--json", env=li_env, cwd=tmp_path)
    assert first.returncode == 1, first.stderr
    before = json.loads(first.stdout)
    (tmp_path / "ok").touch()
    suffix = before["invocation_id"][-6:]
    again = run_li("flow", "resume", suffix, "--json", env=li_env, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    after = json.loads(again.stdout)
    assert after["resumed_from"] == before["invocation_id"]
    legs = {leg["id"]: leg for leg in after["legs"]}
    assert legs["a"]["reused"]
    assert legs["a"]["session_id"] == before["legs"][0]["session_id"]
    assert not legs["b"]["reused"]
    assert legs["b"]["status"] == "completed"


def test_resume_of_an_unknown_invocation_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert li(["flow", "resume", "nope", "--db", str(tmp_path / "state.db")]) == 2
    assert "no invocation with id 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("sig", "status", "code"),
    [
        (signal.SIGINT, "aborted", 130),
        (signal.SIGTERM, "cancelled", 143),
        (signal.SIGHUP, "cancelled", 143),  # the terminal went away
    ],
)
def test_a_signal_stops_every_running_leg(
    tmp_path: Path,
    db_url: str,
    li_env: dict[str, str],
    sig: signal.Signals,
    status: str,
    code: int,
) -> None:
    path = write(
        tmp_path,
        """
        legs:
          - {id: slow, run: [sleep, "30"]}
          - {id: after, depends_on: [slow], run: [echo, never]}
        """,
    )
    proc = start_li("flow", "run", str(path), "--json", env=li_env, cwd=tmp_path)
    wait_for_running_row(db_url)
    returncode, out, err = send(proc, sig)
    assert returncode == code, err
    report = json.loads(out)
    assert (report["status"], report["interrupted"]) == (status, sig.name)
    legs = {leg["id"]: leg for leg in report["legs"]}
    assert legs["slow"]["status"] == status
    assert legs["after"]["session_id"] is None


def test_li_status_of_a_flow_shows_its_summed_tokens_and_cost_and_where_it_resumed_from(
    tmp_path: Path, db_url: str, li_env: dict[str, str], fake_bin: Path
) -> None:
    """The invocation row holds the legs' summed tokens and cost, its run directory and
    resumed_from; `li status ID` must show them, not only `--json`."""
    from support.providerkit import fake_env

    env = fake_env(
        "claude/success.jsonl", base={**li_env, "LIRUN_CLAUDE_BIN": str(fake_bin / "claude")}
    )
    path = write(
        tmp_path,
        """
        legs:
          - {id: one, agent: claude, prompt: do one}
          - {id: two, agent: claude, prompt: do two, depends_on: [one]}
        """,
    )
    ran = run_li("flow", "run", str(path), "--json", env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    first = json.loads(ran.stdout)
    assert (first["input_tokens"], first["output_tokens"]) == (40, 80)
    shown = run_li("status", first["invocation_id"], env=env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "in 40, out 80" in shown.stdout
    assert "$0.0246" in shown.stdout
    assert first["run_dir"] in shown.stdout
    resumed = run_li("flow", "resume", first["invocation_id"], "--json", env=env, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    second = json.loads(resumed.stdout)["invocation_id"]
    shown = run_li("status", second, env=env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert re.search(rf"\nresumed from +{first['invocation_id']}\n", shown.stdout), shown.stdout


def test_an_unknown_filter_is_a_file_line_problem_exit_2(
    tmp_path: Path, lirun_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, 'legs:\n  - {id: a, run: [echo, "{{ item | nosuch }}"]}\n')
    db = tmp_path / "state.db"
    assert li(["flow", "run", str(path), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:2: leg 'a': run: template error on its line 1: no filter named 'nosuch'" in err
    assert "Traceback" not in err
    assert not db.exists()
    assert list(lirun_home.iterdir()) == []


def test_legs_stopped_by_fail_fast_are_not_said_to_have_a_failed_dependency(
    tmp_path: Path, db_url: str, li_env: dict[str, str]
) -> None:
    path = write(
        tmp_path,
        """
        fail_fast: true
        parallel: 1
        legs:
          - {id: bad, run: [sh, -c, "exit 3"]}
          - {id: alone, run: [echo, never]}
        """,
    )
    result = run_li("flow", "run", str(path), env=li_env, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "a dependency failed" not in result.stderr
    assert "li flow: not run (fail_fast): alone" in result.stderr
    invocation = result.stdout.split("\t")[0]
    shown = run_li("status", invocation, env=li_env, cwd=tmp_path)
    assert "not run (fail_fast): alone" in shown.stdout
    assert "a dependency failed" not in shown.stdout


def test_li_status_of_a_flow_into_a_closed_pipe_is_not_a_traceback(
    tmp_path: Path, db_url: str, li_env: dict[str, str]
) -> None:
    """`li status FLOW | head -3`: the reader leaves after the record, before the legs
    table; li status stops writing quietly instead of printing a traceback."""
    import os
    import subprocess

    from support.execkit import li_argv

    path = write(tmp_path, "legs: [{id: only, run: [echo, hi]}]\n")
    ran = run_li("flow", "run", str(path), env=li_env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    invocation = ran.stdout.split("\t")[0]
    read, write_end = os.pipe()
    os.close(read)  # the reader is gone before li writes
    try:
        shown = subprocess.run(
            li_argv("status", invocation),
            env=li_env,
            cwd=tmp_path,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert "Traceback" not in shown.stderr, shown.stderr
    assert "BrokenPipe" not in shown.stderr, shown.stderr
    assert shown.returncode == 0


def test_dry_run_shows_each_fan_out_leg_rendered(tmp_path: Path, lirun_home: Path) -> None:
    path = write(
        tmp_path,
        """
        vars: {tool: ruff}
        legs:
          - id: lint
            for_each: [src, "tests"]
            run: [echo, "{{ vars.tool }} check {{ item }}"]
        """,
    )
    env = {"PATH": "/usr/bin:/bin", "LIRUN_HOME": str(lirun_home)}
    result = run_li("flow", "run", "--dry-run", str(path), env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "lint[0]  command echo 'ruff check src'  [shared]  item='src'" in result.stdout
    assert "lint[1]  command echo 'ruff check tests'" in result.stdout
    plan = json.loads(
        run_li("flow", "run", "--dry-run", "--json", str(path), env=env, cwd=tmp_path).stdout
    )
    assert [node["run"] for node in plan["nodes"]] == [
        ["echo", "ruff check src"],
        ["echo", "ruff check tests"],
    ]


def test_a_duration_option_takes_the_duration_grammar(tmp_path: Path, lirun_home: Path) -> None:
    path = write(tmp_path, "legs:\n  - id: a\n    run: [echo, hi]\n    timeout: 2m\n")
    env = {"PATH": "/usr/bin:/bin", "LIRUN_HOME": str(lirun_home)}
    done = run_li(
        "flow", "run", "--dry-run", "--timeout", "1h30m", str(path), env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr

"""The flow engine with real processes on both backends: outputs along the graph, fan-out
and join, failures and their dependents, fail_fast, retries, signals, the deadline, the
checkpoint and `li wait` on the invocation."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lirun.exec.task import Task
from lirun.flows.engine import FlowOptions, flow_report, run_flow
from lirun.flows.spec import FlowSpec, ForEach, LegSpec
from lirun.signals import SignalTrap
from support.cli import li_command
from support.providerkit import FAKE_PROVIDER, fixture_path
from support.storekit import invocation_sessions, opened

QUICK = FlowOptions(retry_delay=0.0)
WRITE_P = 'echo planned; echo body > "$LIRUN_ARTIFACT_DIR/p.md"'


def sh(script: str, **more: Any) -> Task:
    return Task(run=("sh", "-c", script), **more)


def echo(text: str) -> Task:
    return Task(run=("echo", text))


def flow(tmp_path: Path, *legs: LegSpec, **more: Any) -> FlowSpec:
    return FlowSpec(legs=legs, cwd=str(tmp_path), **more)


def invocation(db_url: str, ident: str) -> dict[str, Any]:
    with opened(db_url) as store:
        row = store.get_entity("invocation", ident)
    assert row is not None
    return row


def by_id(report: Any) -> dict[str, Any]:
    return {leg.id: leg for leg in report.legs}


def test_diamond_passes_outputs_along_and_checkpoints_every_leg(
    db_url: str, tmp_path: Path, li_env: dict[str, str]
) -> None:
    spec = flow(
        tmp_path,
        LegSpec("plan", sh(WRITE_P, artifacts=({"id": "p", "path": "p.md"},))),
        LegSpec("left", echo("L:{{ legs.plan.reply | trim }}"), depends_on=("plan",)),
        LegSpec("right", echo("R:{{ vars.target }}"), depends_on=("plan",)),
        LegSpec(
            "join",
            echo(
                "{{ legs.left.reply|trim }}+{{ legs.right.reply|trim }}+{{ legs.plan.artifacts.p }}"
            ),
            depends_on=("left", "right"),
        ),
        vars={"target": "src"},
        digest="sha256:feed",
    )
    lines: list[str] = []
    report = run_flow(spec, db_url=db_url, options=FlowOptions(on_progress=lines.append))
    assert report.status == "completed", lines
    assert (report.status, report.reason_code, report.exit_code) == (
        "completed",
        "run.completed.ok",
        0,
    )
    legs = by_id(report)
    assert list(legs) == ["plan", "left", "right", "join"]
    assert all(leg.status == "completed" and leg.attempts == 1 for leg in legs.values())
    replies = {
        s["flow_leg"]: s["reply_text"] for s in invocation_sessions(db_url, report.invocation_id)
    }
    artifact = Path(report.run_dir or "").parent / legs["plan"].session_id / "artifacts" / "p.md"
    assert replies["join"] == f"L:planned+R:src+{artifact}\n"
    assert artifact.read_text() == "body\n"

    row = invocation(db_url, report.invocation_id)
    assert (row["kind"], row["status"], row["exit_code"]) == ("flow", "completed", 0)
    assert row["flow_digest"] == "sha256:feed"
    assert row["flow_json"]["spec"]["vars"] == {"target": "src"}
    assert [g["id"] for g in row["flow_json"]["graph"]] == list(legs)

    checkpoint = json.loads((Path(row["run_dir"]) / "checkpoint.json").read_text())
    assert checkpoint["flow_digest"] == "sha256:feed"
    assert checkpoint["vars"] == {"target": "src"}
    for leg in legs.values():
        entry = checkpoint["legs"][leg.id]
        assert (entry["session_id"], entry["status"]) == (leg.session_id, "completed")
    assert checkpoint["legs"]["plan"]["outputs"]["artifacts"]["p"] == str(artifact)
    assert checkpoint["legs"]["left"]["outputs"]["reply"] == "L:planned\n"

    log = (Path(row["artifacts_path"]) / "flow.log").read_text().splitlines()
    assert sum("leg join" in line for line in log) == 2  # started, completed
    assert len(lines) == len(log)

    # li wait answers with the invocation's own terminal row
    waited = subprocess.run(
        li_command("wait", report.invocation_id),
        env=li_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert waited.returncode == 0, waited.stderr
    assert waited.stdout.split("\t")[:2] == [report.invocation_id, "status=completed"]
    assert f"artifact_dir={row['artifacts_path']}" in waited.stdout
    assert flow_report(report.invocation_id, db_url=db_url) == report


def test_fan_out_over_an_artifacts_lines_then_a_join(db_url: str, tmp_path: Path) -> None:
    make = 'printf "a\\n\\nb\\nc\\n" > "$LIRUN_ARTIFACT_DIR/list"; : > "$LIRUN_ARTIFACT_DIR/none"'
    spec = flow(
        tmp_path,
        LegSpec(
            "list",
            sh(
                make,
                artifacts=(
                    {"id": "l", "path": "list"},
                    {"id": "n", "path": "none", "required": False},
                ),
            ),
        ),
        LegSpec(
            "each",
            echo("got {{ item }}"),
            depends_on=("list",),
            for_each=ForEach(artifact="list.l"),
        ),
        LegSpec(
            "nothing",
            echo("never {{ item }}"),
            depends_on=("list",),
            for_each=ForEach(artifact="list.n"),
            may_be_empty=True,
        ),
        LegSpec(
            "join",
            echo(
                "{{ legs.each|map(attribute='reply')|map('trim')|join(',') }};"
                "{{ legs.nothing|length }}"
            ),
            depends_on=("each", "nothing"),
        ),
        parallel=3,
    )
    report = run_flow(spec, db_url=db_url)
    legs = by_id(report)
    assert report.status == "completed", report.reason_summary
    assert [(leg.id, leg.item) for leg in report.legs if leg.leg == "each"] == [
        ("each[0]", "a"),
        ("each[1]", "b"),
        ("each[2]", "c"),
    ]
    assert (legs["nothing"].status, legs["nothing"].reason_code) == (
        "completed_empty",
        "run.completed_empty.no_items",
    )
    assert legs["nothing"].session_id is None
    replies = {
        s["flow_leg"]: s["reply_text"] for s in invocation_sessions(db_url, report.invocation_id)
    }
    assert replies["join"] == "got a,got b,got c;0\n"


def test_a_failed_leg_stops_only_its_dependents(db_url: str, tmp_path: Path) -> None:
    spec = flow(
        tmp_path,
        LegSpec("bad", sh("exit 3")),
        LegSpec("after_bad", echo("x"), depends_on=("bad",)),
        LegSpec("later", echo("y"), depends_on=("after_bad",)),
        LegSpec("good", sh("sleep 0.3; echo fine")),
        LegSpec("after_good", echo("z"), depends_on=("good",)),
        parallel=2,
    )
    report = run_flow(spec, db_url=db_url)
    legs = by_id(report)
    assert (report.status, report.reason_code, report.exit_code) == ("failed", "run.failed.leg", 1)
    assert report.reason_summary
    assert report.reason_summary.startswith("leg bad ended failed")
    assert report.stopped == ("after_bad", "later")
    assert legs["after_bad"].status == "not_run"
    assert legs["after_bad"].session_id is None
    assert legs["good"].status == legs["after_good"].status == "completed"
    evidence = invocation(db_url, report.invocation_id)["status_evidence_refs"]
    stopped = next(e for e in evidence if e["kind"] == "stopped_legs")
    assert stopped["legs"][0] == {
        "leg": "after_bad",
        "reason": "run.cancelled.dependency",
        "because": "bad",
    }


def test_fail_fast_stops_the_running_legs_and_starts_no_more(db_url: str, tmp_path: Path) -> None:
    spec = flow(
        tmp_path,
        LegSpec("bad", sh("sleep 0.2; exit 3")),
        LegSpec("slow", sh("sleep 30")),
        LegSpec("queued", echo("never")),
        parallel=2,
        fail_fast=True,
    )
    started = time.monotonic()
    report = run_flow(spec, db_url=db_url)
    assert time.monotonic() - started < 20
    legs = by_id(report)
    assert (report.status, report.reason_code) == ("failed", "run.failed.leg")
    assert report.reason_summary
    assert report.reason_summary.startswith("leg bad")
    assert legs["slow"].status == "cancelled"
    assert (legs["queued"].status, legs["queued"].reason_code) == (
        "not_run",
        "run.cancelled.fail_fast",
    )
    assert report.stopped == ("queued",)


def _flaky_codex(tmp_path: Path) -> Path:
    """A codex that fails retryably (an outage) on its first run and succeeds after
    (``--version`` probes do not count)."""
    marker = tmp_path / "called-once"
    script = tmp_path / "codex"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --version ]; then F=x; E=0;\n'
        f'elif [ -e "{marker}" ]; then F="{fixture_path("codex/success.jsonl")}"; E=0;\n'
        f'else : > "{marker}"; F="{fixture_path("codex/outage.jsonl")}"; E=1; fi\n'
        f'LIRUN_FAKE_FIXTURE="$F" LIRUN_FAKE_EXIT="$E" exec "{sys.executable}" '
        f'"{FAKE_PROVIDER}" "$@"\n'
    )
    script.chmod(0o755)
    return script


def test_a_retryable_provider_failure_is_retried_as_a_new_linked_session(
    db_url: str, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("LIRUN_CODEX_BIN", str(_flaky_codex(tmp_path)))
    spec = flow(tmp_path, LegSpec("ask", Task(agent="codex", prompt="fix it"), retries=2))
    report = run_flow(spec, db_url=db_url, options=QUICK)
    assert report.status == "completed", report.reason_summary
    (leg,) = report.legs
    assert leg.attempts == 2
    first, second = invocation_sessions(db_url, report.invocation_id)
    assert (first["status_reason_code"], first["attempt"], first["retry_of"]) == (
        "run.failed.provider_server_error",
        1,
        None,
    )
    assert (second["status"], second["attempt"], second["retry_of"]) == (
        "completed",
        2,
        first["id"],
    )
    assert leg.session_id == second["id"]
    assert report.input_tokens == 24763
    assert report.output_tokens == 122


def test_a_signal_stops_every_running_leg(db_url: str, tmp_path: Path) -> None:
    spec = flow(
        tmp_path,
        LegSpec("slow", sh("sleep 30")),
        LegSpec("slower", sh("sleep 30")),
        LegSpec("then", echo("never"), depends_on=("slow",)),
    )
    with SignalTrap() as stop:

        def progress(line: str) -> None:
            if "slower started" in line:
                stop.deliver(2)  # SIGINT, as the CLI's trap records it

        report = run_flow(spec, db_url=db_url, options=FlowOptions(on_progress=progress), stop=stop)
    assert (report.status, report.reason_code, report.exit_code) == (
        "aborted",
        "run.cancelled.sigint",
        130,
    )
    assert report.interrupted == "SIGINT"
    legs = by_id(report)
    assert legs["slow"].status == legs["slower"].status == "aborted"
    assert legs["then"].reason_code == "run.cancelled.flow_stopped"


def test_the_flows_deadline_ends_it_timed_out(db_url: str, tmp_path: Path) -> None:
    spec = flow(tmp_path, LegSpec("slow", sh("sleep 30")))
    report = run_flow(spec, db_url=db_url, options=FlowOptions(timeout=0.5))
    assert (report.status, report.reason_code, report.exit_code) == (
        "timed_out",
        "run.timed_out.deadline",
        124,
    )
    assert report.legs[0].status == "cancelled"


def test_a_fan_out_that_cannot_read_its_items_fails_the_flow_and_stops_the_join(
    db_url: str, tmp_path: Path
) -> None:
    spec = flow(
        tmp_path,
        LegSpec("list", sh("echo none", artifacts=({"id": "l", "path": "l", "required": False},))),
        LegSpec(
            "each", echo("{{ item }}"), depends_on=("list",), for_each=ForEach(artifact="list.l")
        ),
        LegSpec("join", echo("{{ legs.each|length }}"), depends_on=("each",)),
    )
    report = run_flow(spec, db_url=db_url)
    legs = by_id(report)
    assert (report.status, report.reason_code) == ("failed", "run.failed.leg")
    assert (legs["each"].status, legs["each"].reason_code) == ("failed", "run.failed.fan_out")
    assert report.stopped == ("join",)


def test_a_template_that_cannot_render_fails_its_leg_before_it_starts(
    db_url: str, tmp_path: Path
) -> None:
    spec = flow(
        tmp_path,
        LegSpec("a", echo("a")),
        LegSpec("b", echo("{{ legs.a.artifacts.nothing }}"), depends_on=("a",)),
    )
    report = run_flow(spec, db_url=db_url)
    legs = by_id(report)
    assert (legs["b"].status, legs["b"].reason_code, legs["b"].session_id) == (
        "failed",
        "run.failed.setup",
        None,
    )
    assert report.reason_summary
    assert report.reason_summary.startswith("leg b ended failed")


def test_why_a_leg_without_a_session_failed_is_in_the_record(
    db_url: str, tmp_path: Path, li_env: dict[str, str]
) -> None:
    """A fan-out that cannot expand and a template that cannot render fail their leg
    before any session exists; the reason's text must be in the database (the report,
    the invocation's summary and evidence), not only in checkpoint.json and stderr."""
    many = 'seq 1001 > "$LIRUN_ARTIFACT_DIR/l"'
    spec = flow(
        tmp_path,
        LegSpec("list", sh(many, artifacts=({"id": "l", "path": "l"},))),
        LegSpec(
            "each", echo("{{ item }}"), depends_on=("list",), for_each=ForEach(artifact="list.l")
        ),
        LegSpec("a", echo("a")),
        LegSpec("b", echo("{{ legs.a.artifacts.nothing }}"), depends_on=("a",)),
    )
    lines: list[str] = []
    report = run_flow(spec, db_url=db_url, options=FlowOptions(on_progress=lines.append))
    legs = by_id(report)
    assert report.status == "failed"
    assert "1001 items, at most 1000" in (legs["each"].error or "")
    assert "nothing" in (legs["b"].error or "")
    assert legs["list"].error is None
    assert legs["a"].error is None
    assert report.reason_summary
    assert "1001 items, at most 1000" in report.reason_summary
    assert any("leg each failed" in line and "1001 items" in line for line in lines)
    row = invocation(db_url, report.invocation_id)
    failed = next(e for e in row["status_evidence_refs"] if e["kind"] == "failed_legs")
    errors = {leg["leg"]: leg.get("error") for leg in failed["legs"]}
    assert "1001 items" in errors["each"]
    assert "nothing" in errors["b"]
    shown = subprocess.run(
        li_command("status", report.invocation_id, "--json"),
        env=li_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    flow_legs = {leg["id"]: leg for leg in json.loads(shown.stdout)["flow"]["legs"]}
    assert "1001 items" in flow_legs["each"]["error"]


def test_a_template_that_fails_while_rendering_fails_only_its_leg(
    db_url: str, tmp_path: Path
) -> None:
    """Any error a template raises while rendering (an unknown test, runaway recursion)
    is that leg's setup failure: the flow goes on with the independent legs, it does
    not end run.failed.exception with everything else not run."""
    recursive = "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"
    spec = flow(
        tmp_path,
        LegSpec("deep", echo(recursive)),
        LegSpec("test", echo("{% if vars.x is nosuchtest %}y{% endif %}")),
        LegSpec("fine", sh("sleep 0.3; echo fine")),
        vars={"x": "1"},
        parallel=1,
    )
    report = run_flow(spec, db_url=db_url)
    legs = by_id(report)
    assert (report.status, report.reason_code) == ("failed", "run.failed.leg")
    for leg_id, fragment in (("deep", "RecursionError"), ("test", "nosuchtest")):
        leg = legs[leg_id]
        assert (leg.status, leg.reason_code, leg.session_id) == ("failed", "run.failed.setup", None)
        assert fragment in (leg.error or ""), leg.error
    assert legs["fine"].status == "completed"


def _overloaded_once_claude(tmp_path: Path) -> Path:
    """A claude that is overloaded (529, retryable, but billed $0.50) on its first run
    and succeeds after ($0.0123)."""
    overloaded = tmp_path / "overloaded.jsonl"
    overloaded.write_text(
        '{"type":"system","subtype":"init","session_id":"s","model":"m"}\n'
        '{"type":"result","subtype":"success","is_error":true,"api_error_status":529,'
        '"result":"API Error: 529 overloaded","session_id":"s","total_cost_usd":0.5,'
        '"usage":{"input_tokens":100,"output_tokens":0}}\n'
    )
    marker = tmp_path / "claude-called-once"
    script = tmp_path / "claude"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --version ]; then F=x;\n'
        f'elif [ -e "{marker}" ]; then F="{fixture_path("claude/success.jsonl")}";\n'
        f'else : > "{marker}"; F="{overloaded}"; fi\n'
        f'LIRUN_FAKE_FIXTURE="$F" LIRUN_FAKE_EXIT=0 exec "{sys.executable}" '
        f'"{FAKE_PROVIDER}" "$@"\n'
    )
    script.chmod(0o755)
    return script


def test_a_retried_legs_cost_counts_every_attempt(
    db_url: str, tmp_path: Path, monkeypatch: Any, li_env: dict[str, str]
) -> None:
    """Each attempt was paid for: the leg's cost in the report (the legs table of li flow
    and li status) is the sum of its attempts, as the invocation's total is."""
    monkeypatch.setenv("LIRUN_CLAUDE_BIN", str(_overloaded_once_claude(tmp_path)))
    spec = flow(tmp_path, LegSpec("ask", Task(agent="claude", prompt="go"), retries=1))
    report = run_flow(spec, db_url=db_url, options=QUICK)
    assert report.status == "completed", report.reason_summary
    (leg,) = report.legs
    assert leg.attempts == 2
    first, _ = invocation_sessions(db_url, report.invocation_id)
    assert first["status_reason_code"] == "run.failed.provider_overloaded"
    assert report.cost_usd == leg.cost_usd == 0.5123


def test_legs_get_their_own_run_ids_whatever_lirun_run_id_says(
    db_url: str, tmp_path: Path, monkeypatch: Any
) -> None:
    """$LIRUN_RUN_ID / $LIONAGI_RUN_ID name one run; set where `li flow run` runs (an
    orchestrator's environment), every leg took it as its own id, and all but the first
    failed to set up with a duplicate key."""
    monkeypatch.setenv("LIRUN_RUN_ID", "outer-run-1")
    monkeypatch.setenv("LIONAGI_RUN_ID", "outer-run-2")
    spec = flow(
        tmp_path,
        LegSpec("each", echo("{{ item }}"), for_each=ForEach(items=("a", "b", "c"))),
        parallel=3,
    )
    report = run_flow(spec, db_url=db_url)
    assert report.status == "completed", report.reason_summary
    ids = {leg.session_id for leg in report.legs}
    assert len(ids) == 3
    assert not ids & {"outer-run-1", "outer-run-2"}


def test_a_silent_command_leg_is_completed_by_its_exit_code(db_url: str, tmp_path: Path) -> None:
    """A command leg's exit code is its verdict (issue 18): `run: [true]` prints nothing
    and changes nothing, and it completes, and so does the flow; a command leg that ran
    beside another in the shared tree still proves its work by its own exit code."""
    spec = flow(
        tmp_path,
        LegSpec("quiet", Task(run=("true",))),
        LegSpec("beside", Task(run=("true",))),
        LegSpec("after", echo("{{ legs.quiet.output }}done"), depends_on=("quiet",)),
        parallel=2,
    )
    report = run_flow(spec, db_url=db_url)
    assert (report.status, report.reason_code, report.exit_code) == (
        "completed",
        "run.completed.ok",
        0,
    )
    rows = {s["flow_leg"]: s for s in invocation_sessions(db_url, report.invocation_id)}
    assert rows["quiet"]["status"] == "completed"
    assert rows["quiet"]["status_reason_summary"] == "completed: command exited 0"
    assert rows["after"]["reply_text"] == "done\n"  # a command leg's output, by that name


def test_a_leg_that_requires_a_change_and_makes_none_is_completed_empty(
    db_url: str, tmp_path: Path
) -> None:
    work = tmp_path / "work"  # not the test's tmp_path, which holds the SQLite database
    work.mkdir()
    spec = flow(
        work,
        LegSpec("noop", Task(run=("sh", "-c", "echo nothing to do"), require_change=True)),
        LegSpec("work", Task(run=("sh", "-c", "echo x > made.txt"), require_change=True)),
        parallel=1,  # one at a time: each leg's change is its own
    )
    report = run_flow(spec, db_url=db_url)
    legs = by_id(report)
    assert legs["noop"].status == "completed_empty"  # its output is not work
    assert legs["work"].status == "completed"
    assert (report.status, report.reason_code, report.exit_code) == (
        "completed_empty",
        "run.completed_empty.leg",
        1,
    )
    rows = {s["flow_leg"]: s for s in invocation_sessions(db_url, report.invocation_id)}
    assert rows["noop"]["status_reason_code"] == "run.completed_empty.no_evidence"


def test_legs_that_require_a_change_side_by_side_cannot_prove_it_in_a_shared_tree(
    db_url: str, tmp_path: Path
) -> None:
    """A command leg with require_change beside others in a shared tree is an agent leg's
    case: a change there cannot be told from its neighbours', so it proves nothing."""
    work = tmp_path / "work"
    work.mkdir()
    spec = flow(
        work,
        LegSpec("noop", Task(run=("sh", "-c", "sleep 0.5"), require_change=True)),
        LegSpec("work", Task(run=("sh", "-c", "echo x > made.txt"), require_change=True)),
        parallel=2,
    )
    report = run_flow(spec, db_url=db_url)
    assert (report.status, report.reason_code) == ("completed_empty", "run.completed_empty.leg")
    row = invocation(db_url, report.invocation_id)
    (shared,) = [e for e in row["status_evidence_refs"] if e["kind"] == "shared_evidence"]
    assert "work" in shared["legs"]  # its own row saw its change; the flow cannot credit it
    assert by_id(report)["work"].status == "completed"

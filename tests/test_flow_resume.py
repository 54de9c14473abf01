"""A flow's owner killed with SIGKILL: `li wait` reaps the invocation and its running
legs, and resume runs only what had not completed (both backends)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lirun.errors import ConflictError
from lirun.exec.task import Task
from lirun.flows.engine import flow_report, resume_flow, run_flow
from lirun.flows.spec import FlowSpec, ForEach, LegSpec
from support.cli import li_command
from support.execkit import poll
from support.storekit import invocation_sessions, opened

DRIVER = """
import json, sys
from lirun.flows.engine import run_flow
from lirun.flows.spec import FlowSpec
spec = FlowSpec.from_dict(json.load(open(sys.argv[1])))
run_flow(spec, db_url=sys.argv[2], invocation_id=sys.argv[3])
"""


def _spec(tmp_path: Path) -> FlowSpec:
    """``first`` ends at once; ``stuck`` blocks the first time it runs (until killed) and
    ends at once after; ``last`` depends on both."""
    gate = tmp_path / "ran-once"
    stuck = (
        f'if [ -e "{gate}" ]; then echo second; '
        f'else : > "{gate}"; : > "{tmp_path}/stuck-started"; exec sleep 60; fi'
    )
    return FlowSpec(
        legs=(
            LegSpec("first", Task(run=("echo", "one"))),
            LegSpec("stuck", Task(run=("sh", "-c", stuck)), depends_on=("first",)),
            LegSpec(
                "last",
                Task(run=("echo", "{{ legs.first.reply|trim }} then")),
                depends_on=("stuck",),
            ),
        ),
        cwd=str(tmp_path),
        digest="sha256:abc",
    )


def _kill_mid_flow(db_url: str, tmp_path: Path, li_env: dict[str, str]) -> str:
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(_spec(tmp_path).to_dict()))
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(spec_file), db_url, "flow-killed"],
        env=li_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        poll(lambda: (tmp_path / "stuck-started").exists() or driver.poll() is not None, timeout=30)
        assert driver.poll() is None, driver.stderr.read() if driver.stderr else ""
    finally:
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        if driver.stderr:
            driver.stderr.close()
    return "flow-killed"


def test_sigkill_mid_flow_is_reaped_by_wait_and_resume_runs_only_the_rest(
    db_url: str, tmp_path: Path, li_env: dict[str, str]
) -> None:
    killed = _kill_mid_flow(db_url, tmp_path, li_env)
    before = {s["flow_leg"]: s for s in invocation_sessions(db_url, killed)}
    assert before["first"]["status"] == "completed"
    assert before["stuck"]["status"] == "running"

    waited = subprocess.run(
        li_command("wait", killed), env=li_env, capture_output=True, text=True, timeout=60
    )
    assert waited.returncode == 1, waited.stderr
    assert "status=failed\treason=session.orphaned.no_process" in waited.stdout
    report = flow_report(killed, db_url=db_url)
    assert (report.status, report.reason_code) == ("failed", "session.orphaned.no_process")
    stuck = next(leg for leg in report.legs if leg.id == "stuck")
    assert (stuck.status, stuck.reason_code) == ("failed", "session.orphaned.no_process")

    resumed = resume_flow(killed[:8], db_url=db_url)
    assert (resumed.status, resumed.resumed_from) == ("completed", killed)
    legs = {leg.id: leg for leg in resumed.legs}
    assert legs["first"].reused
    assert legs["first"].session_id == before["first"]["id"]
    assert not legs["stuck"].reused
    assert not legs["last"].reused
    ran = {s["flow_leg"]: s for s in invocation_sessions(db_url, resumed.invocation_id)}
    assert set(ran) == {"stuck", "last"}  # first was not run again
    assert ran["last"]["reply_text"] == "one then\n"  # the reused output reached it
    checkpoint = json.loads((Path(resumed.run_dir or "") / "checkpoint.json").read_text())
    assert checkpoint["resumed_from"] == killed
    assert checkpoint["legs"]["first"]["reused"]


def test_li_reap_finalizes_a_dead_flow_and_a_live_one_cannot_be_resumed(
    db_url: str, tmp_path: Path, li_env: dict[str, str]
) -> None:
    killed = _kill_mid_flow(db_url, tmp_path, li_env)
    reaped = subprocess.run(
        li_command("reap", "--json"), env=li_env, capture_output=True, text=True, timeout=60
    )
    assert reaped.returncode == 0, reaped.stderr
    ids = [json.loads(line)["id"] for line in reaped.stdout.splitlines()]
    stuck = next(s for s in invocation_sessions(db_url, killed) if s["flow_leg"] == "stuck")
    assert ids == [stuck["id"], killed]  # the leg, then its flow
    assert flow_report(killed, db_url=db_url).status == "failed"

    # a flow whose owner lives (this process) is refused
    done = run_flow(
        FlowSpec(legs=(LegSpec("a", Task(run=("true",))),), cwd=str(tmp_path)), db_url=db_url
    )
    with opened(db_url) as store:
        store.update_status(
            "invocation",
            done.invocation_id,
            new_status="running",
            reason_code="run.running.resumed",
            override=True,
            override_actor="test",
            override_justification="simulate a live flow",
        )
    with pytest.raises(ConflictError, match="still running"):
        resume_flow(done.invocation_id, db_url=db_url)


def test_resume_reruns_only_the_failed_instances_of_a_fan_out(db_url: str, tmp_path: Path) -> None:
    gate = tmp_path / "b-failed-once"
    once = f'if [ "$0" = b ] && [ ! -e "{gate}" ]; then : > "{gate}"; exit 1; fi; echo "$0"'
    spec = FlowSpec(
        legs=(
            LegSpec(
                "each",
                Task(run=("sh", "-c", once, "{{ item }}")),
                for_each=ForEach(items=("a", "b", "c")),
            ),
            LegSpec(
                "join",
                Task(run=("echo", "{{ legs.each|map(attribute='reply')|map('trim')|join(',') }}")),
                depends_on=("each",),
            ),
        ),
        cwd=str(tmp_path),
    )
    first = run_flow(spec, db_url=db_url)
    assert first.status == "failed"
    assert first.stopped == ("join",)
    second = resume_flow(first.invocation_id, db_url=db_url)
    assert second.status == "completed"
    reused = {leg.id for leg in second.legs if leg.reused}
    assert reused == {"each[0]", "each[2]"}
    ran = {
        s["flow_leg"]: s["reply_text"] for s in invocation_sessions(db_url, second.invocation_id)
    }
    assert ran == {"each[1]": "b\n", "join": "a,b,c\n"}
    # resuming the resumed one reuses everything, even what it had reused itself
    third = resume_flow(second.invocation_id, db_url=db_url)
    assert third.status == "completed"
    assert all(leg.reused for leg in third.legs)
    assert invocation_sessions(db_url, third.invocation_id) == []


def test_li_wait_on_a_running_flow_returns_its_terminal_row(
    db_url: str, tmp_path: Path, li_env: dict[str, str]
) -> None:
    go, started = tmp_path / "go", tmp_path / "started"
    hold = f': > "{started}"; while [ ! -e "{go}" ]; do sleep 0.05; done; echo released'
    spec = FlowSpec(
        legs=(
            LegSpec("hold", Task(run=("sh", "-c", hold))),
            LegSpec(
                "after", Task(run=("echo", "{{ legs.hold.reply|trim }}")), depends_on=("hold",)
            ),
        ),
        cwd=str(tmp_path),
    )
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec.to_dict()))
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(spec_file), db_url, "flow-live"], env=li_env
    )
    try:
        poll(started.exists, timeout=30, what="the first leg to start")
        running = flow_report("flow-live", db_url=db_url)
        assert running.status == "running"
        assert [(leg.id, leg.status) for leg in running.legs] == [
            ("hold", "running"),
            ("after", "pending"),
        ]
        waiter = subprocess.Popen(
            li_command("wait", "flow-live"), env=li_env, stdout=subprocess.PIPE, text=True
        )
        go.touch()
        stdout, _ = waiter.communicate(timeout=60)
        assert driver.wait(timeout=60) == 0
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert waiter.returncode == 0
    row = flow_report("flow-live", db_url=db_url)
    assert stdout.startswith("flow-live\tstatus=completed\treason=run.completed.ok")
    assert row.status == "completed"
    assert [leg.status for leg in row.legs] == ["completed"] * 2


def test_resume_runs_at_the_parallelism_the_flow_ran_at(db_url: str, tmp_path: Path) -> None:
    """`li flow run --parallel 8` then `li flow resume` without it: the stored flow says
    how many legs ran at once, and the resume keeps it (an explicit --parallel wins)."""
    from lirun.flows.engine import FlowOptions

    spec = FlowSpec(
        legs=(
            LegSpec("a", Task(run=("true",))),
            LegSpec("b", Task(run=("sh", "-c", f'test -e "{tmp_path}/ok"'))),
        ),
        cwd=str(tmp_path),
    )
    first = run_flow(spec, db_url=db_url, options=FlowOptions(parallel=7))
    assert first.status == "failed"
    (tmp_path / "ok").touch()
    kept = resume_flow(first.invocation_id, db_url=db_url)
    chosen = resume_flow(kept.invocation_id, db_url=db_url, options=FlowOptions(parallel=2))
    with opened(db_url) as store:
        parallel = [
            (store.get_entity("invocation", r.invocation_id) or {})["flow_json"]["parallel"]
            for r in (first, kept, chosen)
        ]
    assert parallel == [7, 7, 2]

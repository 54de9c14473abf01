"""Every ``li status`` of a running record says whether its owner lives and what reaps it:
the pure judgment as a table, then a flow whose ``li`` was SIGKILLed (real processes,
both backends)."""

from __future__ import annotations

import json
import os
import signal
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from lirun.record.ownership import OwnedRecord, judge
from lirun.store.rows import InvocationRow, SessionRow, ShowRow
from support.execkit import poll, run_li, start_li, wait_for_running_row

NOW = 1_000_000.0
HOST = "here"
BOOT = "boot-1"
ALIVE_PID, GONE_PID = 100, 200


def _start_time(pid: int) -> float | None:
    return 500.0 if pid == ALIVE_PID else None


ROWS: dict[str, type[OwnedRecord]] = {
    "session": SessionRow,
    "invocation": InvocationRow,
    "show": ShowRow,
}


def _row(entity: str = "session", **fields: Any) -> OwnedRecord:
    """A running record of ``entity`` owned by pid 100 here; its other columns empty."""
    owner = {
        "owner_pid": ALIVE_PID,
        "owner_host": HOST,
        "owner_boot_id": BOOT,
        "owner_start_time": 500.0,
        "heartbeat_at": NOW - 5,
        "lease_seconds": 60,
    }
    row = ROWS[entity]
    return row(**{**dict.fromkeys(row._fields), "id": "r1", "status": "running", **owner, **fields})


@pytest.mark.parametrize(
    ("kind", "row", "verdict", "reap", "words"),
    [
        ("session", _row(), "alive", None, "pid 100 on here is running, last heartbeat 5s ago"),
        ("session", _row(owner_pid=GONE_PID), "dead", "li reap", "owner pid 200 on here is gone"),
        (
            "invocation",
            _row("invocation", kind="flow", owner_pid=GONE_PID),
            "dead",
            "li reap",
            "`li flow resume r1` reruns",
        ),
        ("session", _row(heartbeat_at=NOW - 300), "dead", "li reap", "no heartbeat for 300s"),
        ("session", _row(owner_host="there"), "alive", None, "pid 100 on there: its lease holds"),
        ("session", _row(owner_boot_id="boot-0"), "dead", "li reap", "boot id changed"),
        (
            "show",
            _row("show", status="active", owner_pid=None, heartbeat_at=None),
            "none",
            "li show resume r1",
            "no process runs show r1",
        ),
        (
            "show",
            _row("show", status="active", owner_pid=GONE_PID),
            "dead",
            "li show resume r1",
            "abort",
        ),
        ("session", _row(owner_pid=None, heartbeat_at=None), "none", None, "records no owner"),
    ],
)
def test_the_owner_verdict_and_the_command_that_reaps(
    kind: str, row: OwnedRecord, verdict: str, reap: str | None, words: str
) -> None:
    found = judge(kind, row, now=NOW, host=HOST, boot_id=BOOT, process_start_time_of=_start_time)
    assert found is not None
    assert (found.verdict, found.reap) == (verdict, reap)
    assert words in found.summary + "; " + (found.advice or "")


@pytest.mark.parametrize(("kind", "status"), [("session", "completed"), ("show", "aborted")])
def test_a_record_that_is_not_running_has_no_verdict(kind: str, status: str) -> None:
    row = _row(kind, status=status, owner_pid=GONE_PID)
    assert (
        judge(kind, row, now=NOW, host=HOST, boot_id=BOOT, process_start_time_of=_start_time)
        is None
    )


def test_li_status_of_a_flow_whose_li_was_killed_says_its_owner_is_dead_and_what_reaps(
    tmp_path: Path, db_url: str, li_env: dict[str, str]
) -> None:
    path = tmp_path / "slow.yaml"
    path.write_text(
        textwrap.dedent(
            """
            legs:
              - {id: slow, run: [sleep, "30"]}
            """
        ).lstrip("\n"),
        encoding="utf-8",
    )
    proc = start_li("flow", "run", str(path), "--json", env=li_env, cwd=tmp_path)
    session = wait_for_running_row(db_url)
    flow = str(session["invocation_id"])
    alive = run_li("status", flow, env=li_env, cwd=tmp_path)
    assert alive.returncode == 0, alive.stderr
    assert f"owner alive: pid {proc.pid} on" in alive.stdout
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)

    def dead() -> dict[str, Any] | None:
        shown = run_li("status", flow, "--json", env=li_env, cwd=tmp_path)
        found = json.loads(shown.stdout)["liveness"]
        return found if found and found["verdict"] == "dead" else None

    found = poll(dead, timeout=20, what="the dead owner")
    assert found["reap"] == "li reap"
    assert f"li flow resume {flow}" in found["advice"]
    text = run_li("status", flow, env=li_env, cwd=tmp_path).stdout
    assert f"owner dead: owner pid {proc.pid}" in text
    assert "`li reap` marks it failed" in text
    assert "running" in text
    reaped = run_li("reap", env=li_env, cwd=tmp_path)  # the command it named does reap it
    assert reaped.returncode == 0, reaped.stderr
    after = json.loads(run_li("status", flow, "--json", env=li_env, cwd=tmp_path).stdout)
    assert after["status"] == "failed"
    assert after["liveness"] is None


def test_the_run_and_show_pages_say_the_same_verdict(
    store: Any, db_url: str, lirun_home: Path
) -> None:
    """A run whose owner is gone is 'running' in the record; its page says the owner is
    dead and what reaps it, as li status does; an active show nobody runs says so."""
    import subprocess

    from starlette.testclient import TestClient

    from lirun.liveness import boot_id, host_name
    from lirun.ui.app import create_app
    from lirun.ui.filters import ticks

    gone = subprocess.Popen(["true"])
    gone.wait()
    store.sessions.create(
        id="orphan-run",
        owner_pid=gone.pid,
        owner_host=host_name(),
        owner_boot_id=boot_id(),
        owner_start_time=time.time(),
        heartbeat_at=time.time(),
    )
    store.shows.create_with_plays(id="idle-show", fields={"topic": "idle"}, plays=[])
    with TestClient(create_app(db_url, watch=False)) as client:
        page = client.get("/runs/orphan-run").text
        assert f"owner dead:</b> owner pid {gone.pid} on" in page
        assert "<code>li reap</code> finalizes it" in page
        show = client.get("/shows/idle-show").text
        assert "no owner:</b> no process runs show idle-show" in show
        assert "<code>li show resume idle-show</code> takes it over" in show
        assert client.get("/api/runs/orphan-run").json()["liveness"]["verdict"] == "dead"
    assert str(ticks("`<b>x</b>` & <i>")) == "<code>&lt;b&gt;x&lt;/b&gt;</code> &amp; &lt;i&gt;"

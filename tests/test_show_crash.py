"""A show whose process dies goes on with ``resume_show``, never losing nor repeating a
merge: ``kill -9`` of a real process running ``run_show``, and the crash windows around
the integration ref move, recreated from the records they leave."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from lirun.shows.engine import resume_show, run_show
from lirun.shows.spec import ShowSpec
from lirun.signals import SignalTrap
from lirun.store.rows import PlayRow, ShowRow
from support.execkit import poll, process_alive
from support.gitkit import git
from support.showkit import (
    COMMIT,
    INTEGRATION,
    assert_only_gated_moves,
    play,
    script,
    show_repo,
    spec,
    writes,
)
from support.storekit import opened

DRIVER = """
import json, sys
from lirun.shows.engine import ShowOptions, run_show
from lirun.shows.spec import ShowSpec
from lirun.signals import hold_signals
spec = ShowSpec.from_dict(json.loads(sys.argv[1]))
report = run_show(spec, db_url=sys.argv[2], options=ShowOptions(parallel=2), stop=hold_signals())
print(json.dumps(report.to_dict()))
sys.exit(report.exit_code)
"""


def _merges(repo: Path) -> list[str]:
    log = git(repo, "log", "--first-parent", "--format=%s", INTEGRATION).splitlines()
    return [line.split()[2] for line in log if line.startswith("Merge play ")]


def _active_show(db: str) -> ShowRow | None:
    with opened(db) as store:
        shows = store.shows.active_for_topic("t")
        return shows[0] if shows else None


def _play(db: str, play_id: str) -> PlayRow:
    with opened(db) as store:
        row = store.shows.get_play(play_id)
        assert row is not None
        return row


@pytest.mark.slow
def test_kill_9_then_resume_finishes_without_losing_or_repeating_a_merge(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "state.db")
    repo = show_repo(tmp_path)
    go, started = tmp_path / "go", tmp_path / "b-started"
    blocker = (
        f"if [ -f {go} ]; then echo B > b.txt && {COMMIT} b; else touch {started}; sleep 60; fi"
    )
    plays = [
        play("a", writes("a.txt", "A")),
        play("b", script(blocker)),
        play("c", script(f"test -f b.txt && echo C > c.txt && {COMMIT} c"), "b"),
    ]
    s = spec(repo, plays)
    driver = _drive(s, db)
    try:
        poll(lambda: started.exists() and _merges(repo) == ["a"], timeout=30, what="a merged")
    finally:
        driver.kill()
        driver.wait()
    show = _active_show(db)
    assert show is not None
    b_id = f"{show.id}.b"
    orphan = _play(db, b_id).session_id
    assert orphan is not None
    go.touch()
    report = resume_show("t", db_url=db)
    assert report.status == "completed", report.to_dict()
    assert sorted(_merges(repo)) == ["a", "b", "c"]  # each exactly once
    with opened(db) as store:
        reaped = store.get_entity("session", orphan)
        assert reaped is not None
        assert reaped["status_reason_code"] == "session.orphaned.no_process"
        assert_only_gated_moves(tmp_path, store, show.id, git(repo, "rev-parse", "main"))
    b = next(p for p in report.plays if p.name == "b")
    assert b.attempt == 1
    assert len(b.session_ids) == 2


def _drive(s: ShowSpec, db: str) -> subprocess.Popen[str]:
    """``run_show`` in a process of its own, with the CLI's process-wide signal trap."""
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, json.dumps(s.to_dict()), db],
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_sigterm_stops_the_executions_and_leaves_the_show_resumable(tmp_path: Path) -> None:
    db = str(tmp_path / "state.db")
    repo = show_repo(tmp_path)
    go, started, pid = tmp_path / "go", tmp_path / "started", tmp_path / "pid"
    blocker = (
        f"if [ -f {go} ]; then echo W > w.txt && {COMMIT} w; "
        f"else echo $$ > {pid}; touch {started}; sleep 60; fi"
    )
    driver = _drive(spec(repo, [play("w", script(blocker))]), db)
    poll(started.exists, timeout=30, what="the play to start")
    driver.send_signal(signal.SIGTERM)
    out, _ = driver.communicate(timeout=30)
    assert driver.returncode == 143
    report = json.loads(out)
    assert report["interrupted"] == "SIGTERM"
    assert report["status"] == "active"
    assert report["reason_code"] == "show.active.interrupted"
    child = int(pid.read_text())
    assert not process_alive(child)  # the execution was stopped with the show
    go.touch()
    resumed = resume_show(report["show_id"], db_url=db)
    assert resumed.status == "completed"
    assert _merges(repo) == ["w"]
    [w] = resumed.plays
    assert w.attempt == 1
    assert len(w.session_ids) == 2


def _deliver_sigterm(started: Path, stop: SignalTrap) -> None:
    """Once ``started`` exists, a SIGTERM to the show, as the CLI's trap records one."""
    poll(started.exists, what="the gate")
    stop.deliver(signal.SIGTERM)


def _gated_show(tmp_path: Path, db: str) -> tuple[Path, str, str]:
    """A show stopped while its one play's gate runs: (repo, show id, candidate sha)
    where the candidate is the merge the gate was judging."""
    repo = show_repo(tmp_path)
    marker = tmp_path / "gate-started"
    gate = f"test -f {tmp_path}/pass && exit 0; touch {marker}; sleep 30"
    stop = SignalTrap()  # the CLI's trap, never entered: a SIGTERM is delivered to it
    threading.Thread(target=_deliver_sigterm, args=(marker, stop), daemon=True).start()
    report = run_show(
        spec(repo, [play("p", writes("p.txt", "P"))], gate=gate), db_url=db, stop=stop
    )
    [p] = report.plays
    assert p.status == "gated"
    (tmp_path / "pass").touch()
    [judged] = [g["commit"] for g in p.gates]  # the merge commit the gate was on
    return repo, report.show_id, str(judged)


@pytest.mark.parametrize("moved", [False, True], ids=["before-ref-move", "after-ref-move"])
def test_a_crash_around_the_ref_move_neither_repeats_nor_loses_the_merge(
    tmp_path: Path, moved: bool
) -> None:
    db = str(tmp_path / "state.db")
    repo, show_id, candidate = _gated_show(tmp_path, db)
    base = git(repo, "rev-parse", INTEGRATION)
    with opened(db) as store:
        # The gate passed and the candidate was recorded; the process died before (or
        # right after) the compare-and-swap.
        store.update_fields(
            "play", f"{show_id}.p", {"candidate_sha": candidate, "candidate_base": base}
        )
        gates_before = len(store.shows.list_play_sessions(f"{show_id}.p"))
    if moved:
        git(repo, "update-ref", f"refs/heads/{INTEGRATION}", candidate, base)
    report = resume_show(show_id, db_url=db)
    assert report.status == "completed", report.to_dict()
    [p] = report.plays
    assert p.merge_sha == candidate == git(repo, "rev-parse", INTEGRATION)
    assert _merges(repo) == ["p"]
    with opened(db) as store:
        assert len(store.shows.list_play_sessions(f"{show_id}.p")) == gates_before  # no new gate

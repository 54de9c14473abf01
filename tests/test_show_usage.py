"""Shows used the way a person would, on both backends: what the record says matches
what the repository holds when a person steps in while a show runs."""

from __future__ import annotations

import os
import shutil
import signal
import threading
from pathlib import Path

import pytest

from lirun.errors import ConflictError
from lirun.exec.worktrees import worktrees_root
from lirun.shows.engine import abort_show, resume_show, run_show, show_report
from support.execkit import poll, process_alive, run_li
from support.gitkit import git
from support.showkit import COMMIT, INTEGRATION, moves, play, script, show_repo, spec, writes
from support.storekit import opened


def test_an_abort_during_a_gate_lands_nothing_on_the_integration_branch(
    tmp_path: Path, db_url: str
) -> None:
    """The owner notices an abort only at its heartbeat; a gate that passes before then
    must not move the branch of a play its record says did not merge."""
    repo = show_repo(tmp_path)
    gating, release = tmp_path / "gating", tmp_path / "release"
    wait = (
        f"touch {gating}; i=0; "
        f"while [ ! -e {release} ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done"
    )
    s = spec(repo, [play("a", writes("a.txt", "A"), gate=wait)])
    reports: list = []
    runner = threading.Thread(target=lambda: reports.append(run_show(s, db_url=db_url)))
    runner.start()
    poll(gating.exists, what="the gate to start")
    assert show_report("t", db_url=db_url).needs_person == ()  # its owner runs it
    aborted = abort_show("t", db_url=db_url, actor="p", justification="not wanted")
    release.touch()  # the gate passes after the abort, long before the next heartbeat
    runner.join(timeout=30)
    assert not runner.is_alive()
    assert aborted.plays[0].status == "aborted_after_finish"
    assert git(repo, "rev-parse", INTEGRATION) == git(repo, "rev-parse", "main")
    assert len(moves(tmp_path)) == 1  # created at base, never moved
    [report] = reports
    assert report.status == "aborted"
    assert report.exit_code == 1
    [p] = report.plays
    assert (p.status, p.merge_sha) == ("aborted_after_finish", None)
    assert p.worktree is not None
    assert Path(p.worktree).is_dir()
    with opened(db_url) as store:
        show = store.shows.get(report.show_id)
    assert show is not None
    assert show.integration_head == git(repo, "rev-parse", "main")
    gate_worktree = worktrees_root() / report.show_id / ".gate"
    assert not gate_worktree.exists()
    assert str(gate_worktree) not in git(repo, "worktree", "list")


def test_a_second_run_of_a_show_waiting_for_a_person_names_that_show(
    tmp_path: Path, db_url: str
) -> None:
    """Its kept worktree is the person's to look at: the refusal names the show to resume
    or abort rather than telling them to remove the worktree."""
    repo = show_repo(tmp_path)
    s = spec(repo, [play("a", writes("a.txt", "A"), attempts=1, gate="false")])
    first = run_show(s, db_url=db_url)
    assert first.status == "active"
    assert first.plays[0].status == "gate_failed"
    with pytest.raises(ConflictError) as refused:
        run_show(s, db_url=db_url)
    message = str(refused.value)
    assert f"show {first.show_id}" in message
    assert f"li show status {first.show_id}" in message
    assert message.index("li show status") < message.index("git worktree remove")
    assert Path(str(first.plays[0].worktree)).is_dir()


def _by_hand(tmp_path: Path, repo: Path, *commands: tuple[str, ...]) -> str:
    """A person works on the integration branch in a worktree of their own."""
    person = tmp_path / "person"
    git(repo, "worktree", "add", "-q", str(person), INTEGRATION)
    for command in commands:
        git(person, *command)
    git(repo, "worktree", "remove", str(person))
    return git(repo, "rev-parse", INTEGRATION)


def _merged_by_hand(db_url: str, play_id: str, was: str) -> None:
    with opened(db_url) as store:
        assert store.update_status(
            "play",
            play_id,
            new_status="merged",
            reason_code="play.merged.admin",
            source="admin",
            actor="p",
            expected_statuses={was},
            override=True,
            override_actor="p",
            override_justification="merged by hand",
        )


def test_the_gate_on_a_head_a_person_moved_is_not_shown_as_the_final_gate(
    tmp_path: Path, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from lirun.cli.show_board import render_board

    repo = show_repo(tmp_path)
    plays = [
        play("bad", writes("bad.txt", "B"), attempts=1),
        play("two", writes("two.txt", "2"), "bad", attempts=1, gate="false"),
    ]
    s = spec(repo, plays, gate="test ! -e bad.txt", final_gate="true")
    first = run_show(s, db_url=db_url)
    [bad] = [p for p in first.plays if p.name == "bad"]
    assert bad.status == "gate_failed"
    fixed = (("merge", "--no-ff", "-q", "-m", "by hand", str(bad.branch)), ("rm", "-q", "bad.txt"))
    _by_hand(tmp_path, repo, *fixed, ("commit", "-qm", "fix"))
    _merged_by_hand(db_url, bad.id, "gate_failed")
    second = resume_show(first.show_id, db_url=db_url)
    [two] = [p for p in second.plays if p.name == "two"]
    assert two.status == "gate_failed"
    assert second.final_gate is not None
    assert second.final_gate["role"] == "head_gate"
    capsys.readouterr()
    render_board(second.to_dict())
    board = capsys.readouterr().out
    assert "final gate   not run yet" in board
    assert "moved head   passed" in board
    # The person moves the head again, to a commit that fails the show's gate.
    moved = _by_hand(
        tmp_path,
        repo,
        ("checkout", "-q", str(two.branch), "--", "two.txt"),
        ("commit", "-qm", "two by hand"),
        ("revert", "--no-edit", "HEAD~1"),
    )
    _merged_by_hand(db_url, two.id, "gate_failed")
    third = resume_show(first.show_id, db_url=db_url)
    assert third.reason_code == "show.active.integration_unverified"
    [sentence] = third.needs_person
    assert moved in sentence
    assert str(third.recorded_head) not in sentence
    assert third.integration_head == moved  # the board gives the head git has
    render_board(third.to_dict())
    assert "the moved head's gate's output" in capsys.readouterr().out


def _alive(pid: int) -> bool:
    """Running, not a zombie nobody reaped (the killed owner was its parent)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return process_alive(pid)
    return state != "Z"


def _recorded_child(db_url: str, role: str) -> bool:
    """The running execution of ``role`` has its process on record (a reaper finds it)."""
    with opened(db_url) as store:
        shows = store.shows.active_for_topic("t")
        sessions = store.shows.list_play_sessions(f"{shows[0].id}.a") if shows else []
    return any(
        s.meta.get("role") == role and s.status == "running" and s.child_pid for s in sessions
    )


def test_resume_after_kill_9_during_a_gate_stops_that_gate_before_gating_again(
    tmp_path: Path, db_url: str
) -> None:
    """The killed owner's gate is an orphan still running in the gate worktree: resume
    stops it and closes its record before another gate runs there."""
    from test_show_crash import _drive

    repo = show_repo(tmp_path)
    pids, go = tmp_path / "gate-pids", tmp_path / "go"
    gate = f"echo $$ >> {pids}; [ -f {go} ] || sleep 60"
    driver = _drive(spec(repo, [play("a", writes("a.txt", "A"), gate=gate)]), db_url)
    try:
        poll(pids.exists, timeout=30, what="the gate to start")
        poll(lambda: _recorded_child(db_url, "gate"), timeout=30, what="its process on record")
    finally:
        driver.kill()
        driver.wait()
    orphan = int(pids.read_text().split()[0])
    go.touch()
    try:
        report = resume_show("t", db_url=db_url)
        assert report.status == "completed", report.to_dict()
        assert not _alive(orphan)
    finally:
        if _alive(orphan):
            os.killpg(orphan, signal.SIGKILL)  # the gate ran in a group of its own
    [first_gate, *_] = report.plays[0].gates
    with opened(db_url) as store:
        row = store.get_entity("session", str(first_gate["session_id"]))
    assert row is not None
    assert row["status"] != "running"
    assert row["status_reason_code"] == "session.orphaned.no_process"


def test_abort_after_kill_9_stops_the_plays_the_dead_owner_left_running(
    tmp_path: Path, db_url: str
) -> None:
    """Nobody else would stop them: an agent left running keeps working (and spending)
    on a show that ended."""
    from test_show_crash import _drive

    repo = show_repo(tmp_path)
    pids = tmp_path / "agent-pids"
    driver = _drive(spec(repo, [play("a", script(f"echo $$ >> {pids}; sleep 60"))]), db_url)
    try:
        poll(pids.exists, timeout=30, what="the play to start")
        poll(lambda: _recorded_child(db_url, "agent"), timeout=30, what="its process on record")
    finally:
        driver.kill()
        driver.wait()
    orphan = int(pids.read_text().split()[0])
    try:
        aborted = abort_show("t", db_url=db_url, actor="p", justification="wrong task")
        assert not _alive(orphan)
    finally:
        if _alive(orphan):
            os.killpg(orphan, signal.SIGKILL)
    [p] = aborted.plays
    assert p.status == "aborted_after_finish"
    with opened(db_url) as store:
        row = store.get_entity("session", str(p.session_ids[-1]))
    assert row is not None
    assert row["status_reason_code"] == "session.orphaned.no_process"


def test_a_gate_that_fails_silently_says_so(tmp_path: Path) -> None:
    repo = show_repo(tmp_path)
    s = spec(repo, [play("a", writes("a.txt", "A"), attempts=1, gate="exit 1")])
    [p] = run_show(s, db_url=str(tmp_path / "state.db")).plays
    assert p.status == "gate_failed"
    assert str(p.reason_summary).endswith("(run.failed.exit_nonzero); it printed nothing")


def test_a_play_with_nothing_to_merge_is_offered_a_fresh_run(tmp_path: Path) -> None:
    """Merging by hand is no advice when the play brought nothing: the board names the
    override that runs it again, and that override does."""
    db = str(tmp_path / "state.db")
    repo = show_repo(tmp_path)
    flag = tmp_path / "fixed"
    task = script(f"[ -f {flag} ] && echo A > a.txt && git add a.txt && {COMMIT} a || true")
    first = run_show(spec(repo, [play("a", task, attempts=1)]), db_url=db)
    [p] = first.plays
    [sentence] = first.needs_person
    command = sentence.split("run it again from the start with `")[1].split("`")[0]
    assert command.startswith(f"li override play {p.id} --to pending ")
    args = command.split()[1:]
    args[args.index("YOU")], args[args.index("WHY")] = "p", "the input is fixed"
    flag.touch()
    assert run_li(*args, env={**os.environ, "LIRUN_DB_URL": db}, cwd=tmp_path).returncode == 0
    assert resume_show(first.show_id, db_url=db).status == "completed"


def test_the_board_of_a_show_nobody_runs_says_to_resume_it(tmp_path: Path, db_url: str) -> None:
    """After kill -9 the record still says running; the board must not leave the person
    waiting for a process that is gone."""
    from test_show_crash import _drive

    repo = show_repo(tmp_path)
    pids, go = tmp_path / "agent-pids", tmp_path / "go"
    task = script(f"echo $$ >> {pids}; [ -f {go} ] || sleep 60; echo A > a.txt")
    driver = _drive(spec(repo, [play("a", task)]), db_url)
    try:
        poll(pids.exists, timeout=30, what="the play to start")
    finally:
        driver.kill()
        driver.wait()
    board = show_report("t", db_url=db_url)
    assert board.plays[0].status == "running"
    [sentence] = board.needs_person
    assert f"li show resume {board.show_id}" in sentence
    go.touch()
    assert resume_show("t", db_url=db_url).status == "completed"


def test_a_play_merged_by_hand_has_no_worktree_on_record_once_resume_removed_it(
    tmp_path: Path, db_url: str
) -> None:
    repo = show_repo(tmp_path)
    s = spec(repo, [play("a", writes("a.txt", "A"), attempts=1, gate="test ! -e a.txt")])
    [p] = run_show(s, db_url=db_url).plays
    assert p.status == "gate_failed"
    assert Path(str(p.worktree)).is_dir()
    _by_hand(
        tmp_path,
        repo,
        ("merge", "--no-ff", "-q", "-m", "by hand", str(p.branch)),
        ("mv", "a.txt", "b.txt"),
        ("commit", "-qm", "fix"),
    )
    _merged_by_hand(db_url, p.id, "gate_failed")
    [after] = resume_show("t", db_url=db_url).plays
    assert after.status == "merged"
    assert not Path(str(p.worktree)).exists()
    assert after.worktree is None  # the record says what is there


@pytest.mark.parametrize(
    "switch",
    ["git checkout -q -b feature/x", "git checkout -q --detach"],
    ids=["branch", "detached"],
)
def test_work_an_agent_committed_beside_its_attempt_branch_is_merged(
    tmp_path: Path, switch: str
) -> None:
    """Agents create branches of their own (or detach HEAD) to commit: the play's work is
    what its worktree's HEAD holds, not 'nothing to merge'."""
    repo = show_repo(tmp_path)
    task = script(f"{switch} && echo X > x.txt && {COMMIT} x && echo Y > y.txt")
    report = run_show(spec(repo, [play("a", task)]), db_url=str(tmp_path / "state.db"))
    [p] = report.plays
    assert (p.status, p.attempt) == ("merged", 1), p.reason_summary
    assert git(repo, "show", f"{INTEGRATION}:x.txt") == "X"
    assert git(repo, "show", f"{INTEGRATION}:y.txt") == "Y"  # left uncommitted, committed for it


def test_a_completed_show_leaves_nothing_under_the_worktrees_directory(tmp_path: Path) -> None:
    repo = show_repo(tmp_path)
    plays = [play("a", writes("a.txt", "A")), play("b", writes("b.txt", "B"), "a")]
    report = run_show(spec(repo, plays), db_url=str(tmp_path / "state.db"))
    assert report.status == "completed"
    assert not (worktrees_root() / report.show_id).exists()
    assert git(repo, "worktree", "list").count("\n") == 0  # the repository's own only
    assert git(repo, "branch", "--list", f"{INTEGRATION}--*") == ""


def test_abort_of_a_show_whose_repository_is_gone_ends_it_without_an_error(
    tmp_path: Path, db_url: str
) -> None:
    """The database says aborted, so abort must say so too, not fail on git."""
    repo = show_repo(tmp_path)
    first = run_show(
        spec(repo, [play("a", writes("a.txt", "A"), attempts=1, gate="false")]), db_url=db_url
    )
    assert first.status == "active"
    shutil.rmtree(repo)
    aborted = abort_show(first.show_id, db_url=db_url, actor="p", justification="repo deleted")
    assert aborted.status == "aborted"
    assert aborted.exit_code == 1


def test_li_status_of_a_play_and_a_show_says_where_their_work_is(tmp_path: Path) -> None:
    db = str(tmp_path / "state.db")
    repo = show_repo(tmp_path)
    plays = [
        play("a", writes("a.txt", "A")),
        play("b", writes("b.txt", "B"), attempts=1, gate="false"),
    ]
    report = run_show(spec(repo, plays), db_url=db)
    a, b = sorted(report.plays, key=lambda p: p.name)
    env = {**os.environ, "LIRUN_DB_URL": db}
    kept = run_li("status", b.id, env=env, cwd=tmp_path).stdout
    assert str(b.worktree) in kept
    assert str(b.branch) in kept
    merged = run_li("status", a.id, env=env, cwd=tmp_path).stdout
    assert str(a.merge_sha) in merged
    show = run_li("status", report.show_id, env=env, cwd=tmp_path).stdout
    assert INTEGRATION in show
    assert str(report.integration_head) in show


@pytest.mark.parametrize("final_gate", [None, "true"])
def test_the_board_says_a_show_has_no_final_gate_rather_than_not_run_yet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], final_gate: str | None
) -> None:
    from lirun.cli.show_board import render_board

    repo = show_repo(tmp_path)
    s = spec(repo, [play("a", writes("a.txt", "A"))], final_gate=final_gate)
    report = run_show(s, db_url=str(tmp_path / "state.db"))
    assert report.status == "completed"
    assert report.has_final_gate is (final_gate is not None)
    capsys.readouterr()
    render_board(report.to_dict())
    board = capsys.readouterr().out
    assert ("final gate   none" in board) is (final_gate is None)
    assert "not run yet" not in board

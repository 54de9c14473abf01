"""The show engine on real repositories with fake agents (SQLite; the store and lock
behaviour runs on both backends in test_show_records.py).

Every test that moves the integration branch asserts, from a reference-transaction hook,
that each commit it ever pointed at passed a gate.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from lirun.errors import ConflictError
from lirun.exec.task import Task
from lirun.shows.engine import ShowOptions, abort_show, resume_show, run_show
from lirun.signals import SignalTrap
from lirun.store import open_store
from support.execkit import poll, run_li
from support.gitkit import git
from support.showkit import (
    INTEGRATION,
    assert_only_gated_moves,
    play,
    script,
    show_repo,
    spec,
    writes,
)
from support.storekit import opened


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "state.db")


@pytest.fixture
def li_env(db: str) -> dict[str, str]:
    """``li`` in a subprocess on this test's SQLite file (``LIRUN_HOME`` is set already)."""
    return {**os.environ, "LIRUN_DB_URL": db}


def _history(db: str, play_id: str) -> list[str]:
    with opened(db) as store:
        return [t.reason_code for t in store.list_transitions("play", play_id)]


def _check_moves(tmp_path: Path, db: str, show_id: str, repo: Path) -> None:
    with opened(db) as store:
        assert_only_gated_moves(tmp_path, store, show_id, git(repo, "rev-parse", "main"))


def _barrier(directory: Path, name: str, count: int) -> str:
    """Shell: mark ``name`` started, then wait (bounded) until ``count`` plays have."""
    return (
        f"touch {directory}/{name}; i=0; "
        f'while [ "$(ls {directory} | wc -l)" -lt {count} ] && [ $i -lt 200 ]; '
        "do sleep 0.05; i=$((i+1)); done; "
        f'[ "$(ls {directory} | wc -l)" -ge {count} ] || exit 3; '
    )


def test_independent_plays_run_in_parallel_and_all_merge(
    tmp_path: Path, db: str, li_env: dict[str, str]
) -> None:
    repo = show_repo(tmp_path)
    started = tmp_path / "started"
    started.mkdir()
    names = ("x", "y", "z")
    plays = [
        play(n, script(_barrier(started, n, 3) + f"echo {n} > {n}.txt && {COMMIT} {n}"))
        for n in names
    ]
    lines: list[str] = []
    report = run_show(
        spec(repo, plays, final_gate="test -f x.txt && test -f y.txt && test -f z.txt"),
        db_url=db,
        options=ShowOptions(parallel=3, on_progress=lines.append),
    )
    assert report.status == "completed", report.to_dict()
    assert report.exit_code == 0
    assert report.final_gate
    assert report.final_gate["verdict"] == "pass"
    assert all(p.status == "merged" and p.attempt == 1 for p in report.plays)
    log = git(repo, "log", "--first-parent", "--format=%s", INTEGRATION).splitlines()
    assert sorted(s.split()[2] for s in log[:3]) == ["x", "y", "z"]  # one merge per play
    assert report.integration_head == git(repo, "rev-parse", INTEGRATION)
    _check_moves(tmp_path, db, report.show_id, repo)
    # The user's checkout and current branch are untouched; worktrees are gone.
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "main"
    assert git(repo, "status", "--porcelain") == ""
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert not git(repo, "branch", "--list", f"{INTEGRATION}--*")
    assert any("merged into" in line for line in lines)
    # li wait takes a play id: success is merged; artifact_dir is its session's.
    play_id = report.plays[0].id
    proc = run_li("wait", "--json", play_id, env=li_env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    line = json.loads(proc.stdout)
    assert line["status"] == "merged"
    assert line["artifact_dir"].endswith("artifacts")


COMMIT = "git add -A && git -c user.name=t -c user.email=t@example.invalid commit -qm"


def test_a_chain_merges_in_order_each_on_the_one_before(tmp_path: Path, db: str) -> None:
    repo = show_repo(tmp_path)
    plays = [
        play("a", writes("a.txt", "A")),
        play("b", script(f"test -f a.txt && echo B > b.txt && {COMMIT} b"), "a"),
        play("c", script(f"test -f b.txt && echo C > c.txt && {COMMIT} c"), "b"),
    ]
    report = run_show(spec(repo, plays, parallel=3), db_url=db)
    assert report.status == "completed", report.to_dict()
    log = git(repo, "log", "--first-parent", "--format=%s", INTEGRATION).splitlines()
    assert [s.split()[2] for s in log[:3]] == ["c", "b", "a"]
    assert "play.pending.waiting_on_deps" in _history(db, report.plays[2].id)
    _check_moves(tmp_path, db, report.show_id, repo)


def _same_lines(tmp_path: Path, attempts: int) -> tuple[Path, list]:
    repo = show_repo(tmp_path, files={"shared.txt": "one\ntwo\n"})
    started = tmp_path / "started"
    started.mkdir()
    plays = [
        play(
            n,
            script(_barrier(started, n, 2) + f"printf '{n}\\ntwo\\n' > shared.txt && {COMMIT} {n}"),
            attempts=attempts,
        )
        for n in ("left", "right")
    ]
    return repo, plays


def test_two_plays_editing_the_same_lines_conflict_and_the_second_is_redone(
    tmp_path: Path, db: str
) -> None:
    repo, plays = _same_lines(tmp_path, attempts=2)
    report = run_show(spec(repo, plays, parallel=2), db_url=db)
    assert report.status == "completed", report.to_dict()
    first, second = sorted(report.plays, key=lambda p: p.attempt)
    assert (first.attempt, second.attempt) == (1, 2)
    history = _history(db, second.id)
    assert "play.redoing.merge_conflict" in history
    assert history[-1] == "play.merged.ok"
    store = open_store(db)
    row = store.shows.get_play(second.id)
    store.close()
    assert row is not None
    assert "shared.txt" in str(row.feedback)
    assert git(repo, "show", f"{INTEGRATION}:shared.txt").splitlines()[0] == second.name
    _check_moves(tmp_path, db, report.show_id, repo)


def test_a_conflict_with_one_attempt_ends_gate_failed_and_needs_a_person(
    tmp_path: Path, db: str
) -> None:
    repo, plays = _same_lines(tmp_path, attempts=1)
    report = run_show(spec(repo, plays, parallel=2), db_url=db)
    assert report.status == "active"
    assert report.reason_code == "show.blocked.no_ready_plays"
    assert report.exit_code == 1
    failed = [p for p in report.plays if p.status == "gate_failed"]
    assert [p.reason_code for p in failed] == ["play.gate_failed.merge_conflict"]
    assert failed[0].worktree
    assert Path(failed[0].worktree).is_dir()
    assert len(report.needs_person) == 1
    assert failed[0].id in report.needs_person[0]
    assert "li override play" in report.needs_person[0]


def test_a_failing_gate_is_redone_with_its_output_in_the_prompt(
    tmp_path: Path, db: str, fake_bin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from support.gitkit import GIT_ENV

    repo = show_repo(tmp_path)
    argv_log = tmp_path / "argv.jsonl"
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PATH", f"{fake_bin}:{os.environ['PATH']}")
    monkeypatch.setenv(
        "LIRUN_FAKE_FIXTURE", str(Path(__file__).parent / "fixtures/claude/success.jsonl")
    )
    monkeypatch.setenv("LIRUN_FAKE_TOUCH", "widget.py")
    monkeypatch.setenv("LIRUN_FAKE_COMMIT", "agent work")
    monkeypatch.setenv("LIRUN_FAKE_ARGV_LOG", str(argv_log))
    marker = tmp_path / "gate-ran-once"
    gate = f"test -f {marker} && exit 0; touch {marker}; echo 'FAILED test_widget: 3 != 4'; exit 1"
    agent = Task(agent="claude", prompt="Add the widget")
    report = run_show(spec(repo, [play("w", agent)], gate=gate), db_url=db)
    assert report.status == "completed", report.to_dict()
    [w] = report.plays
    assert w.attempt == 2
    assert len(w.session_ids) == 2
    assert [g["verdict"] for g in w.gates] == ["fail", "pass"]
    calls = [json.loads(line) for line in argv_log.read_text().splitlines()]
    assert len(calls) == 2
    assert calls[0]["cwd"] == calls[1]["cwd"]
    assert "FAILED test_widget: 3 != 4" in calls[1]["stdin"]
    assert "--resume" in calls[1]["argv"]  # the conversation goes on
    assert "play.redoing.gate_failed" in _history(db, w.id)
    _check_moves(tmp_path, db, report.show_id, repo)


def test_a_play_that_ends_completed_empty_does_not_merge(tmp_path: Path, db: str) -> None:
    repo = show_repo(tmp_path)
    idle_task = Task(run=("sh", "-c", "true"), require_change=True)  # asks for a change
    report = run_show(spec(repo, [play("idle", idle_task, attempts=1)]), db_url=db)
    [idle] = report.plays
    assert (idle.status, idle.reason_code) == ("gate_failed", "play.gate_failed.session_failed")
    assert "completed_empty" in (idle.reason_summary or "")
    assert git(repo, "rev-parse", INTEGRATION) == git(repo, "rev-parse", "main")
    assert report.exit_code == 1


def test_a_command_play_is_judged_by_its_exit_code_and_its_gate_too(
    tmp_path: Path, db: str
) -> None:
    """A command play that exits 0 is completed (issue 18) and goes on to its gate; with
    nothing committed it has nothing to merge. A gate is a command: `true` passes, its
    record completed by its exit code."""
    repo = show_repo(tmp_path)
    plays = [play("idle", script("true"), attempts=1), play("work", writes("w.txt", "W"))]
    report = run_show(spec(repo, plays, gate="true"), db_url=db)
    by = {p.name: p for p in report.plays}
    assert (by["idle"].status, by["idle"].reason_code) == (
        "gate_failed",
        "play.gate_failed.no_changes",
    )
    assert by["work"].status == "merged"
    [gate] = by["work"].gates
    assert (gate["verdict"], gate["reason"]) == ("pass", "run.completed.ok")
    with opened(db) as store:
        idle_session = store.get_entity("session", by["idle"].session_ids[0]) or {}
        gate_session = store.get_entity("session", gate["session_id"]) or {}
    assert idle_session["status_reason_summary"] == "completed: command exited 0"
    assert (gate_session["status"], gate_session["status_reason_summary"]) == (
        "completed",
        "completed: command exited 0",
    )


def test_dependents_of_an_escalated_play_wait_until_a_person_merges_it(
    tmp_path: Path, db: str, li_env: dict[str, str]
) -> None:
    repo = show_repo(tmp_path)
    plays = [
        play("base", writes("base.txt", "B"), gate="exit 1"),
        play("top", script(f"test -f base.txt && echo T > top.txt && {COMMIT} top"), "base"),
        play("free", writes("free.txt", "F")),
    ]
    report = run_show(spec(repo, plays), db_url=db)
    by = {p.name: p for p in report.plays}
    assert (by["base"].status, by["base"].attempt) == ("escalated", 2)
    assert (by["top"].status, by["top"].reason_code) == ("pending", "play.pending.waiting_on_deps")
    assert by["free"].status == "merged"
    assert report.status == "active"
    assert report.exit_code == 1
    assert "top wait(s) on it" in report.needs_person[0]
    # A person merges the play's work by hand, outside the user's checkout, and says so.
    person = tmp_path / "person"
    git(repo, "worktree", "add", "-q", str(person), INTEGRATION)
    git(person, "merge", "--no-ff", "-q", "-m", "merge base by hand", str(by["base"].branch))
    git(repo, "worktree", "remove", str(person))
    proc = run_li(
        "override",
        "play",
        by["base"].id,
        "--to",
        "merged",
        "--reason",
        "play.merged.admin",
        "--actor",
        "p",
        "--justification",
        "fixed by hand",
        env=li_env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    resumed = resume_show(report.show_id, db_url=db)
    assert resumed.status == "completed", resumed.to_dict()
    assert {p.name: p.status for p in resumed.plays}["top"] == "merged"
    _check_moves(tmp_path, db, report.show_id, repo)  # the person's head was gated too


def test_a_stopped_show_stays_active_and_abort_ends_it(tmp_path: Path, db: str) -> None:
    repo = show_repo(tmp_path)
    gate_started = tmp_path / "gate-started"
    plays = [
        play("slow", writes("s.txt", "S"), gate=f"touch {gate_started}; sleep 30"),
        play("after", writes("a.txt", "A"), "slow"),
    ]
    stop = SignalTrap()  # the CLI's trap, never entered: a SIGTERM is delivered to it
    threading.Thread(target=_deliver_sigterm, args=(gate_started, stop), daemon=True).start()
    report = run_show(spec(repo, plays), db_url=db, stop=stop)
    assert report.interrupted == "SIGTERM"
    assert report.exit_code == 143
    assert report.status == "active"
    assert report.reason_code == "show.active.interrupted"
    assert [p.status for p in report.plays] == ["gated", "pending"]
    with pytest.raises(ConflictError):
        run_show(spec(repo, plays), db_url=db)  # the topic's show is still active
    aborted = abort_show("t", db_url=db, actor="p", justification="not needed")
    assert aborted.status == "aborted"
    assert aborted.exit_code == 1
    assert [(p.status, p.reason_code) for p in aborted.plays] == [
        ("aborted_after_finish", "play.aborted_after_finish.show_aborted"),
        ("blocked", "play.blocked.show_aborted"),
    ]
    assert git(repo, "rev-parse", INTEGRATION) == git(repo, "rev-parse", "main")


def _deliver_sigterm(started: Path, stop: SignalTrap) -> None:
    """Once ``started`` exists, a SIGTERM to the show, as the CLI's trap records one."""
    poll(started.exists, what="the gate")
    stop.deliver(signal.SIGTERM)


def test_setup_problems_refuse_before_anything_is_written(tmp_path: Path, db: str) -> None:
    repo = show_repo(tmp_path)
    one = [play("a", writes("a.txt", "A"))]
    holder = tmp_path / "holder"
    git(repo, "worktree", "add", "-q", "-b", INTEGRATION, str(holder), "main")
    with pytest.raises(ConflictError, match="checked out in"):
        run_show(spec(repo, one), db_url=db)
    git(repo, "worktree", "remove", str(holder))
    git(repo, "branch", "-D", INTEGRATION)
    # An integration branch with commits base does not have.
    git(repo, "branch", INTEGRATION, "main")
    side = tmp_path / "side"
    git(repo, "worktree", "add", "-q", str(side), INTEGRATION)
    (side / "old.txt").write_text("old")
    git(side, "add", "old.txt")
    git(side, "commit", "-qm", "old")
    git(repo, "worktree", "remove", str(side))
    with pytest.raises(ConflictError, match="--continue-integration"):
        run_show(spec(repo, one), db_url=db)
    store = open_store(db)
    assert store.shows.active_for_topic("t") == []
    store.close()
    report = run_show(spec(repo, one), db_url=db, options=ShowOptions(continue_integration=True))
    assert report.status == "completed"
    assert git(repo, "show", f"{INTEGRATION}:old.txt") == "old"


def test_a_head_that_moved_during_the_gate_is_gated_again_before_it_lands(
    tmp_path: Path, db: str
) -> None:
    repo = show_repo(tmp_path)
    once = tmp_path / "moved"
    # The first gate run moves the integration branch under the engine's feet (as a
    # person pushing a commit would); the compare-and-swap then fails and the play is
    # gated again on the new head.
    sneak = (
        f"test -f {once} && exit 0; touch {once}; "
        f"tree=$(git -C {repo} rev-parse refs/heads/{INTEGRATION}^{{tree}}); "
        f"new=$(git -C {repo} -c user.name=p -c user.email=p@x commit-tree $tree "
        f"-p refs/heads/{INTEGRATION} -m sneaked); "
        f"git -C {repo} update-ref refs/heads/{INTEGRATION} $new"
    )
    report = run_show(spec(repo, [play("p", writes("p.txt", "P"))], gate=sneak), db_url=db)
    assert report.status == "completed", report.to_dict()
    [p] = report.plays
    assert [g["verdict"] for g in p.gates] == ["pass", "pass"]
    assert p.attempt == 1
    assert "play.gated.regate" in _history(db, p.id)
    assert git(repo, "log", "-1", "--format=%s", f"{INTEGRATION}^1") == "sneaked"
    assert git(repo, "rev-parse", INTEGRATION) == p.merge_sha == p.gates[1]["commit"]


def test_a_retryable_provider_failure_is_run_again_without_using_an_attempt(
    tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from support.gitkit import GIT_ENV
    from support.providerkit import FAKE_PROVIDER, FIXTURES_DIR

    repo = show_repo(tmp_path)
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    seen = tmp_path / "first-call"
    codex = tmp_path / "codex"
    codex.write_text(
        "#!/bin/sh\n"
        f'[ "$1" = --version ] && exec {sys.executable} {FAKE_PROVIDER} "$@"\n'
        f"if [ -f {seen} ]; then F=codex/success.jsonl; X=0; "
        f"else touch {seen}; F=codex/outage.jsonl; X=1; fi\n"
        f"LIRUN_FAKE_FIXTURE={FIXTURES_DIR}/$F LIRUN_FAKE_EXIT=$X exec {sys.executable} "
        f'{FAKE_PROVIDER} "$@"\n'
    )
    codex.chmod(0o755)
    monkeypatch.setenv("LIRUN_CODEX_BIN", str(codex))
    monkeypatch.setenv("LIRUN_FAKE_TOUCH", "fix.py")
    monkeypatch.setenv("LIRUN_FAKE_COMMIT", "codex work")
    agent = Task(agent="codex", prompt="Fix it")
    report = run_show(spec(repo, [play("c", agent, attempts=1)]), db_url=db)
    assert report.status == "completed", report.to_dict()
    [c] = report.plays
    assert c.attempt == 1
    assert len(c.session_ids) == 2
    assert "play.running.retry_provider" in _history(db, c.id)


def test_a_failing_final_gate_keeps_the_show_active_until_resume_passes_it(
    tmp_path: Path, db: str
) -> None:
    repo = show_repo(tmp_path)
    ok = tmp_path / "final-ok"
    s = spec(repo, [play("a", writes("a.txt", "A"))], final_gate=f"echo checking; test -f {ok}")
    report = run_show(s, db_url=db)
    assert (report.status, report.reason_code) == ("active", "show.active.final_gate_failed")
    assert report.exit_code == 1
    assert report.final_gate
    assert report.final_gate["verdict"] == "fail"
    assert report.plays[0].status == "merged"
    assert "failed its gate" in report.needs_person[0]
    ok.touch()
    resumed = resume_show(report.show_id, db_url=db)
    assert resumed.status == "completed"
    assert resumed.final_gate
    assert resumed.final_gate["verdict"] == "pass"


def test_work_an_agent_left_uncommitted_is_committed_for_it_and_merged(
    tmp_path: Path, db: str
) -> None:
    repo = show_repo(tmp_path)
    report = run_show(spec(repo, [play("loose", script("echo L > loose.txt"))]), db_url=db)
    assert report.status == "completed", report.to_dict()
    assert git(repo, "show", f"{INTEGRATION}:loose.txt") == "L"
    assert git(repo, "log", "-1", "--format=%s", f"{INTEGRATION}^2") == (
        "loose: work left uncommitted"
    )


def test_a_gate_over_its_timeout_fails_the_play(tmp_path: Path, db: str) -> None:
    from lirun.shows.spec import Gate

    repo = show_repo(tmp_path)
    slow = Gate(("sh", "-c", "sleep 20"), timeout=0.3)
    report = run_show(
        spec(repo, [play("t", writes("t.txt", "T"), attempts=1, gate=slow)]), db_url=db
    )
    [t] = report.plays
    assert (t.status, t.reason_code) == ("gate_failed", "play.gate_failed.check")
    assert t.gates[0]["reason"] == "run.timed_out.deadline"
    assert "run.timed_out.deadline" in (t.reason_summary or "")
    assert git(repo, "rev-parse", INTEGRATION) == git(repo, "rev-parse", "main")


def test_a_topic_whose_show_ended_runs_again_as_a_new_show(tmp_path: Path, db: str) -> None:
    from dataclasses import replace

    repo = show_repo(tmp_path)
    nightly = replace(spec(repo, [play("n", writes("n.txt", "N"))]), integration="nightly/{id}")
    first = run_show(nightly, db_url=db)
    second = run_show(nightly, db_url=db)
    assert first.status == second.status == "completed"
    assert first.show_id != second.show_id
    assert second.integration == f"nightly/{second.show_id}"
    assert git(repo, "rev-parse", f"nightly/{first.show_id}") == first.integration_head


@pytest.mark.parametrize(
    ("plays", "message"),
    [
        ([("a", ()), ("a", ())], "same name"),
        ([("a", ("nope",))], "no play of this show"),
        ([("a", ("b",)), ("b", ("a",))], "cycle: a -> b -> a"),
        ([("../x", ())], "invalid play name"),
    ],
)
def test_a_spec_the_loader_would_refuse_is_refused_here_too(
    tmp_path: Path, db: str, plays: list, message: str
) -> None:
    from lirun.errors import LirunError

    repo = show_repo(tmp_path)
    s = spec(repo, [play(n, writes("x", "x"), *deps) for n, deps in plays])
    with pytest.raises(LirunError, match=message) as caught:
        run_show(s, db_url=db)
    assert caught.value.exit_code == 2
    assert not Path(db).exists()


def test_a_person_can_send_an_escalated_play_back_to_the_gate(tmp_path: Path, db: str) -> None:
    repo = show_repo(tmp_path)
    ok = tmp_path / "fixed"
    report = run_show(
        spec(repo, [play("p", writes("p.txt", "P"), gate=f"test -f {ok}")]), db_url=db
    )
    [p] = report.plays
    assert p.status == "escalated"
    assert p.worktree
    assert Path(p.worktree).is_dir()
    ok.touch()  # the person fixed what the gate needs
    with opened(db) as store:
        store.update_status(
            "play",
            p.id,
            new_status="running_complete",
            reason_code="play.running_complete.ok",
            source="admin",
            override=True,
            override_actor="p",
            override_justification="fixed",
        )
    resumed = resume_show(report.show_id, db_url=db)
    assert resumed.status == "completed"
    assert resumed.plays[0].merge_sha
    assert resumed.plays[0].attempt == 2  # no new attempt: its branch went to the gate
    _check_moves(tmp_path, db, report.show_id, repo)


def test_abort_of_a_running_show_stops_its_owner_at_the_next_heartbeat(
    tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lirun.shows.engine as engine

    monkeypatch.setattr(engine, "HEARTBEAT_INTERVAL", 0.1)
    repo = show_repo(tmp_path)
    started = tmp_path / "started"
    s = spec(repo, [play("long", script(f"touch {started}; sleep 30"))])
    reports: list = []
    runner = threading.Thread(target=lambda: reports.append(run_show(s, db_url=db)))
    runner.start()
    poll(started.exists, what="the play to start")
    aborted = abort_show("t", db_url=db, actor="p", justification="wrong task")
    assert aborted.status == "aborted"
    assert aborted.plays[0].status == "aborted_after_finish"
    runner.join(timeout=20)
    assert not runner.is_alive()
    [report] = reports
    assert report.status == "aborted"
    assert report.exit_code == 1
    with opened(db) as store:
        [agent] = store.shows.list_play_sessions(report.plays[0].id)
    assert agent.status == "cancelled"  # the owner stopped its execution


def test_an_abort_that_raced_the_owner_still_leaves_every_play_terminal(
    tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The show is aborted while its owner runs a play and another waits on it, and the
    abort wrote no play (as when the owner moved them between its read and its write):
    the owner, seeing the abort, leaves each play in a terminal status, as docs/shows.md
    says an abort does."""
    import lirun.shows.engine as engine

    monkeypatch.setattr(engine, "HEARTBEAT_INTERVAL", 0.1)
    repo = show_repo(tmp_path)
    started = tmp_path / "started"
    s = spec(
        repo,
        [
            play("long", script(f"touch {started}; sleep 30")),
            play("after", writes("a", "A"), "long"),
        ],
    )
    reports: list = []
    runner = threading.Thread(target=lambda: reports.append(run_show(s, db_url=db)))
    runner.start()
    poll(started.exists, what="the play to start")
    with opened(db) as store:
        [show] = store.shows.recent(limit=1)
        store.update_status("show", show.id, new_status="aborted", reason_code="show.aborted.user")
    runner.join(timeout=20)
    assert not runner.is_alive()
    [report] = reports
    assert report.status == "aborted"
    assert [(p.name, p.status) for p in report.plays] == [
        ("long", "aborted_after_finish"),
        ("after", "blocked"),
    ]

"""Shows used the way a person would, on both backends: what the record says matches
what the repository holds when a person steps in while a show runs."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from lirun.errors import ConflictError
from lirun.shows.engine import abort_show, run_show
from lirun.store import open_store
from support.execkit import poll
from support.gitkit import git
from support.showkit import INTEGRATION, moves, play, show_repo, spec, writes


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
    aborted = abort_show("t", db_url=db_url, actor="p", justification="not wanted")
    release.touch()  # the gate passes after the abort, long before the next heartbeat
    runner.join(timeout=30)
    assert not runner.is_alive()
    assert aborted.plays[0].status == "aborted_after_finish"
    assert git(repo, "rev-parse", INTEGRATION) == git(repo, "rev-parse", "main")
    assert len(moves(tmp_path)) == 1  # created at base, never moved
    [report] = reports
    assert report.status == "aborted" and report.exit_code == 1
    [p] = report.plays
    assert (p.status, p.merge_sha) == ("aborted_after_finish", None)
    assert p.worktree is not None and Path(p.worktree).is_dir()  # kept for a person
    store = open_store(db_url)
    try:
        show = store.get_entity("show", report.show_id)
    finally:
        store.close()
    assert show is not None and show["integration_head"] == git(repo, "rev-parse", "main")


def test_a_second_run_of_a_show_waiting_for_a_person_names_that_show(
    tmp_path: Path, db_url: str
) -> None:
    """Its kept worktree is the person's to look at: the refusal names the show to resume
    or abort rather than telling them to remove the worktree."""
    repo = show_repo(tmp_path)
    s = spec(repo, [play("a", writes("a.txt", "A"), attempts=1, gate="false")])
    first = run_show(s, db_url=db_url)
    assert first.status == "active" and first.plays[0].status == "gate_failed"
    with pytest.raises(ConflictError) as refused:
        run_show(s, db_url=db_url)
    message = str(refused.value)
    assert f"show {first.show_id}" in message and f"li show status {first.show_id}" in message
    assert message.index("li show status") < message.index("git worktree remove")
    assert Path(str(first.plays[0].worktree)).is_dir()

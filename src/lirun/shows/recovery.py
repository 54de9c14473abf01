"""What ``li show resume`` finds and how each play goes on from it.

A show is resumed after a person fixed things (merged a play by hand and overrode it
to ``merged``) or after the process running it died or was stopped. Each unfinished
play is put back where its record says it was: an execution whose owner died is reaped
and run again on the same attempt; a finished execution goes to the gate; a play with a
recorded candidate is checked against the integration branch, so a crash between the
candidate record and the ref move neither repeats nor loses the merge.
"""

from __future__ import annotations

import time

from lirun import platform
from lirun.errors import ConflictError
from lirun.record.reap import reap_sessions
from lirun.shows.conductor import Conductor
from lirun.shows.decide import after_run
from lirun.store import Store
from lirun.store.rows import PlayRow, SessionRow

REAP_WAIT_SECONDS = 5.0  # how long resume and abort wait for a reaped group to exit

__all__ = ["check_head", "reap_gates", "reap_orphans", "recover"]


def check_head(conductor: Conductor) -> None:
    """The integration head must still contain the last commit the show put there; a head
    a person moved forward is gated before anything lands on it."""
    git, show = conductor.git, conductor.show
    head, recorded = git.head(), show.integration_head
    if head is None:
        raise ConflictError(
            f"the integration branch {git.integration} of show {show.id} is gone; "
            f"recreate it at {recorded} (git branch {git.integration} {recorded}) or abort "
            "the show"
        )
    candidates = {r.candidate_sha for r in conductor.rows.values() if r.status == "gated"}
    if recorded is None or head == recorded or head in candidates:
        return  # ours: a crash came after a ref move and before its record (recover)
    if not git.repo.is_ancestor(recorded, head):
        raise ConflictError(
            f"the integration branch {git.integration} was rewritten: its head {head[:12]} "
            f"does not contain {recorded[:12]}, the last commit the show gated; put it back "
            f"(git branch -f {git.integration} {recorded}) or abort the show"
        )
    gate = conductor.spec.gate or conductor.spec.final_gate
    if gate is None:
        conductor.store.update_fields("show", show.id, {"integration_head": head})
        return
    conductor.say(f"{git.integration} moved to {head[:12]}: gating it before going on")
    conductor.team.head_moved(git.integration, head)
    conductor.head_check = True
    conductor.workers.start_final(gate, conductor._show_meta("head_gate"), kind="head")


def _run_of(conductor: Conductor, row: PlayRow) -> SessionRow | None:
    sid = row.session_id
    if not sid:
        return None
    session = conductor.store.sessions.get(str(sid))
    if session is None:
        return None
    if session.meta.get("attempt") != row.attempt:
        return None  # the previous attempt's: this attempt never started
    if session.status == "running":
        reap_sessions(conductor.store, [session.id])
        session = conductor.store.sessions.get(str(sid))
        if session is not None and session.status == "running":
            raise ConflictError(
                f"play {row.name}: its execution {sid} is still running under a live "
                f"owner; wait for it (li wait {sid}) or stop it, then resume"
            )
    return session


def _recover_running(conductor: Conductor, name: str, row: PlayRow) -> None:
    session = _run_of(conductor, row)
    if session is None:
        conductor.to_start.append(name)
        return
    nxt = after_run(session.status, session.status_reason_code, stopping=True, retries_used=0)
    if nxt == "interrupted":
        nxt = "rerun"
    conductor.after_agent(name, nxt, session.id, session.status, session.status_reason_code)


def _recover_gated(conductor: Conductor, name: str, row: PlayRow) -> None:
    candidate, base = row.candidate_sha, row.candidate_base
    head = conductor.git.head()
    if (
        candidate
        and head
        and (head == candidate or conductor.git.repo.is_ancestor(candidate, head))
    ):
        conductor.say(f"play {name}: its candidate {candidate[:12]} is on the branch already")
        conductor.merged(name, candidate)
    elif candidate and base and head == base:
        conductor.land(name, candidate, base, row.gate_json)
    else:
        conductor.gate_queue.append(name)


def reap_orphans(store: Store, show_id: str, *, agents: bool) -> list[str]:
    """Stop and close the show's executions still running under a dead owner (its gate
    runs; with ``agents`` its plays' executions too). The ids still running (a live
    owner's) are returned."""
    sessions = list(store.shows.list_gate_sessions(show_id))
    for play in store.shows.list_plays(show_id):
        sessions += store.shows.list_play_sessions(play.id)
    running = [
        s.id
        for s in sessions
        if s.status == "running" and (agents or s.meta.get("role") != "agent")
    ]
    if running:
        reap_sessions(store, running)
    left = [store.sessions.get(sid) for sid in running]
    _wait_gone([s.child_pid for s in left if s and s.status != "running" and s.child_pid])
    return [s.id for s in left if s is not None and s.status == "running"]


def _wait_gone(pids: list[int], timeout: float = REAP_WAIT_SECONDS) -> None:
    """Reaping sends SIGTERM and returns: give those processes a bounded moment to exit
    before anything runs again where they ran (a zombie nobody waits for counts as gone)."""
    deadline = time.monotonic() + timeout
    while pids and time.monotonic() < deadline:
        pids = [pid for pid in pids if _running(pid)]
        if pids:
            time.sleep(0.02)


def _running(pid: int) -> bool:
    return platform.alive(pid)


def reap_gates(conductor: Conductor) -> None:
    """Gate runs the dead owner left running are stopped and closed before any gate
    runs again: they share the one gate worktree."""
    for sid in reap_orphans(conductor.store, conductor.show.id, agents=False):
        raise ConflictError(
            f"gate execution {sid} of show {conductor.show.id} is still running "
            f"under a live owner; wait for it (li wait {sid}) or stop it, then resume"
        )


def recover(conductor: Conductor) -> None:
    """Queue every unfinished play where its record says it was."""
    for name, row in list(conductor.rows.items()):
        status = row.status
        if status in ("prepared",):
            conductor.to_start.append(name)
        elif status in ("running", "redoing"):
            _recover_running(conductor, name, row)
        elif status == "running_complete":
            conductor.gate_queue.append(name)
        elif status == "gated":
            _recover_gated(conductor, name, row)
        elif status == "merged" and (row.worktree or conductor.git.play_path(name).exists()):
            conductor.git.remove_play(name, [])  # merged by a person: its work is on the branch
            conductor.store.update_fields("play", row.id, {"worktree": None})

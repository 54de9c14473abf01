"""What the show engine does next, as pure functions fed by facts (table-tested).

The engine gathers facts (play rows, how an execution ended, a gate's exit) and asks
these functions; it never decides inline. See docs/show-engine.md for the rules in
prose: what is ready, what a failure leads to given ``attempts``, when an execution is
run again without using an attempt, what abort does, when a show is done or blocked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from lirun.exec.trouble import one_line
from lirun.orchestra.graph import ready
from lirun.provider_errors import failure_class_for_reason
from lirun.reasons import is_retryable_reason

__all__ = [
    "ABORT_UNSTARTED",
    "PERSON_STATUSES",
    "FailureKind",
    "Next",
    "PlayFacts",
    "ShowNext",
    "abort_target",
    "after_failure",
    "after_run",
    "gate_verdict",
    "play_needs_person",
    "plays_needing_person",
    "provider_stop",
    "ready_plays",
    "redo_prompt",
    "show_next",
    "waiting_plays",
]

# A failed gate, a merge conflict, an execution that did not complete, or work that
# changed nothing: all four are "the play did not merge" and follow one rule.
FailureKind = Literal["gate", "merge_conflict", "session_failed", "no_changes"]
# What a finished agent execution leads to.
Next = Literal["gate", "retry", "rerun", "fail", "escalate", "interrupted"]
GateVerdict = Literal["pass", "fail", "interrupted"]

MAX_PROVIDER_RETRIES = 2
# Plays in these statuses have not started any work: abort blocks them.
ABORT_UNSTARTED = frozenset({"pending", "prepared"})
# Statuses in which a play holds an execution or a gate slot.
BUSY = frozenset({"prepared", "running", "running_complete", "gated", "redoing"})
# Reason codes of an execution ended by its owner's death, not by its work.
_ORPHANED = frozenset({"session.orphaned.no_process", "session.stale.no_heartbeat"})


@dataclass(frozen=True, slots=True)
class PlayFacts:
    name: str
    status: str
    depends_on: tuple[str, ...] = ()


def _merged(plays: Iterable[PlayFacts]) -> set[str]:
    return {p.name for p in plays if p.status == "merged"}


def ready_plays(plays: Sequence[PlayFacts]) -> list[str]:
    """Pending plays whose dependencies have all merged, in file order."""
    pending = (p.name for p in plays if p.status == "pending")
    deps = {p.name: p.depends_on for p in plays}
    return list(ready(pending, deps, _merged(plays).__contains__))


def waiting_plays(plays: Sequence[PlayFacts]) -> list[str]:
    """Pending plays that wait on a dependency that has not merged (yet)."""
    going = set(ready_plays(plays))
    return [p.name for p in plays if p.status == "pending" and p.name not in going]


@dataclass(frozen=True, slots=True)
class Failure:
    """Where a play goes after ``kind``: ``redoing`` (one more attempt) or terminal."""

    status: str
    reason_code: str


_GATE_CODES = {"redoing": "play.redoing.gate_failed", "escalated": "play.escalated.gate"}


def after_failure(kind: FailureKind, *, attempt: int, attempts: int) -> Failure:
    """A play that did not merge on ``attempt`` of ``attempts``: redo while an attempt is
    left; then ``gate_failed`` when the play allowed one attempt (no redo was wanted),
    ``escalated`` after a failed redo (a person decides)."""
    if attempt < attempts:
        status = "redoing"
    elif attempts <= 1:
        status = "gate_failed"
    else:
        status = "escalated"
    if kind == "gate":
        code = _GATE_CODES.get(status, "play.gate_failed.check")
    else:
        code = f"play.{status}.{kind}"
    return Failure(status, code)


def after_run(status: str, reason_code: str | None, *, stopping: bool, retries_used: int) -> Next:
    """What a finished agent execution leads to.

    ``completed`` goes to the gate. An execution ended by a signal while the engine was
    stopping is left for resume (``interrupted``); one whose owner died is run again
    (``rerun``); a retryable provider failure is run again a bounded number of times
    (``retry``); neither uses an attempt. A provider failure a retry cannot fix (a
    refused login or key, a rejected request) stops the play for a person at once
    (``escalate``): redoing it would fail the same way. Everything else
    (``completed_empty``, failed, timed out, cancelled by someone else) is a failure of
    the attempt.
    """
    if status == "completed":
        return "gate"
    if stopping and status in ("aborted", "cancelled"):
        return "interrupted"
    if reason_code in _ORPHANED:
        return "rerun"
    failure = failure_class_for_reason(reason_code)
    if failure is not None and not failure.retryable:
        return "escalate"
    if is_retryable_reason(reason_code) and retries_used < MAX_PROVIDER_RETRIES:
        return "retry"
    return "fail"


_SAID_CHARS = 120


def provider_stop(
    run_id: str, reason_code: str | None, message: str | None
) -> tuple[str, str] | None:
    """(summary, feedback) for a play whose execution ``run_id`` failed with a provider
    class a person must fix: the provider's own words and what to do. The summary fits
    the board; the feedback keeps the whole message. None for any other reason."""
    failure = failure_class_for_reason(reason_code)
    if failure is None or failure.retryable:
        return None
    said = " ".join((message or "").split()) or "no message"
    short = one_line(said, _SAID_CHARS)
    summary = f"{short} ({failure.name}); what to do: {failure.advice}"
    feedback = (
        f"its execution {run_id} failed with {reason_code}; the provider said: {said}. "
        f"What to do: {failure.advice}."
    )
    return summary, feedback


def gate_verdict(status: str, *, stopping: bool) -> GateVerdict:
    """A gate is a command: its verdict is its exit code. Exit 0 is ``completed`` (it need
    not change anything: a test run that finds nothing to fix passes); anything else
    fails, except a gate cut short by the engine's own stop, which is no verdict at all."""
    if stopping and status in ("aborted", "cancelled"):
        return "interrupted"
    return "pass" if status == "completed" else "fail"


def abort_target(status: str) -> tuple[str, str] | None:
    """(status, reason) an abort gives a play in ``status``; None leaves it (terminal)."""
    if status in ABORT_UNSTARTED:
        return "blocked", "play.blocked.show_aborted"
    if status in BUSY:
        return "aborted_after_finish", "play.aborted_after_finish.show_aborted"
    return None


# A play in one of these stopped short of merging and only a person ends it.
PERSON_STATUSES = frozenset({"escalated", "gate_failed"})


def play_needs_person(play_status: str | None, show_status: str | None) -> bool:
    """Whether a play needs a person: it escalated or failed its gate in a show still
    ``active``. An aborted show was given up by a person and a completed one merged every
    play, so neither waits on anyone. ``li attention``, the dashboard's needs-you page,
    ``li show list``, ``/shows`` and the show board all ask this one function."""
    return play_status in PERSON_STATUSES and show_status == "active"


def plays_needing_person(play_counts: Mapping[str, int], show_status: str | None) -> int:
    """How many of a show's plays need a person, from its plays counted by status (the
    shows list's ``{"merged": 2, "escalated": 1}``)."""
    return sum(n for status, n in play_counts.items() if play_needs_person(status, show_status))


@dataclass(frozen=True, slots=True)
class ShowNext:
    """``go`` (work is running or ready), ``final_gate`` (run it), ``completed``,
    ``blocked`` (a person must act) or ``final_gate_failed``."""

    kind: Literal["go", "final_gate", "completed", "blocked", "final_gate_failed"]
    reason_code: str | None = None


FinalGate = Literal["none", "pending", "passed", "failed"]


def show_next(plays: Sequence[PlayFacts], *, busy: bool, final_gate: FinalGate) -> ShowNext:
    """Whether the show goes on, completes, or waits for a person.

    A show completes only when every play merged and the final gate (if any) passed on
    the integration head. While a play is running or ready it goes on; otherwise the
    plays that could not merge (and those waiting on them) block it.
    """
    if busy or ready_plays(plays) or any(p.status in BUSY for p in plays):
        return ShowNext("go")
    if all(p.status == "merged" for p in plays):
        if final_gate in ("none", "passed"):
            return ShowNext("completed", "show.completed.ok")
        if final_gate == "failed":
            return ShowNext("final_gate_failed", "show.active.final_gate_failed")
        return ShowNext("final_gate")
    return ShowNext("blocked", "show.blocked.no_ready_plays")


def redo_prompt(original: str | None, feedback: str, branch: str, *, resumed: bool) -> str:
    """The prompt of a redo: the feedback, and the task again unless the agent resumes
    the conversation that already holds it."""
    note = (
        "Your previous attempt at this task could not be merged.\n"
        f"{feedback}\n"
        f"The worktree was reset to the current integration head on a new branch {branch}. "
        "Do the task again there, taking this into account, and commit your work."
    )
    return note if resumed or not original else f"{original}\n\n---\n{note}"

"""The show loop: start ready plays, queue finished ones for the gate, merge what passed.

One conductor runs in the calling thread and is the only writer of the show's play
records; agent executions and gates run in ``jobs.Workers`` threads and report back on
a queue. Plays that do not depend on each other run in parallel up to ``parallel``;
gates and merges go one at a time (the merge queue), each on the merge of the play
branch into the integration head as it is when the gate starts, and the integration
branch moves only by compare-and-swap to a merge commit whose gate passed, recorded as
the play's candidate first. Every choice comes from ``decide``.
"""

from __future__ import annotations

import queue
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from lirun.lifecycle import is_terminal
from lirun.orchestra.lease import OwnerLease
from lirun.reasons import describe
from lirun.record.rundir import new_run_id
from lirun.shows.decide import (
    FailureKind,
    PlayFacts,
    after_failure,
    after_run,
    provider_stop,
    ready_plays,
    redo_prompt,
    show_next,
    waiting_plays,
)
from lirun.shows.gitwork import ShowGit, attempt_branch
from lirun.shows.jobs import AgentJob, Done, GateJob, Workers
from lirun.shows.spec import ShowSpec
from lirun.shows.teamtalk import ShowTeam
from lirun.signals import SignalTrap
from lirun.store import Store
from lirun.store.rows import PlayRow, ShowRow

__all__ = ["Conductor"]

TICK_SECONDS = 0.25
SUMMARY_CHARS = 300


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= SUMMARY_CHARS else line[: SUMMARY_CHARS - 1] + "…"


class Conductor:
    """Runs one show until it completes, needs a person, or is stopped."""

    def __init__(
        self,
        *,
        store: Store,
        show: ShowRow,
        spec: ShowSpec,
        git: ShowGit,
        workers: Workers,
        parallel: int,
        owner: dict[str, Any],
        stop: SignalTrap | None,
        progress: Callable[[str], None],
        beat_every: float,
    ) -> None:
        self.store, self.show, self.spec, self.git = store, show, spec, git
        self.workers = workers
        self.parallel = max(1, parallel)
        self.owner, self.stop, self.say = owner, stop, progress
        self.rows: dict[str, PlayRow] = {}
        self.to_start: deque[str] = deque()
        self.gate_queue: deque[str] = deque()
        self.gate_busy = False
        self.retries: dict[str, int] = {}
        self.rerun_reason: dict[str, str] = {}
        self.final = "none" if spec.final_gate is None else "pending"
        self.head_check = False
        self.outcome = ""
        self.beat_every = beat_every
        self.lease = OwnerLease(None)  # the owner's, taken before the show runs
        self._last_beat = time.monotonic()
        self.team = ShowTeam(store, show, spec, progress)
        self.refresh()

    # -- records --

    def refresh(self) -> None:
        for row in self.store.shows.list_plays(self.show.id):
            self.rows[row.name] = row

    def facts(self) -> list[PlayFacts]:
        return [
            PlayFacts(n, r.status, tuple(r.depends_on_json or ())) for n, r in self.rows.items()
        ]

    def set_play(
        self, name: str, status: str, reason: str, summary: str = "", **fields: Any
    ) -> bool:
        row = self.rows[name]
        if is_terminal("play", row.status) and status != row.status:
            return False  # a person or an abort decided meanwhile: their word stands
        applied = self.store.update_status(
            "play",
            row.id,
            new_status=status,
            reason_code=reason,
            reason_summary=_short(summary),
            expected_statuses={row.status},
            extra_fields=fields or None,
        )
        if applied and status in ("escalated", "gate_failed"):
            self.team.escalated(name, status, summary)
        fresh = self.store.shows.get_play(row.id)
        if fresh is not None:
            self.rows[name] = fresh
        return applied

    def _meta(self, name: str, role: str) -> dict[str, Any]:
        row = self.rows[name]
        return {
            "show_id": self.show.id,
            "play_id": row.id,
            "play": name,
            "role": role,
            "attempt": int(row.attempt or 0),
            **self.team.meta(name),
        }

    # -- the loop --

    def run(self) -> str:
        """``completed``, ``blocked``, ``final_gate_failed``, ``integration_unverified``,
        ``interrupted`` or ``lost`` (the show was aborted or taken over meanwhile)."""
        while True:
            signum = self.stop.received if self.stop is not None else None
            if signum is not None and self.workers.stopping is None:
                self.say(f"{signum.name}: stopping the running executions")
                self.outcome = "interrupted"
                self.workers.stop(int(signum))
            if self.workers.stopping is None and not self._beat():
                self.outcome = "lost"
                self.workers.stop(15)
            if self.workers.stopping is not None:
                if self.workers.busy == 0:
                    return self.outcome
            elif self.outcome:
                return self.outcome
            else:
                self.refresh()
                self._mark_waiting()
                self._launch()
                if self.workers.busy == 0:
                    verdict = self._settle()
                    if verdict:
                        return verdict
                    continue
            try:
                done = self.workers.events.get(timeout=TICK_SECONDS)
            except queue.Empty:
                continue
            self.workers.finished(done)
            self._handle(done)

    def _beat(self) -> bool:
        now = time.monotonic()
        if self.lease.lapsed():
            # Its lease lapsed (even if renewed since): its guard killed the executions
            # and anyone may have taken the show over; it stops as a taken-over owner does.
            self.say(f"show {self.show.id}: its lease is lost (no heartbeat); stopping")
            return False
        if now - self._last_beat < self.beat_every:
            return True
        self._last_beat = now
        return self._renew(now)

    def _renew(self, started: float) -> bool:
        ours = self.store.shows.beat(self.show.id, self.owner)
        if ours:
            self.lease.renewed(started)
        return ours

    def _settle(self) -> str:
        """Nothing runs: start the final gate, or say how the show stands."""
        if self.to_start or self.gate_queue:
            return ""
        nxt = show_next(self.facts(), busy=False, final_gate=self.final)  # type: ignore[arg-type]
        if nxt.kind == "final_gate":
            self.say("every play merged: running the final gate")
            self.workers.start_final(self.spec.final_gate, self._show_meta("final_gate"))
            return ""
        return "blocked" if nxt.kind == "go" else nxt.kind

    def _show_meta(self, role: str) -> dict[str, Any]:
        return {"show_id": self.show.id, "role": role}

    def _mark_waiting(self) -> None:
        merged = {n for n, r in self.rows.items() if r.status == "merged"}
        for name in waiting_plays(self.facts()):
            row = self.rows[name]
            if row.status_reason_code != "play.pending.waiting_on_deps":
                deps = [d for d in row.depends_on_json or () if d not in merged]
                self.set_play(
                    name, "pending", "play.pending.waiting_on_deps", f"waits for {', '.join(deps)}"
                )

    def _launch(self) -> None:
        if self.head_check:
            return  # nothing starts before a head a person moved has passed its gate
        ready = deque(n for n in ready_plays(self.facts()) if n not in self.to_start)
        while self.workers.agents() < self.parallel and (self.to_start or ready):
            self._start_agent(self.to_start.popleft() if self.to_start else ready.popleft())
        if not self.gate_busy and self.gate_queue:
            self._start_gate(self.gate_queue.popleft())

    # -- agents --

    def _start_agent(self, name: str) -> None:
        row, play = self.rows[name], self.spec.play(name)
        if row.status not in ("pending", "prepared", "running", "redoing"):
            return  # a person or an abort decided meanwhile
        if row.status == "pending":
            branch = attempt_branch(self.git.integration, name, 1)
            path = str(self.git.play_path(name))
            summary = f"worktree {path} on {branch}"
            if not self.set_play(
                name,
                "prepared",
                "play.prepared.ok",
                summary,
                attempt=1,
                branch=branch,
                worktree=path,
            ):
                return
            row = self.rows[name]
        run_id = new_run_id()
        prompt, resume = self._prompt(name, row)
        if row.status == "prepared":
            ok = self.set_play(
                name, "running", "play.running.started", f"execution {run_id}", session_id=run_id
            )
        elif row.status == "running":
            reason = self.rerun_reason.pop(name, "play.running.rerun")
            ok = self.set_play(name, "running", reason, f"execution {run_id}", session_id=run_id)
        else:  # redoing: the second attempt runs under that status
            self.store.update_fields("play", row.id, {"session_id": run_id})
            ok = True
        if not ok:
            return
        self.say(f"play {name}: attempt {row.attempt} running ({run_id}) on {row.branch}")
        self.workers.start_agent(
            AgentJob(
                play=name,
                task=play.task,
                branch=str(row.branch),
                run_id=run_id,
                prompt=prompt,
                resume_branch=resume,
                metadata=self._meta(name, "agent"),
                env=self.team.env(name),
            )
        )

    def _prompt(self, name: str, row: PlayRow) -> tuple[str | None, str | None]:
        """(prompt, branch to resume) for the play's next execution."""
        task = self.spec.play(name).task
        feedback = row.feedback
        if not task.is_agent or not feedback or int(row.attempt or 0) < 2:
            return self.team.prompt(
                name, task.prompt if task.is_agent else None, resumed=False
            ), None
        previous = [
            s
            for s in self.store.shows.list_play_sessions(row.id)
            if s.meta.get("role") == "agent" and s.meta.get("attempt") == int(row.attempt) - 1
        ]
        last = previous[-1] if previous else None
        resume = str(last.branch_id) if last and last.engine_session_uid else None
        redo = redo_prompt(task.prompt, feedback, str(row.branch), resumed=bool(resume))
        return self.team.prompt(name, redo, resumed=bool(resume)), resume

    def _on_agent(self, done: Done) -> None:
        name = str(done.play)
        stopping = self.workers.stopping is not None
        if done.error is not None or done.result is None:
            if not stopping:
                self.fail(name, "session_failed", f"the play could not run: {done.error}")
            return
        res = done.result
        nxt = after_run(
            res.status, res.reason, stopping=stopping, retries_used=self.retries.get(name, 0)
        )
        self.after_agent(name, nxt, res.run_id, res.status, res.reason)

    def after_agent(
        self, name: str, nxt: str, run_id: str, status: str, reason: str | None
    ) -> None:
        """Act on ``decide.after_run`` for the play's execution ``run_id``."""
        if nxt == "gate":
            summary = f"execution {run_id} completed"
            if self.set_play(name, "running_complete", "play.running_complete.ok", summary):
                self.gate_queue.append(name)
        elif nxt in ("retry", "rerun"):
            if nxt == "retry":
                self.retries[name] = self.retries.get(name, 0) + 1
                self.rerun_reason[name] = "play.running.retry_provider"
            self.say(f"play {name}: execution {run_id} ended {status} ({reason}); running again")
            self.to_start.append(name)
        elif nxt == "escalate":
            self.stop_for_provider(name, run_id, reason)
        elif nxt == "fail":
            why = describe(reason or "") or "see its record"
            self.fail(
                name,
                "session_failed",
                f"its execution {run_id} ended {status} ({reason}: {why}), so there is "
                "nothing to merge; make the change the task asks for and commit it",
            )

    def stop_for_provider(self, name: str, run_id: str, reason: str | None) -> None:
        """The provider refused the run in a way no redo fixes (login, key, request): the
        play waits for a person, with the provider's words and what to do."""
        row = self.store.sessions.get(run_id)
        said = (row.provider_error or row.status_reason_summary) if row else None
        summary, feedback = provider_stop(run_id, reason, said) or (str(reason), str(reason))
        self.set_play(name, "escalated", "play.escalated.provider", summary, feedback=feedback)
        self.say(f"play {name}: escalated: {summary}")

    def fail(self, name: str, kind: FailureKind, feedback: str, **fields: Any) -> None:
        """The play did not merge: redo it on a new attempt branch, or give up."""
        row = self.rows[name]
        failure = after_failure(kind, attempt=int(row.attempt or 1), attempts=row.attempts or 1)
        if failure.status == "redoing":
            attempt = int(row.attempt or 1) + 1
            branch = attempt_branch(self.git.integration, name, attempt)
            fields.update(attempt=attempt, branch=branch, feedback=feedback)
            if self.set_play(name, "redoing", failure.reason_code, feedback, **fields):
                self.retries[name] = 0
                self.to_start.append(name)
                self.say(f"play {name}: {describe(failure.reason_code)}; attempt {attempt}")
            return
        self.set_play(
            name, failure.status, failure.reason_code, feedback, feedback=feedback, **fields
        )
        self.say(f"play {name}: {failure.status}: {_short(feedback)}")

    # -- the merge queue --

    def _start_gate(self, name: str) -> None:
        row = self.rows[name]
        if row.status == "running_complete":
            ok = self.set_play(name, "gated", "play.gated.awaiting", "gating the merge result")
        else:
            ok = self.set_play(name, "gated", "play.gated.regate", "gating on the new head")
        if not ok:
            return
        self.gate_busy = True
        self.workers.start_gate(
            GateJob(
                play=name,
                branch=str(row.branch),
                worktree=row.worktree,
                gate=self.spec.gate_for(self.spec.play(name)),
                message=f"Merge play {name} of show {self.spec.topic} ({self.show.id})",
                metadata=self._meta(name, "gate"),
            )
        )

    def _on_gate(self, done: Done) -> None:
        self.gate_busy = False
        name = str(done.play)
        if self.workers.stopping is not None and (done.gate is None or done.gate.verdict != "pass"):
            return  # no verdict while stopping: resume gates it again
        merge, gate = done.merge, done.gate
        branch, integration = self.rows[name].branch, self.git.integration
        if done.error is not None or merge is None:
            self.fail(name, "gate", f"the gate could not run: {done.error}")
        elif merge.up_to_date:
            self.fail(
                name,
                "no_changes",
                f"its branch {branch} brings no change to {integration}; "
                "make the change the task asks for and commit it",
            )
        elif merge.conflicts:
            paths = ", ".join(merge.conflicts)
            self.fail(
                name,
                "merge_conflict",
                f"merging {branch} into {integration} (at {merge.base[:12]}) conflicts in: "
                f"{paths}. Other plays changed these files meanwhile; redo the change on "
                "top of the current integration head",
            )
        elif gate is None or gate.verdict == "interrupted":
            return
        elif gate.verdict == "fail":
            self.fail(
                name,
                "gate",
                f"the gate failed on the merge result {gate.commit[:12]} "
                f"({gate.reason}); "
                + (f"its output ends:\n{gate.output}" if gate.output else "it printed nothing"),
                gate_json=gate.to_dict(),
            )
        else:
            self.land(name, gate.commit, merge.base, gate.to_dict())

    def land(self, name: str, sha: str, base: str, gate: dict[str, Any] | None) -> None:
        """Record the candidate, then compare-and-swap the integration branch to it."""
        row = self.rows[name]
        if not self._may_land(name):
            return
        fields: dict[str, Any] = {"candidate_sha": sha, "candidate_base": base}
        if gate is not None:
            fields["gate_json"] = gate
        self.store.update_fields("play", row.id, fields)
        if not self.git.move_integration(sha, base):
            self.say(f"play {name}: {self.git.integration} moved meanwhile; gating again")
            self.team.head_moved(self.git.integration, self.git.head() or "(deleted)")
            self.set_play(name, "gated", "play.gated.regate", "the integration branch moved")
            self.gate_queue.appendleft(name)
            return
        self.merged(name, sha)

    def _may_land(self, name: str) -> bool:
        """The show is still ours and the play still gated, asked just before the ref
        move: an abort (or a person) between heartbeats must not find a merge landed on
        the branch of a play its record says did not merge."""
        fresh = self.store.shows.get_play(self.rows[name].id)
        started = time.monotonic()
        if self._renew(started) and fresh is not None:
            self._last_beat = started
            if fresh.status == "gated":
                return True
            self.rows[name] = fresh
            self.say(f"play {name}: {fresh.status} meanwhile; not merged")
            return False
        self.say(f"show {self.show.id} was ended or taken over meanwhile; nothing merged")
        self.outcome = "lost"
        self.workers.stop(15)
        return False

    def merged(self, name: str, sha: str) -> None:
        row = self.rows[name]
        show = self.store.shows.get(self.show.id)
        old = show.integration_head if show is not None else None
        self.store.update_fields("show", self.show.id, {"integration_head": sha})
        self.set_play(
            name,
            "merged",
            "play.merged.ok",
            f"merged as {sha[:12]}",
            merge_sha=sha,
            merged_at=time.time(),
            worktree=None,
        )
        attempts = int(row.attempt or 1)
        self.git.remove_play(
            name, [attempt_branch(self.git.integration, name, n) for n in range(1, attempts + 1)]
        )
        self.say(f"play {name}: merged into {self.git.integration} as {sha[:12]}")
        if self.team.team:
            self.team.merged(name, sha, self.git.integration, self.git.changed_paths(old, sha))

    def _on_final(self, done: Done) -> None:
        gate = done.gate
        if self.workers.stopping is not None and (gate is None or gate.verdict != "pass"):
            return
        if gate is None or gate.verdict == "interrupted":
            return
        role = "head_gate" if done.kind == "head" else "final_gate"
        record = {**gate.to_dict(), "output": gate.output, "role": role}
        self.store.update_fields("show", self.show.id, {"final_gate_json": record})
        if done.kind == "head":
            self.head_check = False
            if gate.verdict == "pass":
                self.store.update_fields("show", self.show.id, {"integration_head": gate.commit})
                self.say(f"the moved head {gate.commit[:12]} passed its gate")
            else:
                self.outcome = "integration_unverified"
            return
        self.final = "passed" if gate.verdict == "pass" else "failed"
        self.say(f"final gate {gate.verdict}ed on {gate.commit[:12]}")

    def _handle(self, done: Done) -> None:
        if done.kind == "agent":
            self._on_agent(done)
        elif done.kind == "gate":
            self._on_gate(done)
        elif done.error is not None:
            if self.workers.stopping is None:
                raise done.error
        else:
            self._on_final(done)

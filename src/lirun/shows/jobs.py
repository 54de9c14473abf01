"""The work a show runs in threads: a play's agent execution, a gate on a merge result,
the final gate. Each job returns a ``Done`` to the conductor's queue and never writes a
play or show record itself (the conductor is the only writer of those).

Each job runs in a thread of the pool (``orchestra.pool``) with a trap of its own, so the
conductor stops every execution with ``stop``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lirun.exec.execution import execute
from lirun.exec.request import RunResult
from lirun.exec.task import Task, build_request
from lirun.exec.trouble import trouble_reporter
from lirun.orchestra.pool import Pool
from lirun.settings import Settings
from lirun.shows.gates import GateRun, run_gate
from lirun.shows.gitwork import Merge, ShowGit
from lirun.shows.spec import Gate
from lirun.signals import SignalTrap

__all__ = ["AgentJob", "Done", "GateJob", "Workers"]


@dataclass(frozen=True, slots=True)
class Done:
    """A finished job: ``kind`` agent | gate | final, for ``play`` (None: the show)."""

    kind: str
    play: str | None
    result: RunResult | None = None
    merge: Merge | None = None
    gate: GateRun | None = None
    error: BaseException | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AgentJob:
    play: str
    task: Task
    branch: str
    run_id: str
    prompt: str | None
    resume_branch: str | None
    metadata: Mapping[str, Any]
    env: Mapping[str, str] = field(default_factory=dict)  # LIRUN_TEAM, LIRUN_MEMBER


@dataclass(frozen=True, slots=True)
class GateJob:
    play: str
    branch: str
    worktree: str | None
    gate: Gate | None
    message: str
    metadata: Mapping[str, Any]


class Workers:
    """Threads that run jobs and report to ``events``; ``stop`` delivers a signal to all.
    Every execution runs on ``settings`` (None: it reads the environment)."""

    def __init__(
        self,
        git: ShowGit,
        db_url: str,
        say: Callable[[str], None] | None = None,
        settings: Settings | None = None,
    ) -> None:
        self.git = git
        self.db_url = db_url
        self.say = say
        self.settings = settings
        self.pool: Pool[Done] = Pool("show")
        self.events = self.pool.results

    @property
    def stopping(self) -> int | None:
        """The signal the running executions were stopped with, once they were."""
        return self.pool.stopping

    @property
    def busy(self) -> int:
        return self.pool.busy

    def running(self, key: str) -> bool:
        return self.pool.running(key)

    def agents(self) -> int:
        return sum(1 for k in self.pool.started() if not k.startswith("gate:"))

    def _spawn(
        self, key: str, play: str | None, kind: str, body: Callable[[SignalTrap], Done]
    ) -> None:
        def main() -> None:
            with self.pool.trapped(key) as trap:
                try:
                    done = body(trap)
                except BaseException as exc:  # the conductor decides what an error means
                    done = Done(kind, play, error=exc)
            self.events.put(done)

        self.pool.start(key, main)

    def finished(self, done: Done) -> None:
        """Forget the job ``done`` reports (called by the conductor on each event)."""
        self.pool.join(f"gate:{done.play}" if done.kind != "agent" else f"agent:{done.play}")

    def stop(self, signum: int) -> None:
        """Forward ``signum`` to every running execution (and to those about to start)."""
        self.pool.stop(signum)

    def shutdown(self, signum: int) -> None:
        """Stop every job and wait for its thread (their results are dropped)."""
        self.stop(signum)
        self.pool.join_all()

    # -- the jobs --

    def start_agent(self, job: AgentJob) -> None:
        def body(trap: SignalTrap) -> Done:
            start = self.git.head()
            if start is None:
                raise RuntimeError(f"the integration branch {self.git.integration} is gone")
            path = self.git.prepare(job.play, job.branch, start)
            request = build_request(
                job.task,
                cwd=str(path),
                db_url=self.db_url,
                prompt=job.prompt,
                run_id=job.run_id,
                resume_branch=job.resume_branch,
                metadata={**job.metadata, "start": start},
                env=job.env,
                settings=self.settings,
            )
            request.on_event = self._trouble(job.play)
            return Done("agent", job.play, result=execute(request, trap=trap))

        self._spawn(f"agent:{job.play}", job.play, "agent", body)

    def _trouble(self, play: str) -> Callable[[str, Any], None] | None:
        """The provider's retries, warnings and errors as progress lines, named by the
        play (said from the job's thread: one write per line)."""
        return None if self.say is None else trouble_reporter(self.say, f"play {play}")

    def start_gate(self, job: GateJob) -> None:
        def body(trap: SignalTrap) -> Done:
            if job.worktree:
                self.git.commit_leftovers(job.worktree, f"{job.play}: work left uncommitted")
                self.git.adopt_head(job.worktree, job.branch)
            base = self.git.head()
            if base is None:
                raise RuntimeError(f"the integration branch {self.git.integration} is gone")
            merge = self.git.merge_candidate(job.branch, base, job.message)
            if merge.sha is None:
                return Done("gate", job.play, merge=merge)
            gate = run_gate(
                job.gate,
                cwd=self.git.gate_path,
                commit=merge.sha,
                db_url=self.db_url,
                metadata=job.metadata,
                trap=trap,
                settings=self.settings,
            )
            return Done("gate", job.play, merge=merge, gate=gate)

        self._spawn(f"gate:{job.play}", job.play, "gate", body)

    def start_final(
        self, gate: Gate | None, metadata: Mapping[str, Any], kind: str = "final"
    ) -> None:
        """The gate on the integration head itself: ``final`` (every play merged) or
        ``head`` (a person moved the head: it is gated before anything lands on it)."""

        def body(trap: SignalTrap) -> Done:
            head = self.git.head()
            if head is None:
                raise RuntimeError(f"the integration branch {self.git.integration} is gone")
            path = self.git.checkout_gate(head)
            run = run_gate(
                gate,
                cwd=path,
                commit=head,
                db_url=self.db_url,
                metadata=metadata,
                trap=trap,
                settings=self.settings,
            )
            return Done(kind, None, gate=run)

        self._spawn("gate:None", None, kind, body)

"""Running leg instances: worker threads, each leg one supervised execution (``execute``).

A worker thread opens its own Store for its lifetime and runs one job at a time: it
prepares the leg's worktree when the leg is isolated, builds the request from the leg's
task (prompt and arguments already rendered by the engine), and calls ``execute`` with
the trap the pool (``orchestra.pool``) gives each attempt, which the engine's thread
stops through ``stop``. A failure the record marks retryable (``is_retryable_reason``: a
transient provider failure) is retried up to ``retries`` times, each retry a new session
with ``attempt`` = n and ``retry_of`` = the session it retries.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lirun.errors import LirunError, StartInterruptedError
from lirun.exec.execution import execute
from lirun.exec.task import build_request
from lirun.exec.trouble import trouble_reporter
from lirun.exec.worktrees import GitError, Repo, commit_leftovers, worktrees_root
from lirun.flows.spec import LegSpec
from lirun.orchestra.pool import Pool
from lirun.reasons import is_retryable_reason
from lirun.record.completion import COMMAND_EXITED_0
from lirun.record.rundir import new_run_id
from lirun.settings import Settings
from lirun.store import open_store
from lirun.store.rows import SessionRow

__all__ = ["LegJob", "LegResult", "LegWorkers", "outputs_of", "proof_is_shared", "retry_leg"]

_GIT_LOCK = threading.Lock()  # `git worktree add` takes repository-wide locks


@dataclass(frozen=True, slots=True)
class LegJob:
    """One leg instance, ready to run: everything rendered and decided by the engine."""

    id: str
    leg: LegSpec
    item: str | None
    cwd: str
    invocation_id: str
    prompt: str | None = None
    run_argv: list[str] | None = None
    isolation: str = "shared"  # "worktree" | "shared"
    beside: bool = False  # other legs may run at the same time
    retry_delay: float = 1.0
    env: Mapping[str, str] = field(default_factory=dict)  # LIRUN_TEAM, LIRUN_MEMBER
    team: Mapping[str, str] | None = None  # {"id", "name", "member"} when in a team

    @property
    def evidence_shared(self) -> bool:
        """Its tree is shared with legs running beside it, and a change there could be its
        proof of work (an agent's, or a command's with ``require_change``): changes there
        are not its own. A command's exit code is its own whatever the tree."""
        task = self.leg.task
        return self.isolation == "shared" and self.beside and (task.is_agent or task.require_change)


@dataclass(slots=True)
class LegResult:
    """How one leg instance ended. ``status`` None: it never started (``reason_code``
    says why: stopped before its first attempt, or could not be set up)."""

    id: str
    status: str | None
    reason_code: str | None
    session_id: str | None = None
    attempts: int = 0
    duration_s: float | None = None
    cost_usd: float | None = None
    outputs: dict[str, Any] = field(default_factory=dict)
    proof_shared: bool = False
    error: str | None = None
    message: str | None = None  # the provider's own words when its last attempt failed


def retry_leg(reason: str | None, attempt: int, retries: int) -> bool:
    """Whether attempt ``attempt`` that ended ``reason`` gets another: only a reason a
    retry may fix (``is_retryable_reason``: rate limit, overload, server or network
    error, a stall, a timeout while the provider was retrying), never a refused login or
    a rejected request, and at most ``retries`` times."""
    return is_retryable_reason(reason) and attempt <= retries


def outputs_of(row: SessionRow, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What a template sees of a finished leg: ``reply``, ``artifacts`` (id → path),
    ``status``, ``session_id`` (and ``worktree`` / ``branch`` for an isolated leg). A
    command leg's stdout tail is its ``output`` (``reply`` holds it too, as it always has)."""
    root = row.artifacts_path or ""
    contract = row.artifact_contract_json or {}
    artifacts = {
        str(entry["id"]): os.path.join(root, str(entry["path"]))
        for entry in (contract.get("expected") or [])
        if isinstance(entry, Mapping) and "id" in entry and "path" in entry
    }
    meta = row.meta.get("flow") or {}
    outputs = {
        "reply": row.reply_text or "",
        "artifacts": artifacts,
        "status": row.status,
        "session_id": row.id,
    }
    if row.provider == "command":
        outputs["output"] = outputs["reply"]
    for key in ("worktree", "branch"):
        if meta.get(key):
            outputs[key] = meta[key]
    outputs.update(extra or {})
    return outputs


def _produced_any(row: SessionRow) -> bool:
    produced = (row.artifact_verification_json or {}).get("produced") or []
    return any(isinstance(p, Mapping) and p.get("present") for p in produced)


def _own_proof(row: SessionRow) -> bool:
    """Its outcome rests on evidence of its own: a reply that counted (an agent's, not
    with ``require_change``), or a command's exit code (``completion.COMMAND_EXITED_0``)."""

    for ref in row.status_evidence_refs or ():
        if not isinstance(ref, Mapping):
            continue
        if ref.get("kind") == "assistant_output" and ref.get("counted", True):
            return True  # a reply the gate did not count is kept, labelled so
        if ref.get("kind") == "exit_code" and ref.get("label") == COMMAND_EXITED_0:
            return True
    return False


def proof_is_shared(row: SessionRow) -> bool:
    """The leg ran in a tree shared with legs beside it (``evidence_shared`` in its
    metadata) and ended ``completed`` with neither evidence of its own (a reply that
    counted, a command's exit code) nor an artifact file: its only proof is a change that
    cannot be told from its neighbours'. Read from the row, so a resume that reuses the
    leg counts it as the run that made it did."""
    meta = row.meta.get("flow") or {}
    return (
        bool(meta.get("evidence_shared"))
        and row.status == "completed"
        and not _own_proof(row)
        and not _produced_any(row)
    )


def _worktree(job: LegJob) -> tuple[str, dict[str, str]]:
    """A worktree for the leg, on its own branch from HEAD; the leg's cwd inside it."""

    repo = Repo(job.cwd)
    top = repo.toplevel()
    rel = os.path.relpath(os.path.realpath(job.cwd), os.path.realpath(top))
    name = job.id.replace("[", "-").replace("]", "")
    path = worktrees_root() / job.invocation_id / name
    branch = f"lirun/flow/{job.invocation_id}/{name}"
    head = repo.resolve("HEAD")
    if head is None:
        raise LirunError(f"{top} has no commit to start leg {job.id}'s worktree from")
    spot = rel.replace(os.sep, "/")
    if rel != "." and Repo(top).run("cat-file", "-e", f"{head}:{spot}", check=False).returncode:
        raise LirunError(
            f"leg {job.id}'s cwd {rel} is not in {top} at HEAD (not committed), so its "
            "worktree has no such directory; commit it, or give the leg isolation: shared"
        )
    with _GIT_LOCK:
        Repo(top).add_worktree(path, branch, head)
    cwd = str(path) if rel == "." else os.path.join(str(path), rel)
    return cwd, {"worktree": str(path), "branch": branch}


class LegWorkers:
    """``size`` threads running LegJobs; results arrive on ``results`` as LegResults.

    ``stop(signum)`` delivers a signal to every running leg (and to legs that start
    after it: their trap gets it as soon as it exists); no new attempt starts after it.
    """

    def __init__(
        self,
        size: int,
        *,
        db_url: str,
        log: Callable[[str], None],
        settings: Settings | None = None,
    ) -> None:
        self.pool: Pool[LegResult] = Pool("lirun-leg")
        self.results = self.pool.results
        self._jobs: queue.Queue[LegJob | None] = queue.Queue()
        self._db_url = db_url
        self._log = log
        self._settings = settings
        for n in range(max(1, size)):
            self.pool.start(str(n), self._work)

    def submit(self, job: LegJob) -> None:
        self._jobs.put(job)

    def stop(self, signum: int) -> None:
        self.pool.stop(signum)

    def close(self) -> None:
        for _ in range(self.pool.busy):
            self._jobs.put(None)
        self.pool.join_all()

    # -- in a worker thread --

    def _work(self) -> None:
        store = None
        try:
            while (job := self._jobs.get()) is not None:
                try:
                    if store is None:
                        store = open_store(self._db_url)
                    result = self._run(job, store)
                except Exception as exc:  # the engine must always hear back
                    result = LegResult(job.id, None, "run.failed.setup", error=str(exc))
                self.results.put(result)
        finally:
            if store is not None:
                store.close()

    def _run(self, job: LegJob, store: Any) -> LegResult:
        if self.pool.stopped:
            return LegResult(job.id, None, "run.cancelled.flow_stopped")
        extra: dict[str, str] = {}
        cwd = job.cwd
        try:
            if job.isolation == "worktree":
                cwd, extra = _worktree(job)
        except LirunError as exc:
            return LegResult(job.id, None, "run.failed.setup", error=str(exc))
        result = LegResult(job.id, None, None)
        try:
            return self._attempts(job, store, cwd, extra, result)
        finally:
            if extra.get("worktree"):
                self._keep_leftovers(job, extra["worktree"])

    def _keep_leftovers(self, job: LegJob, worktree: str) -> None:
        """What the leg left uncommitted in its worktree is committed to its branch, as a
        show does for a play: its work lives on its branch, and a clean can tell it."""
        try:
            if commit_leftovers(worktree, f"{job.id}: work left uncommitted"):
                self._log(f"leg {job.id}: committed its uncommitted work to its branch")
        except GitError as exc:
            self._log(f"leg {job.id}: could not commit its uncommitted work: {exc}")

    def _attempts(
        self, job: LegJob, store: Any, cwd: str, extra: Mapping[str, str], result: LegResult
    ) -> LegResult:
        previous: str | None = None
        for attempt in range(1, job.leg.retries + 2):
            if self.pool.stopped:
                break
            row = self._attempt(job, store, cwd, attempt, previous, extra, result)
            if row is None:
                return result
            previous = row.id
            reason = row.status_reason_code
            if not retry_leg(reason, attempt, job.leg.retries):
                break
            self._log(f"leg {job.id} attempt {attempt} ended {reason}; retrying")
            if self.pool.wait_stopped(job.retry_delay * attempt):
                break
        if result.status is None and result.reason_code is None:
            result.reason_code = "run.cancelled.flow_stopped"
        return result

    def _attempt(
        self,
        job: LegJob,
        store: Any,
        cwd: str,
        attempt: int,
        previous: str | None,
        extra: Mapping[str, str],
        result: LegResult,
    ) -> SessionRow | None:
        """One execution; fills ``result``; the session row, or None if none was made."""

        meta: dict[str, Any] = {
            "invocation": job.invocation_id,
            "leg": job.leg.id,
            "item": job.item,
            "isolation": job.isolation,
            "evidence_shared": job.evidence_shared,
            **extra,
        }
        if job.team:
            meta["team"] = dict(job.team)
        try:
            request = build_request(
                job.leg.task,
                cwd=cwd,
                db_url=self._db_url,
                prompt=job.prompt,
                run_argv=job.run_argv,
                invocation_id=job.invocation_id,
                metadata={"flow": meta},
                run_id=new_run_id(),  # its own: never $LIRUN_RUN_ID, which names one run
                env=job.env,
                settings=self._settings,
            )
        except LirunError as exc:
            result.reason_code, result.error = "run.failed.setup", str(exc)
            return None
        request.row_fields = {"flow_leg": job.id, "attempt": attempt, "retry_of": previous}
        # the provider's retries, warnings and errors as the flow's lines (stderr, flow.log)
        request.on_event = trouble_reporter(self._log, f"leg {job.id}")
        with self.pool.trapped(job.id) as trap:
            try:
                executed = execute(request, store=store, trap=trap)
            except StartInterruptedError:
                result.reason_code = "run.cancelled.flow_stopped"
                return None
            except LirunError as exc:
                result.reason_code, result.error = "run.failed.setup", str(exc)
                return None
        result.session_id = executed.run_id
        result.attempts = attempt
        row = store.sessions.get(executed.run_id)
        if row is None:  # removed meanwhile: what the execution itself reported
            result.status, result.reason_code = executed.status, executed.reason
            return None
        result.status = row.status
        result.reason_code = row.status_reason_code
        result.duration_s = row.duration_s
        result.cost_usd = row.cost_usd
        result.outputs = outputs_of(row, extra)
        result.proof_shared = proof_is_shared(row)
        failed = result.status not in ("completed", "completed_empty")
        result.message = row.provider_error if failed else None
        return row

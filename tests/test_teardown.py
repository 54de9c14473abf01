"""setup_persist / teardown_persist against real databases, run dirs and git repositories."""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import lirun.record.facts
import lirun.record.fingerprint
from lirun.errors import UsageError, ValidationError
from lirun.provider_errors import (
    ProviderError,
    ProviderNonRetryableError,
    ProviderRetryableError,
)
from lirun.record.artifacts import ArtifactContractError, ArtifactPathError
from lirun.record.evidence import check_completion_evidence
from lirun.record.facts import TeardownExtras
from lirun.record.rundir import RunDir, allocate_run
from lirun.record.teardown import (
    PersistContext,
    finalize_sync,
    setup_persist,
    setup_persist_sync,
    teardown_persist,
    teardown_persist_sync,
)
from lirun.store import StateDB, Store
from lirun.store.rows import TransitionRow
from support.storekit import row_of
from support.teardownkit import GIT_ENV, finalize_as, git, make_repo, other_writer

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

REPORT = {"expected": [{"id": "report", "path": "out/report.md"}]}


@pytest.fixture(autouse=True)
def isolated_git(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def run() -> RunDir:
    return allocate_run()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


class Sleeps:
    """An injected sleep that records calls and can run an action on the n-th one."""

    def __init__(self, on_call: int = 0, action: Callable[[], None] | None = None) -> None:
        self.calls: list[float] = []
        self.on_call, self.action = on_call, action

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
        if self.action is not None and len(self.calls) == self.on_call:
            self.action()


def start(run: RunDir, db: Any, **fields: Any) -> PersistContext:
    ctx = setup_persist_sync(run, db=db, **fields)
    assert ctx is not None
    ctx.sleep = Sleeps()
    return ctx


def sleeps_of(ctx: PersistContext) -> list[float]:
    assert isinstance(ctx.sleep, Sleeps)
    return ctx.sleep.calls


def last_transition(store: Store, session_id: str) -> TransitionRow:
    return store.list_transitions("session", session_id)[-1]


def forbid_git(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*_a: object, **_k: object) -> None:
        raise AssertionError("git evidence must not be gathered here")

    monkeypatch.setattr(lirun.record.facts, "check_completion_evidence", fail)


# --- setup -----------------------------------------------------------------------------------


def test_setup_creates_row_and_manifest_before_work(
    db_url: str, store: Store, run: RunDir, repo: Path
) -> None:
    contract = {"expected": [{"id": "report", "path": "out/report.md", "required": True}]}
    ctx = start(
        run, db_url, artifact_contract=contract, provider="claude", cwd=repo, branch_id="b-1"
    )
    contract["expected"].append({"id": "late", "path": "late.md"})  # the snapshot is frozen
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert (row["id"], row["run_id"], row["status"]) == (run.run_id, run.run_id, "running")
    assert row["run_dir"] == str(run.state_root) == ctx.run_dir
    assert row["artifacts_path"] == str(run.artifact_dir) == ctx.artifact_dir
    assert row["artifact_contract_json"] == {"expected": [contract["expected"][0]]}
    assert ctx.artifact_contract == row["artifact_contract_json"]
    assert (row["provider"], row["cwd"], row["branch_id"]) == ("claude", str(repo), "b-1")
    assert row["started_at"] == ctx.started_at
    assert row["ended_at"] is None
    history = store.list_transitions("session", run.run_id)
    assert [(t.previous_status, t.status) for t in history] == [(None, "running")]
    manifest = run.read_manifest()
    assert manifest["run_id"] == run.run_id
    assert manifest["state_root"] == str(run.state_root)
    assert manifest["artifact_dir"] == str(run.artifact_dir)
    assert (manifest["session_id"], manifest["provider"]) == (run.run_id, "claude")
    assert ctx.owned
    assert ctx.session_id == run.run_id
    ctx.close()


@pytest.mark.parametrize(
    ("contract", "error", "match"),
    [
        ({"expected": [{"id": "bad id", "path": "a.md"}]}, ArtifactContractError, r"entry 0.*id"),
        ({"expected": [{"id": "a", "path": "/etc/passwd"}]}, ArtifactPathError, r"'a'.*absolute"),
        ({"expected": [{"id": "a", "path": "x/../../y"}]}, ArtifactPathError, r"'a'.*'\.\.'"),
        ({"expected": [{"id": "a", "path": "*.md"}]}, ArtifactPathError, r"'a'.*glob"),
        (
            {"expected": [{"id": "a", "path": "1.md"}, {"id": "a", "path": "2.md"}]},
            ArtifactContractError,
            r"entry 1.*duplicate id 'a'",
        ),
        ({"expected": "report.md"}, ArtifactContractError, r"'expected' must be a list"),
    ],
    ids=["bad-id", "absolute", "dotdot", "glob", "duplicate", "not-a-list"],
)
def test_malformed_contract_raises_before_any_write(
    db_url: str,
    store: Store,
    run: RunDir,
    contract: dict[str, Any],
    error: type[Exception],
    match: str,
) -> None:
    with pytest.raises(error, match=match):
        setup_persist_sync(run, db=db_url, artifact_contract=contract)
    assert store.sessions.list_recent() == []
    assert not run.manifest_path.exists()


@pytest.mark.parametrize(
    ("fields", "error"),
    [({"run_dir": "/elsewhere"}, UsageError), ({"colour": "blue"}, ValidationError)],
)
def test_bad_session_fields_raise_before_any_write(
    db_url: str, store: Store, run: RunDir, fields: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error, match=next(iter(fields))):
        setup_persist_sync(run, db=db_url, **fields)
    assert store.sessions.list_recent() == []


@pytest.mark.parametrize("kind", ["missing-dir", "refused-port"])
def test_setup_failure_returns_none_and_warns(
    tmp_path: Path, run: RunDir, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    url = (
        str(tmp_path / "no" / "such" / "dir" / "state.db")
        if kind == "missing-dir"
        else "postgresql://postgres@127.0.0.1:1/test"
    )
    with caplog.at_level(logging.WARNING, logger="lirun.record.teardown"):
        assert setup_persist_sync(run, db=url, artifact_contract=REPORT) is None
    assert any(run.run_id in r.getMessage() for r in caplog.records)
    assert teardown_persist_sync(None, status="timed_out") == "timed_out"


def test_unwritable_run_dir_returns_none_without_a_row(
    db_url: str, store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a directory should be", encoding="utf-8")
    run = RunDir("r-unwritable", blocker / "r-unwritable", blocker / "art")
    with caplog.at_level(logging.WARNING, logger="lirun.record.teardown"):
        assert setup_persist_sync(run, db=db_url) is None
    assert "r-unwritable" in caplog.text
    assert store.sessions.list_recent() == []


def test_async_api_with_a_shared_statedb(db_url: str, run: RunDir) -> None:
    async def scenario() -> tuple[str, dict[str, Any] | None, PersistContext | None]:
        async with StateDB(db_url) as db:
            ctx = await setup_persist(run, db=db, provider="codex")
            assert ctx is not None
            assert not ctx.owned
            status = await teardown_persist(ctx, extras={"assistant_text": "all done"})
            return status, await db.get_session(run.run_id), ctx  # the handle is still open

    status, row, ctx = asyncio.run(scenario())
    assert status == "completed"
    assert row is not None
    assert row["status"] == "completed"
    assert ctx is not None
    assert ctx.closed
    assert asyncio.run(teardown_persist(None, status="aborted")) == "aborted"


def test_shared_store_stays_open_after_teardown(db_url: str, store: Store, run: RunDir) -> None:
    ctx = start(run, store)
    assert teardown_persist_sync(ctx, extras={"assistant_output": True}) == "completed"
    assert row_of(store, "session", run.run_id)["status"] == "completed"


# --- teardown: the outcome ------------------------------------------------------------------


def test_completed_with_git_evidence(db_url: str, store: Store, run: RunDir, repo: Path) -> None:
    ctx = start(run, db_url, cwd=str(repo))
    (repo / "new.txt").write_text("work\n", encoding="utf-8")
    assert teardown_persist_sync(ctx) == "completed"
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert (row["status"], row["status_reason_code"], row["exit_code"]) == (
        "completed",
        "run.completed.ok",
        0,
    )
    assert row["ended_at"] >= row["started_at"]
    git_ev = [e for e in row["status_evidence_refs"] if e["kind"] == "git"]
    assert git_ev
    assert git_ev[0]["dirty"] is True
    assert ctx.closed


def test_commit_ahead_of_base_is_evidence(
    db_url: str, store: Store, run: RunDir, repo: Path
) -> None:
    ctx = start(run, db_url, cwd=str(repo))
    git(repo, "checkout", "-q", "-b", "work")
    (repo / "feature.txt").write_text("f\n", encoding="utf-8")
    git(repo, "add", "feature.txt")
    git(repo, "commit", "-q", "-m", "feature")
    assert teardown_persist_sync(ctx) == "completed"
    meta = last_transition(store, run.run_id).metadata
    assert meta["completion_evidence"]["commits_ahead"] == 1


def test_completed_empty_in_a_clean_repo(
    db_url: str, store: Store, run: RunDir, repo: Path
) -> None:
    ctx = start(run, db_url, cwd=str(repo))
    store.sessions.append_message(
        run.run_id, role="assistant", content="   "
    )  # whitespace is no reply
    assert teardown_persist_sync(ctx) == "completed_empty"
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert (row["status_reason_code"], row["exit_code"]) == ("run.completed_empty.no_evidence", 1)
    meta = last_transition(store, run.run_id).metadata
    assert meta["completion_evidence"]["checked"] is True


@pytest.mark.parametrize("source", ["message", "extras"])
def test_assistant_reply_keeps_completed_and_the_cwd_is_compared_beside_it(
    db_url: str,
    store: Store,
    run: RunDir,
    repo: Path,
    source: str,
) -> None:
    ctx = start(run, db_url, cwd=str(repo))
    extras = {"assistant_text": "Done."} if source == "extras" else None
    if source == "message":
        store.sessions.append_message(run.run_id, role="assistant", content="Done.")
    assert teardown_persist_sync(ctx, extras=extras) == "completed"
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert [e["kind"] for e in row["status_evidence_refs"]] == ["assistant_output", "git"]
    assert row["status_evidence_refs"][1]["changed"] is False
    assert row["status_reason_summary"] == "completed: reply only"


def test_a_capped_start_is_not_compared_again_when_a_reply_decides(
    db_url: str,
    store: Store,
    run: RunDir,
    repo: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A start fingerprint that spent its budget is not walked again for the record's sake."""
    monkeypatch.setattr(lirun.record.fingerprint, "MAX_FILES", 1)
    for name in ("x.txt", "y.txt"):
        (repo / name).write_text(name, encoding="utf-8")
    ctx = start(run, db_url, cwd=str(repo))
    assert ctx.start_snapshot is not None
    assert ctx.start_snapshot["capped"]
    forbid_git(monkeypatch)
    assert teardown_persist_sync(ctx, extras={"assistant_text": "Done."}) == "completed"
    assert [e["kind"] for e in row_of(store, "session", run.run_id)["status_evidence_refs"]] == [
        "assistant_output"
    ]


def test_missing_required_artifact_fails(db_url: str, store: Store, run: RunDir) -> None:
    ctx = start(run, db_url, artifact_contract=REPORT)
    assert teardown_persist_sync(ctx, extras={"assistant_text": "wrote it"}) == "failed"
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert (row["status_reason_code"], row["exit_code"]) == ("run.failed.missing_artifact", 1)
    assert row["artifact_verification_json"]["status"] == "failed"
    assert [e["id"] for e in row["artifact_verification_json"]["missing_required"]] == ["report"]
    assert row["status_evidence_refs"][0] == {
        "kind": "artifact",
        "id": "report",
        "path": "out/report.md",
        "label": "missing",
    }


def test_produced_artifact_skips_the_evidence_gate(
    db_url: str, store: Store, run: RunDir, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = start(run, db_url, artifact_contract=REPORT, cwd=str(repo))
    (run.artifact_dir / "out").mkdir(parents=True)
    (run.artifact_dir / "out" / "report.md").write_text("# report\n", encoding="utf-8")
    assert teardown_persist_sync(ctx) == "completed"
    row = store.get_entity("session", run.run_id)
    assert row is not None
    verification = row["artifact_verification_json"]
    assert verification["status"] == "passed"
    assert verification["produced"][0]["id"] == "report"
    # the gate needed nothing more, but the record still says what the cwd saw
    assert [e["kind"] for e in row["status_evidence_refs"]] == ["git"]


def test_artifact_root_that_is_a_file_misses_everything(
    db_url: str, store: Store, tmp_path: Path
) -> None:
    not_a_dir = tmp_path / "artifacts"
    not_a_dir.write_text("oops", encoding="utf-8")
    run = allocate_run(save_dir=not_a_dir)
    contract = {
        "expected": [
            {"id": "a", "path": "a.md"},
            {"id": "b", "path": "b.md", "required": False},
        ]
    }
    ctx = start(run, db_url, artifact_contract=contract)
    assert teardown_persist_sync(ctx, extras={"assistant_output": True}) == "failed"
    verification = row_of(store, "session", run.run_id)["artifact_verification_json"]
    assert [e["id"] for e in verification["missing_required"]] == ["a"]
    assert [e["id"] for e in verification["missing_optional"]] == ["b"]
    assert verification["produced"] == []
    meta = last_transition(store, run.run_id).metadata
    assert meta["missing_optional_artifact_ids"] == ["b"]


def test_vanished_cwd_is_no_opinion(db_url: str, store: Store, run: RunDir, repo: Path) -> None:
    ctx = start(run, db_url, cwd=str(repo))
    shutil.rmtree(repo)
    assert teardown_persist_sync(ctx) == "completed"
    meta = last_transition(store, run.run_id).metadata
    assert meta["completion_evidence"]["checked"] is False


@pytest.mark.parametrize(
    ("exception", "reason"),
    [
        (ProviderRetryableError("429 rate limited", provider="claude"), "provider_retryable"),
        (ProviderNonRetryableError("bad request", provider="codex"), "provider_nonretryable"),
    ],
)
def test_classified_provider_errors(
    db_url: str, store: Store, run: RunDir, exception: ProviderError, reason: str
) -> None:
    ctx = start(run, db_url)
    status = teardown_persist_sync(
        ctx, status="failed", exception=exception, engine_session_uid="eng-9"
    )
    assert status == "failed"
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert row["status_reason_code"] == f"run.failed.{reason}"
    assert row["engine_session_uid"] == "eng-9"
    assert sleeps_of(ctx) == []  # a subclass is never reconciled


@pytest.mark.parametrize(
    ("status", "extras", "reason", "exit_code"),
    [
        ("failed", {"exit_code": 3}, "run.failed.exit_nonzero", 1),
        ("cancelled", {"signal": "SIGTERM"}, "run.cancelled.sigterm", 143),
        ("aborted", {"signal": "SIGINT"}, "run.cancelled.sigint", 130),
        ("timed_out", {"idle_timeout": True}, "run.timed_out.idle", 124),
        ("timed_out", {}, "run.timed_out.deadline", 124),
    ],
)
def test_base_reasons_and_exit_codes(
    db_url: str,
    store: Store,
    run: RunDir,
    status: str,
    extras: dict[str, Any],
    reason: str,
    exit_code: int,
) -> None:
    ctx = start(run, db_url)
    assert teardown_persist_sync(ctx, status=status, extras=extras) == status
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert (row["status"], row["status_reason_code"], row["exit_code"]) == (
        status,
        reason,
        exit_code,
    )
    if "exit_code" in extras:
        assert {"kind": "exit_code", "exit_code": 3} in row["status_evidence_refs"]


def test_escalation_fails_an_otherwise_completed_run(
    db_url: str, store: Store, run: RunDir
) -> None:
    ctx = start(run, db_url)
    escalation = [{"kind": "escalation", "id": "q-1", "label": "needs approval"}]
    status = teardown_persist_sync(
        ctx, extras={"assistant_text": "ok"}, escalated_evidence=escalation
    )
    assert status == "failed"
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert row["status_reason_code"] == "run.failed.escalated"
    assert row["status_evidence_refs"][0] == escalation[0]


# --- teardown: linked engine ----------------------------------------------------------------


def add_engine_row(db_url: str, status: str) -> None:
    with other_writer(db_url) as other:
        other.sessions.create(id="engine-row", engine_session_uid="eng-1")
        if status != "running":
            other.update_status(
                "session",
                "engine-row",
                new_status=status,
                reason_code="run.completed.ok" if status == "completed" else "run.failed.exception",
                evidence_refs=[{"kind": "commit", "ref": "abc123"}],
            )


def unclassified() -> ProviderError:
    return ProviderError("stream ended without a terminal event", provider="claude")


def test_linked_terminal_row_appearing_during_retries_wins(
    db_url: str, store: Store, run: RunDir
) -> None:
    ctx = start(run, db_url)
    ctx.sleep = Sleeps(on_call=2, action=lambda: add_engine_row(db_url, "completed"))
    status = teardown_persist_sync(
        ctx,
        status="failed",
        exception=unclassified(),
        engine_session_uid="eng-1",
        extras={"assistant_text": "done"},
    )
    assert status == "completed"
    assert sleeps_of(ctx) == [0.1, 0.1]
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert (row["status"], row["status_reason_code"]) == ("completed", "run.completed.ok")
    assert row["engine_session_uid"] == "eng-1"
    assert row["status_evidence_refs"][:2] == [
        {
            "kind": "linked_session",
            "id": "engine-row",
            "status": "completed",
            "engine_session_uid": "eng-1",
        },
        {"kind": "commit", "ref": "abc123"},
    ]


def test_linked_running_row_keeps_the_execution_running(
    db_url: str, store: Store, run: RunDir
) -> None:
    ctx = start(run, db_url)
    add_engine_row(db_url, "running")
    status = teardown_persist_sync(
        ctx, status="failed", exception=unclassified(), engine_session_uid="eng-1"
    )
    assert status == "running"
    assert sleeps_of(ctx) == []  # found on the first read
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert (row["status"], row["status_reason_code"]) == ("running", "run.running.linked_engine")
    assert row["ended_at"] is None
    assert row["exit_code"] is None


def test_linked_row_missing_leaves_the_failure(db_url: str, store: Store, run: RunDir) -> None:
    ctx = start(run, db_url)
    status = teardown_persist_sync(
        ctx, status="failed", exception=unclassified(), engine_session_uid="eng-1"
    )
    assert status == "failed"
    assert sleeps_of(ctx) == [0.1, 0.1, 0.1]
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert row["status_reason_code"] == "run.failed.provider_nonretryable"
    assert row["engine_session_uid"] == "eng-1"  # stored even though its row never appeared
    assert last_transition(store, run.run_id).metadata["linked_session"] is None


# --- teardown: deferral, races, failures ----------------------------------------------------


def test_defer_terminal_leaves_the_row_running(db_url: str, store: Store, run: RunDir) -> None:
    ctx = start(run, db_url)
    assert teardown_persist_sync(ctx, status="timed_out", defer_terminal=True) == "timed_out"
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert row["status"] == "running"
    assert row["ended_at"] is None
    assert len(store.list_transitions("session", run.run_id)) == 1
    assert not ctx.closed  # the resumed leg finalizes with the same context
    assert teardown_persist_sync(ctx, extras={"assistant_text": "resumed and done"}) == "completed"
    assert [t.status for t in store.list_transitions("session", run.run_id)] == [
        "running",
        "completed",
    ]


def test_lost_race_returns_the_persisted_winner(
    db_url: str,
    store: Store,
    run: RunDir,
    repo: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ctx = start(run, db_url, cwd=str(repo))

    def racing_probe(cwd: str | None, **kw: Any) -> Any:
        # The reaper finalizes the row while teardown is still gathering facts.
        assert finalize_as(db_url, run.run_id, "failed", "session.orphaned.no_process")
        return check_completion_evidence(cwd, **kw)

    monkeypatch.setattr(lirun.record.facts, "check_completion_evidence", racing_probe)
    with caplog.at_level(logging.DEBUG, logger="lirun.record.outcome_write"):  # lost quietly
        assert teardown_persist_sync(ctx) == "failed"
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert row["status_reason_code"] == "session.orphaned.no_process"
    # Teardown's guarded write did not land at all: the reaper's write stamped the end.
    assert (row["ended_at"], row["exit_code"]) == (row["updated_at"], 1)
    assert [t.status for t in store.list_transitions("session", run.run_id)] == [
        "running",
        "failed",
    ]
    assert "another writer" in caplog.text
    assert store.list_admin_events(run.run_id) == []  # the CAS guard, not a rejected write


def test_finalize_reports_the_winners_reason_and_its_own_decision(
    db_url: str, run: RunDir, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The caller learns the record's reason from teardown itself, with no second read."""
    ctx = start(run, db_url, cwd=str(repo))

    def racing_probe(cwd: str | None, **kw: Any) -> Any:
        assert finalize_as(db_url, run.run_id, "failed", "session.orphaned.no_process")
        return check_completion_evidence(cwd, **kw)

    monkeypatch.setattr(lirun.record.facts, "check_completion_evidence", racing_probe)
    done = finalize_sync(ctx)
    assert (done.status, done.reason_code) == ("failed", "session.orphaned.no_process")
    assert done.decided.reason_code.startswith("run.completed")  # computed, not written
    assert not done.already_terminal
    assert done.spool is None


def test_finalize_takes_typed_extras(db_url: str, store: Store, run: RunDir) -> None:
    ctx = start(run, db_url)
    done = finalize_sync(ctx, status="failed", extras=TeardownExtras(exit_code=3))
    assert (done.status, done.reason_code) == ("failed", "run.failed.exit_nonzero")
    assert done.decided.summary
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert row["status_reason_code"] == done.reason_code


def test_terminal_snapshot_skips_the_write(
    db_url: str, store: Store, run: RunDir, caplog: pytest.LogCaptureFixture
) -> None:
    ctx = start(run, db_url, artifact_contract=REPORT)
    assert finalize_as(db_url, run.run_id, "failed", "session.stale.no_heartbeat")
    with caplog.at_level(logging.WARNING, logger="lirun.record.teardown"):
        status = teardown_persist_sync(ctx, status="timed_out")
    assert status == "timed_out"  # this invocation's verdict, reported but not written
    assert "already failed" in caplog.text
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert (row["status"], row["status_reason_code"]) == ("failed", "session.stale.no_heartbeat")
    assert row["artifact_verification_json"] is None
    assert (row["exit_code"], row["ended_at"]) == (1, row["updated_at"])  # failed's, not 124
    assert len(store.list_transitions("session", run.run_id)) == 2
    assert ctx.snapshot_status == "failed"


class UnguardedStore(Store):
    """A store whose status write ignores the CAS guard, after a rival finalizes the row.

    The storage-level terminal guard must then reject the write; teardown reads the winner.
    """

    db_url = ""

    def update_status(self, entity_type: str, entity_id: str, **kw: Any) -> bool:
        finalize_as(self.db_url, entity_id, "cancelled", "run.cancelled.admin")
        kw["expected_statuses"] = None
        return super().update_status(entity_type, entity_id, **kw)


def test_transition_rejected_returns_the_persisted_winner(
    db_url: str, store: Store, run: RunDir
) -> None:
    ctx = start(run, db_url)
    ctx.store = UnguardedStore(ctx.store.connector)
    ctx.store.db_url = db_url
    assert teardown_persist_sync(ctx, extras={"assistant_output": True}) == "cancelled"
    events = store.list_admin_events(run.run_id)
    assert [e.event_type for e in events] == ["status_transition_rejected"]
    assert row_of(store, "session", run.run_id)["status"] == "cancelled"


def test_a_write_that_cannot_land_is_spooled_then_applied(
    db_url: str,
    store: Store,
    run: RunDir,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lirun.record.spool import PENDING_FILE, apply_pending, pending_files

    ctx = start(run, db_url)
    monkeypatch.setenv("LIRUN_WRITE_RETRY_SECONDS", "0.3")  # after setup: it had no fault
    ctx.store.close()  # the database handle dies under teardown
    with caplog.at_level(logging.WARNING, logger="lirun.record.teardown"):
        assert teardown_persist_sync(ctx, status="timed_out") == "timed_out"
    assert "the outcome is spooled" in caplog.text
    assert row_of(store, "session", run.run_id)["status"] == "running"
    assert ctx.closed
    [entry] = pending_files(db_url)
    assert (run.state_root / PENDING_FILE).is_file()
    assert oct(entry.stat().st_mode & 0o777) == "0o600"
    assert apply_pending(store) == [(run.run_id, "write")]
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert row["status"] == "timed_out"
    assert row["exit_code"] == 124
    assert row["status_reason_code"] == "run.timed_out.deadline"
    assert pending_files(db_url) == []
    assert not (run.state_root / PENDING_FILE).exists()
    assert apply_pending(store) == []  # idempotent: nothing left


def test_unknown_extras_are_ignored_with_a_warning(
    db_url: str, store: Store, run: RunDir, caplog: pytest.LogCaptureFixture
) -> None:
    ctx = start(run, db_url)
    with caplog.at_level(logging.WARNING, logger="lirun.record.facts"):
        status = teardown_persist_sync(
            ctx, status="failed", extras={"exit_code": "3", "colour": "blue"}
        )
    assert status == "failed"
    assert "colour" in caplog.text
    assert "exit_code" in caplog.text
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert row["status_reason_code"] == "run.failed.exception"


def test_second_teardown_is_a_no_op(
    db_url: str, store: Store, run: RunDir, caplog: pytest.LogCaptureFixture
) -> None:
    ctx = start(run, db_url)
    assert teardown_persist_sync(ctx, extras={"assistant_output": True}) == "completed"
    with caplog.at_level(logging.WARNING, logger="lirun.record.teardown"):
        assert teardown_persist_sync(ctx, status="failed") == "failed"
    assert "already finalized" in caplog.text
    assert [t.status for t in store.list_transitions("session", run.run_id)] == [
        "running",
        "completed",
    ]


def test_unknown_contract_fields_warn_but_are_kept(
    db_url: str, store: Store, run: RunDir, caplog: pytest.LogCaptureFixture
) -> None:
    contract = {"expected": [{"id": "r", "path": "r.md", "mime": "text/markdown"}]}
    with caplog.at_level(logging.WARNING, logger="lirun.record.teardown"):
        ctx = start(run, db_url, artifact_contract=contract)
    assert "unknown field 'mime'" in caplog.text
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert row["artifact_contract_json"] == contract
    ctx.close()


# --- evidence since the run's own start (docs/outcome.md) -----------------------------------


def outcome_of(store: Store, run: RunDir) -> tuple[str, str]:
    row = store.get_entity("session", run.run_id)
    assert row is not None
    return row["status"], row["status_reason_code"]


def test_the_start_snapshot_is_written_to_run_json(
    db_url: str, store: Store, run: RunDir, repo: Path
) -> None:
    ctx = start(run, db_url, cwd=str(repo))
    snap = run.read_manifest()["start_snapshot"]
    assert snap == ctx.start_snapshot
    assert (snap["checked"], snap["scope"], snap["branch"]) == (True, "git", "main")
    assert snap["head"] == git(repo, "rev-parse", "HEAD")
    ctx.close()


@pytest.mark.parametrize("before", ["dirty tree", "untracked file", "unpushed commit"])
def test_work_done_before_the_start_does_not_count(
    db_url: str, store: Store, run: RunDir, repo: Path, before: str
) -> None:
    if before == "dirty tree":
        (repo / "base.txt").write_text("edited earlier", encoding="utf-8")
    elif before == "untracked file":
        (repo / "notes.txt").write_text("earlier", encoding="utf-8")
    else:
        git(repo, "checkout", "-q", "-b", "feature")
        (repo / "f.txt").write_text("f", encoding="utf-8")
        git(repo, "add", "f.txt")
        git(repo, "commit", "-q", "-m", "earlier")
    ctx = start(run, db_url, cwd=str(repo))
    assert teardown_persist_sync(ctx) == "completed_empty"
    assert outcome_of(store, run) == ("completed_empty", "run.completed_empty.no_evidence")
    meta = last_transition(store, run.run_id).metadata
    assert meta["completion_evidence"]["changed"] is False
    assert meta["start_snapshot"]["checked"] is True


def test_a_commit_on_the_only_branch_during_the_run_counts(
    db_url: str, store: Store, run: RunDir, tmp_path: Path
) -> None:
    repo = tmp_path / "trunk-only"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "trunk")
    (repo / "a.txt").write_text("a", encoding="utf-8")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "a")
    ctx = start(run, db_url, cwd=str(repo))
    (repo / "b.txt").write_text("b", encoding="utf-8")
    git(repo, "add", "b.txt")
    git(repo, "commit", "-q", "-m", "work")
    assert teardown_persist_sync(ctx) == "completed"
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert row["status_reason_code"] == "run.completed.ok"
    (git_ev,) = [e for e in row["status_evidence_refs"] if e["kind"] == "git"]
    assert git_ev["commits_since_start"] == 1
    assert git_ev["changed"] is True
    sha = git(repo, "rev-parse", "--short", "HEAD").strip()
    assert row["status_reason_summary"] == f"completed: 1 commit ({sha}), 1 file changed"


@pytest.mark.parametrize(("work", "status"), [(False, "completed_empty"), (True, "completed")])
def test_outside_git_a_silent_run_needs_a_change(
    db_url: str, store: Store, run: RunDir, tmp_path: Path, work: bool, status: str
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "input.txt").write_text("in", encoding="utf-8")
    ctx = start(run, db_url, cwd=str(plain))
    if work:
        (plain / "output.txt").write_text("out", encoding="utf-8")
    assert teardown_persist_sync(ctx) == status
    row = store.get_entity("session", run.run_id)
    assert row is not None
    kinds = [e["kind"] for e in row["status_evidence_refs"]]
    assert kinds == ["cwd"]
    reason = "run.completed.ok" if work else "run.completed_empty.no_evidence"
    assert row["status_reason_code"] == reason


def test_every_tool_call_denied_is_its_own_empty(
    db_url: str, store: Store, run: RunDir, repo: Path
) -> None:
    ctx = start(run, db_url, cwd=str(repo))
    extras = {
        "assistant_text": "I need permission to write.",
        "tool_calls": 2,
        "permission_denials": 2,
    }
    assert teardown_persist_sync(ctx, extras=extras) == "completed_empty"
    assert outcome_of(store, run) == ("completed_empty", "run.completed_empty.permission_denied")


def test_no_tool_call_and_no_reply_is_its_own_empty(
    db_url: str, store: Store, run: RunDir, repo: Path
) -> None:
    ctx = start(run, db_url, cwd=str(repo))
    extras = {"tool_calls": 0, "permission_denials": 0}
    assert teardown_persist_sync(ctx, extras=extras) == "completed_empty"
    assert outcome_of(store, run) == ("completed_empty", "run.completed_empty.no_activity")


def test_require_change_does_not_count_the_reply(
    db_url: str, store: Store, run: RunDir, repo: Path
) -> None:
    ctx = start(run, db_url, cwd=str(repo))
    store.sessions.append_message(run.run_id, role="assistant", content="3 passed")
    assert teardown_persist_sync(ctx, extras={"require_change": True}) == "completed_empty"
    assert outcome_of(store, run) == ("completed_empty", "run.completed_empty.no_evidence")


def test_without_the_command_mark_a_clean_exit_0_keeps_the_adrs_gate(
    db_url: str, store: Store, run: RunDir, repo: Path
) -> None:
    """The library contract: ``teardown_persist`` of an execution not marked as a command,
    a clean exit with no reply, change or artifact, is completed_empty (design.md D4 step 7),
    even with its exit code 0 given."""
    ctx = start(run, db_url, cwd=str(repo))
    assert teardown_persist_sync(ctx, extras={"exit_code": 0}) == "completed_empty"
    assert outcome_of(store, run) == ("completed_empty", "run.completed_empty.no_evidence")


def test_a_command_marked_as_one_that_exited_0_is_completed_by_its_exit_code(
    db_url: str, store: Store, run: RunDir, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = start(run, db_url, cwd=str(repo))
    extras = {"command": True, "exit_code": 0}
    assert teardown_persist_sync(ctx, extras=extras) == "completed"
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert (row["status_reason_code"], row["exit_code"]) == ("run.completed.ok", 0)
    assert row["status_reason_summary"] == "completed: command exited 0"
    # its exit code decides; what the cwd's comparison saw is recorded after it
    exit_code, cwd = row["status_evidence_refs"]
    assert exit_code == {"kind": "exit_code", "exit_code": 0, "label": "command exited 0"}
    assert (cwd["kind"], cwd["changed"], cwd["files_changed"]) == ("git", False, 0)


def test_a_command_that_asks_for_a_change_and_made_none_is_completed_empty(
    db_url: str, store: Store, run: RunDir, repo: Path
) -> None:
    ctx = start(run, db_url, cwd=str(repo))
    store.sessions.append_message(
        run.run_id, role="assistant", content="3 passed"
    )  # never evidence
    extras = {"command": True, "exit_code": 0, "require_change": True}
    assert teardown_persist_sync(ctx, extras=extras) == "completed_empty"
    assert outcome_of(store, run) == ("completed_empty", "run.completed_empty.no_evidence")


def test_the_command_mark_is_parsed_leniently() -> None:
    assert TeardownExtras.parse({"command": True}).command is True
    assert TeardownExtras.parse({}).command is False


def test_unchecked_evidence_is_never_claimed_as_work(
    db_url: str, store: Store, run: RunDir, repo: Path
) -> None:
    ctx = start(run, db_url, cwd=str(repo))
    shutil.rmtree(repo)
    assert teardown_persist_sync(ctx) == "completed"
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert "no evidence of work was seen" in row["status_reason_summary"]
    assert "does not exist" in row["status_reason_summary"]


# --- linked engine: never another execution's verdict (docs/outcome.md §4) ----------------------


def earlier_execution(db_url: str, status: str, summary: str = "") -> str:
    """R1: another execution of the same conversation (its own run dir), in ``status``."""
    other_run = allocate_run()
    with other_writer(db_url) as other:
        ctx = setup_persist_sync(other_run, db=other, engine_session_uid="eng-1")
        assert ctx is not None
        if status != "running":
            reason = {
                "completed": "run.completed.ok",
                "failed": "run.failed.provider_retryable",
            }[status]
            assert other.update_status(
                "session",
                other_run.run_id,
                new_status=status,
                reason_code=reason,
                reason_summary=summary,
            )
    return other_run.run_id


@pytest.mark.parametrize(
    ("theirs", "summary"),
    [("completed", ""), ("running", ""), ("failed", "API Error: 529 overloaded")],
)
def test_a_crash_never_borrows_another_executions_verdict(
    db_url: str, store: Store, run: RunDir, theirs: str, summary: str
) -> None:
    r1 = earlier_execution(db_url, theirs, summary)
    ctx = start(run, db_url)
    status = teardown_persist_sync(
        ctx,
        status="failed",
        exception=unclassified(),
        engine_session_uid="eng-1",
        extras={"assistant_text": "half an answer"},
    )
    assert status == "failed"
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert row["status_reason_code"] == "run.failed.provider_nonretryable"
    assert "529" not in row["status_reason_summary"]
    assert row["engine_session_uid"] == "eng-1"
    meta = last_transition(store, run.run_id).metadata
    assert meta["linked_session"] is None
    assert meta["linked_session_ignored"] == {"id": r1, "why": "another execution's record"}
    assert sleeps_of(ctx) == [0.1, 0.1, 0.1]  # a mirror may still lag: the bounded wait stays
    assert row_of(store, "session", r1)["status"] == theirs


def test_lis_own_files_inside_the_cwd_are_not_work(
    db_url: str, store: Store, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = repo / ".lirun"
    monkeypatch.setenv("LIRUN_HOME", str(home))
    run = allocate_run()
    ctx = start(run, db_url, cwd=str(repo))
    (run.stream_dir / "stdout.log").write_text("noise\n", encoding="utf-8")
    (home / "state.db").write_bytes(b"another run's bookkeeping")
    assert teardown_persist_sync(ctx) == "completed_empty"
    assert ctx.start_snapshot is not None
    assert sorted(ctx.start_snapshot["excluded"]) == sorted([str(run.state_root), str(home)])


def test_async_twins_keep_the_sync_signature() -> None:
    import inspect

    for twin, core in (
        (setup_persist, setup_persist_sync),
        (teardown_persist, teardown_persist_sync),
    ):
        assert inspect.iscoroutinefunction(twin)
        assert inspect.signature(twin) == inspect.signature(core)
        assert twin.__name__ == core.__name__.removesuffix("_sync")

"""``lirun.Client`` / ``AsyncClient`` as a user's program drives them, on both backends:
real commands, an agent (the fake provider replaying a recorded stream), the records
read back, waits, and the errors a caller can cause."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from lirun import AsyncClient, Client, Run, RunStatus, WaitOutcome
from lirun.client import Queued, Started
from lirun.errors import AmbiguousIdError, ConflictError, NotFoundError, UsageError
from lirun.settings import Settings, provider_bin_env
from support.cli import li_command
from support.gitkit import make_repo
from support.providerkit import fake_env_for, make_fake_bin_dir
from support.workerkit import workers


@pytest.fixture
def settings(lirun_home: Path) -> Settings:
    """Given explicitly, as a program that does not want the environment's would."""
    return Settings(write_retry_seconds=5.0)


@pytest.fixture
def client(db_url: str, settings: Settings) -> Client:
    with Client(db_url, settings=settings) as made:
        yield made


def li_status_json(db_url: str, home: Path, run_id: str) -> dict[str, object]:
    env = {**os.environ, "LIRUN_DB_URL": db_url, "LIRUN_HOME": str(home)}
    out = subprocess.run(
        li_command("status", run_id, "--json"),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    parsed: dict[str, object] = json.loads(out.stdout)
    return parsed


def test_a_command_run_is_a_typed_record_equal_to_li_status_json(
    client: Client, db_url: str, lirun_home: Path, tmp_path: Path
) -> None:
    run = client.run(["sh", "-c", "echo made; exit 0"], cwd=tmp_path)
    assert isinstance(run, Run)
    assert run.status is RunStatus.COMPLETED
    assert run.status == "completed"
    assert run.success
    assert run.terminal
    assert run.kind == "command"
    assert (run.reason, run.exit_code, run.child_exit_code) == ("run.completed.ok", 0, 0)
    assert run.command == ("sh", "-c", "echo made; exit 0")
    assert run.output == "made\n"
    assert run.reply is None
    assert run.cwd == str(tmp_path)
    assert run.duration is not None
    assert run.duration >= 0
    assert run.artifact_dir
    assert run.run_dir
    assert Path(run.run_dir).is_dir()
    assert run.as_dict() == li_status_json(db_url, lirun_home, run.id)
    assert run.as_dict()["schema"] == "lirun.record/2"
    assert client.status(run.id) == run  # the same record read again


def test_a_failing_command_is_a_status_not_an_exception(client: Client, tmp_path: Path) -> None:
    run = client.run(["sh", "-c", "echo broken >&2; exit 3"], cwd=tmp_path, env={"X": "1"})
    assert run.status is RunStatus.FAILED
    assert not run.success
    assert run.child_exit_code == 3
    assert run.exit_code == 1
    assert run.reason
    assert run.reason.startswith("run.failed.")


def test_env_reaches_the_command_and_a_timeout_stops_it(client: Client, tmp_path: Path) -> None:
    seen = client.run(["sh", "-c", 'printf %s "$GREETING"'], cwd=tmp_path, env={"GREETING": "hi"})
    assert seen.output == "hi"
    slow = client.run(["sleep", "30"], cwd=tmp_path, timeout=0.5)
    assert slow.status is RunStatus.TIMED_OUT
    assert slow.exit_code == 124


def test_an_agent_run_with_the_fake_provider(
    db_url: str, lirun_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = make_fake_bin_dir(tmp_path / "bin") / "claude"
    argv_log = tmp_path / "argv.log"
    for name, value in fake_env_for("claude/success.jsonl", base={}, argv_log=argv_log).items():
        monkeypatch.setenv(name, value)  # what the fake replays: read by the child only
    settings = Settings(provider_bins=((provider_bin_env("claude"), str(fake)),))
    repo = make_repo(tmp_path / "repo")
    with Client(db_url, settings=settings) as client:
        run = client.agent("claude", "fix the test", model="sonnet", cwd=repo, timeout=60)
        assert isinstance(run, Run)
        assert (run.status, run.reason) == (RunStatus.COMPLETED, "run.completed.ok")
        assert (run.provider, run.kind) == ("claude", "agent")
        assert run.model == "claude-sonnet-4-5"  # what the provider said it ran
        assert "sonnet" in argv_log.read_text()  # what it was asked for
        assert run.reply == "Done: test fixed."
        assert run.output is None
        assert (run.usage.input_tokens, run.usage.output_tokens) == (20, 40)
        assert run.engine_session_uid == "11111111-1111-4111-8111-111111111111"
        assert run.branch_id is not None
        assert run.as_dict() == li_status_json(db_url, lirun_home, run.id)
        limited = client.agent("claude", "go", cwd=repo, provider_options={"max_turns": 3})
        assert limited.status is RunStatus.COMPLETED
        assert "--max-turns" in argv_log.read_text()  # the option reached the provider
        with pytest.raises(UsageError, match="no prompt"):
            client.agent("claude", "  ", cwd=repo)
        with pytest.raises(UsageError, match="model="):
            client.agent("claude/sonnet", "hi", cwd=repo)
        assert [r.id for r in client.runs()] == [limited.id, run.id]  # refusals record nothing

        with pytest.raises(UsageError, match="from a profile"):
            client.agent("claude", "hi", cwd=repo, provider_options={"max_turns": 3}, detach=True)
        started = client.agent("claude", "fix it -- in the background", cwd=repo, detach=True)
        assert isinstance(started, Started)
        [outcome] = client.wait(started.run_id, timeout=60)
        assert outcome.status == "completed"
        detached = client.status(started.run_id)
        assert detached.reply == "Done: test fixed."
        assert detached.provider == "claude"
        assert "fix it -- in the background" in argv_log.read_text()  # via the worker's stdin


def test_runs_filter_by_status_kind_and_time_newest_first(client: Client, tmp_path: Path) -> None:
    ok = client.run(["true"], cwd=tmp_path)
    bad = client.run(["false"], cwd=tmp_path)
    newest = client.run(["true"], cwd=tmp_path)
    assert [r.id for r in client.runs()] == [newest.id, bad.id, ok.id]
    assert [r.id for r in client.runs(status=RunStatus.FAILED)] == [bad.id]
    assert [r.id for r in client.runs(status="completed", limit=1)] == [newest.id]
    assert [r.id for r in client.runs(kind="command", limit=2)] == [newest.id, bad.id]
    assert client.runs(kind="agent") == []
    assert len(client.runs(since=3600)) == 3
    for bad_filter in ({"status": "done"}, {"kind": "flow"}, {"limit": 0}, {"since": -1}):
        with pytest.raises(UsageError):
            client.runs(**bad_filter)


def test_wait_reports_as_li_wait_does_in_finish_order(client: Client, tmp_path: Path) -> None:
    slow = client.run(["sleep", "30"], cwd=tmp_path, timeout=1.5, detach=True)
    assert isinstance(slow, Started)
    assert client.status(slow.run_id).status is RunStatus.RUNNING
    done = client.run(["true"], cwd=tmp_path)
    assert isinstance(done, Run)

    early = client.wait([slow.run_id, done.id], timeout=0.3)
    assert [(o.run_id, o.status, o.terminal) for o in early] == [
        (done.id, "completed", True),
        (slow.run_id, "running", False),
    ]
    first = early[0]
    assert isinstance(first, WaitOutcome)
    assert first.success
    assert first.exit_code == 0
    assert first.line.startswith(f"{done.id}\tstatus=completed\treason=run.completed.ok")
    assert first.as_dict()["schema"] == "lirun.wait/2"

    [ended] = list(client.iter_wait(slow.run_id[-6:], timeout=60))
    assert (ended.run_id, ended.status, ended.terminal) == (slow.run_id, "timed_out", True)
    assert ended.exit_code == 124
    assert ended.artifact_dir == slow.artifact_dir
    assert client.status(slow.run_id).status is RunStatus.TIMED_OUT


def test_a_detached_run_gets_the_clients_settings_and_env(
    client: Client, tmp_path: Path, lirun_home: Path
) -> None:
    started = client.run(
        ["sh", "-c", 'printf %s "$GREETING" > "$LIRUN_ARTIFACT_DIR/out.txt"'],
        cwd=tmp_path,
        env={"GREETING": "from afar"},
        artifacts=[{"id": "out", "path": "out.txt", "required": True}],
        detach=True,
    )
    assert isinstance(started, Started)
    assert started.run_dir.startswith(str(lirun_home))
    [outcome] = client.wait(started.run_id, timeout=60)
    assert outcome.status == "completed", client.status(started.run_id).summary
    assert (Path(started.artifact_dir) / "out.txt").read_text() == "from afar"


def test_submit_queues_a_run_that_a_worker_runs(
    client: Client, db_url: str, lirun_home: Path, tmp_path: Path
) -> None:
    queued = client.submit(["run", "sh", "-c", "echo queued"], key="nightly-1", cwd=tmp_path)
    assert isinstance(queued, Queued)
    assert (queued.status, queued.created) == ("queued", True)
    again = client.submit(["run", "sh", "-c", "echo queued"], key="nightly-1", cwd=tmp_path)
    assert (again.run_id, again.created) == (queued.run_id, False)
    with pytest.raises(ConflictError):
        client.submit(["run", "false"], key="nightly-1", cwd=tmp_path)
    with pytest.raises(UsageError, match="unknown action"):
        client.submit(["nap", "10"])
    [waiting] = client.wait(queued.run_id, timeout=0.1)
    assert (waiting.kind, waiting.status, waiting.terminal) == ("schedule_run", "queued", False)

    env = {**os.environ, "LIRUN_DB_URL": db_url, "LIRUN_HOME": str(lirun_home)}
    with workers(env, tmp_path):
        [ended] = client.wait(queued.run_id, timeout=60)
    assert (ended.status, ended.success) == ("completed", True)


def test_errors_are_typed_and_record_nothing(client: Client, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="no execution or record"):
        client.status("no-such-run")
    with pytest.raises(UsageError, match="argv is empty"):
        client.run([], cwd=tmp_path)
    with pytest.raises(UsageError, match="not found on PATH"):
        client.run(["no-such-program-31"], cwd=tmp_path)
    with pytest.raises(UsageError, match="not a directory"):
        client.run(["true"], cwd=tmp_path / "missing")
    with pytest.raises(UsageError, match="id, path and required"):
        client.run(
            ["true"],
            cwd=tmp_path,
            artifacts=[{"id": "a", "path": "a", "description": "d"}],
            detach=True,
        )
    assert client.runs() == []  # nothing was recorded
    first = client.run(["true"], cwd=tmp_path)
    second = client.run(["true"], cwd=tmp_path)
    day = first.id[:8]  # a run id starts with its date
    assert second.id.startswith(day)
    with pytest.raises(AmbiguousIdError):
        client.status(day)
    assert [r.status for r in client.runs()] == [RunStatus.COMPLETED] * 2
    [missing] = client.wait("no-such-run", timeout=1)
    assert (missing.status, missing.terminal) == ("not_found", False)


def test_client_reads_the_environment_once(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LIRUN_DB_URL", db_url)
    client = Client()
    monkeypatch.setenv("LIRUN_DB_URL", str(tmp_path / "elsewhere.db"))
    with client:
        run = client.run(["true"], cwd=tmp_path)
        assert client.db_url == db_url
    with Client(db_url, settings=Settings()) as other:
        assert other.status(run.id) == run
    assert not (tmp_path / "elsewhere.db").exists()


def test_the_async_client_awaits_the_same_methods(
    db_url: str, settings: Settings, tmp_path: Path
) -> None:
    async def main() -> tuple[Run, list[Run], list[WaitOutcome], list[WaitOutcome]]:
        async with AsyncClient(db_url, settings=settings) as lirun:
            run = await lirun.run(["sh", "-c", "echo async"], cwd=tmp_path)
            assert isinstance(run, Run)
            assert await lirun.status(run.id) == run
            listed = await lirun.runs(status="completed")
            waited = await lirun.wait([run.id], timeout=10)
            slow = await lirun.run(["sleep", "30"], cwd=tmp_path, timeout=1, detach=True)
            assert isinstance(slow, Started)
            seen = [o async for o in lirun.iter_wait(slow.run_id, timeout=0.2)]
            return run, listed, waited, seen

    run, listed, waited, seen = asyncio.run(main())
    assert run.output == "async\n"
    assert listed == [run]
    assert [(o.run_id, o.status) for o in waited] == [(run.id, "completed")]
    assert [(o.status, o.terminal) for o in seen] == [("running", False)]
    with Client(db_url, settings=settings) as client:  # the detached run still ends
        [ended] = client.wait(seen[0].run_id, timeout=60)
        assert ended.status == "timed_out"

"""``Client.flow``, ``show``, ``team`` and ``override`` (and their AsyncClient twins) on
both backends: what they return is what the matching ``li`` command prints with
``--json``, and every input they refuse leaves the database as it was."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lirun import AsyncClient, Client, FlowResult, Overridden, RunStatus, ShowResult, ShowStatus
from lirun.client import Message, Started, Team
from lirun.errors import (
    ConflictError,
    NotFoundError,
    RecordChangedError,
    UsageError,
    ValidationError,
)
from lirun.settings import Settings
from lirun.store import Store
from lirun.teams.rules import TeamArchivedError
from support.cli import li_command
from support.gitkit import GIT_ENV, git
from support.showfilekit import COMMAND_SHOW, write_show

FLOW = """
vars: {who: nobody}
legs:
  - id: a
    run: [echo, "hello {{ vars.who }}"]
  - id: b
    depends_on: [a]
    run: [sh, -c, "echo got-{{ legs.a.reply | trim }}"]
  - id: c
    depends_on: [a]
    run: [sh, -c, "exit 4"]
  - id: d
    depends_on: [c]
    run: [echo, never]
"""


@pytest.fixture
def client(db_url: str, lirun_home: Path) -> Iterator[Client]:
    with Client(db_url, settings=Settings(write_retry_seconds=5.0)) as made:
        yield made


def write(directory: Path, text: str, name: str = "flow.yaml") -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def li_json(db_url: str, home: Path, *argv: str) -> Any:
    """What ``li ARGV`` prints: one JSON document, or one a line (a list of them)."""
    env = {**os.environ, "LIRUN_DB_URL": db_url, "LIRUN_HOME": str(home)}
    out = subprocess.run(li_command(*argv), env=env, capture_output=True, text=True, timeout=120)
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    return lines[0] if len(lines) == 1 else lines


def everything(store: Store, kind: str, ident: str) -> tuple[Any, ...]:
    """What a refused call must not change: the row, its history, its audit events."""
    return (
        store.get_entity(kind, ident),
        store.list_transitions(kind, ident),
        store.list_admin_events(ident),
    )


# -- flow ----------------------------------------------------------------------------------


def test_a_flow_runs_to_a_typed_result_with_its_legs_as_runs(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db_url: str, lirun_home: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    result = client.flow(write(tmp_path, FLOW), {"who": "world"})
    assert isinstance(result, FlowResult)
    assert result.status is RunStatus.FAILED
    assert not result.success
    assert result.exit_code == 1
    assert result.reason == "run.failed.leg"
    assert list(result.legs) == ["a", "b", "c"]
    assert result.not_run == ("d",)
    assert result.legs["a"].output == "hello world\n"
    assert result.legs["b"].output == "got-hello world\n"
    assert result.legs["c"].status is RunStatus.FAILED
    assert all(run.invocation_id == result.invocation_id for run in result.legs.values())
    status = li_json(db_url, lirun_home, "status", result.invocation_id, "--json")
    assert (status["kind"], status["status"]) == ("invocation", "failed")
    assert result.as_dict()["schema"] == "lirun.flow_result/1"
    assert [leg["id"] for leg in result.as_dict()["legs"]] == ["a", "b", "c", "d"]


def test_a_detached_flow_returns_its_invocation_once_started(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    started = client.flow(write(tmp_path, "legs: [{id: only, run: [echo, hi]}]\n"), detach=True)
    assert isinstance(started, Started)
    [outcome] = client.wait(started.run_id, timeout=60)
    assert (outcome.kind, outcome.status) == ("invocation", "completed")


def test_a_flow_file_that_is_missing_or_broken_records_nothing(
    client: Client, tmp_path: Path
) -> None:
    with pytest.raises(UsageError, match=r"nope\.yaml"):
        client.flow(tmp_path / "nope.yaml")
    broken = write(tmp_path, "legs:\n  - id: a\n    run: [echo]\n    isolation: maybe\n")
    with pytest.raises(UsageError, match=r"flow\.yaml:\d+"):
        client.flow(broken)
    with pytest.raises(UsageError, match="declares no variable"):
        client.flow(write(tmp_path, FLOW, "f2.yaml"), {"nobody": "x"})
    assert client.store.lists.flows() == []
    assert client.runs() == []


# -- show ----------------------------------------------------------------------------------


def test_a_show_runs_to_a_typed_result_with_its_plays(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    path = write_show(tmp_path, COMMAND_SHOW.format(topic="cl"))
    result = client.show(path)
    assert isinstance(result, ShowResult)
    assert result.status is ShowStatus.COMPLETED
    assert result.status.terminal
    assert result.exit_code == 0
    assert [p.name for p in result.plays] == ["one", "two", "three"]
    assert all(p.merged and p.merge_sha and p.runs for p in result.plays)
    assert client.status(result.plays[0].runs[0]).status is RunStatus.COMPLETED
    assert result.needs_person == ()
    assert result.as_dict()["schema"] == "lirun.show_report/1"
    assert "three.txt" in git(tmp_path / "repo", "ls-tree", "--name-only", "show/cl")


def test_a_show_file_with_problems_records_nothing(client: Client, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"nope\.yaml"):
        client.show(tmp_path / "nope.yaml")
    path = write_show(tmp_path, "topic: t\nrepo: repo\nplays: []\n")
    with pytest.raises(UsageError):
        client.show(path)
    assert client.store.lists.shows() == []


# -- team ----------------------------------------------------------------------------------


def test_a_team_handle_sends_reads_and_lists_as_li_team_does(
    client: Client, db_url: str, lirun_home: Path
) -> None:
    client.store.teams.create_with_members("crew", ["ann", "bob"])
    team = client.team("crew")
    assert isinstance(team, Team)
    assert team.name == "crew"
    sent = team.send("bob", "the tests pass\x1b[2J", sender="ann")
    assert isinstance(sent, Message)
    assert (sent.sender, sent.recipient, sent.text, sent.seq) == (
        "ann", "bob", "the tests pass\x1b[2J", 1,
    )  # fmt: skip
    assert "\x1b" not in sent.line  # shown escaped, kept as sent
    team.send("all", "done", sender="bob")
    [got] = team.inbox("bob")  # not what bob sent himself
    assert got == sent
    assert [m.text for m in team.inbox("ann")] == ["done"]
    assert team.inbox("bob", unread=True) == []  # reading marked them read
    assert [m.text for m in team.log(since=sent.id)] == ["done"]
    assert [(m.name, m.sent) for m in team.members()] == [("ann", 1), ("bob", 1)]
    lines = li_json(db_url, lirun_home, "team", "log", team.id, "--json")
    assert lines == [m.as_dict() for m in team.log()]
    assert lines[0]["schema"] == "lirun.team_message/1"


def test_team_errors_are_typed_and_write_nothing(client: Client) -> None:
    with pytest.raises(NotFoundError):
        client.team("nobody-here")
    made = client.store.teams.create_with_members("crew", ["ann"])
    team = client.team(made.id[:8])
    before = everything(client.store, "team", team.id)
    with pytest.raises(UsageError, match="no member 'ghost'"):
        team.send("ghost", "hi", sender="ann")
    with pytest.raises(UsageError, match="LIRUN_MEMBER"):
        team.send("all", "hi")  # no sender given and none in the settings
    with pytest.raises(UsageError):
        team.send("all", "", sender="ann")
    assert everything(client.store, "team", team.id) == before
    assert team.log() == []
    client.store.update_status(
        "team", team.id, new_status="archived", reason_code="team.archived.operator",
        source="admin", actor="t", expected_statuses=["active"],
    )  # fmt: skip
    with pytest.raises(TeamArchivedError):
        team.send("all", "late", sender="ann")
    assert team.log() == []


# -- override ------------------------------------------------------------------------------


def test_override_repairs_a_run_as_li_override_does(client: Client, tmp_path: Path) -> None:
    run = client.run(["sh", "-c", "exit 2"], cwd=tmp_path)
    done = client.override(
        run.id[-6:], "completed", reason="run.completed.admin",
        justification="checked by hand", actor="alice",
    )  # fmt: skip
    assert isinstance(done, Overridden)
    assert (done.entity, done.id, done.previous_status, done.status) == (
        "session", run.id, "failed", "completed",
    )  # fmt: skip
    assert done.as_dict()["schema"] == "lirun.override/1"
    assert done.as_dict()["status_reason_code"] == "run.completed.admin"
    after = client.status(run.id)
    assert (after.status, after.exit_code) == (RunStatus.COMPLETED, 0)
    [event] = client.store.list_admin_events(run.id)
    assert (event.event_type, event.actor, event.justification) == (
        "status_transition_override", "alice", "checked by hand",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"status": "merged"}, ValidationError),
        ({"status": "running"}, ValidationError),  # running needs no reason: it is a repair
        ({"reason": "run.made.up"}, ValidationError),
        ({"reason": "play.merged.ok"}, ValidationError),
        ({"justification": "  "}, UsageError),
        ({"actor": ""}, UsageError),
        ({"id": "no-such-run"}, NotFoundError),
        ({"entity": "gadget"}, ValidationError),
    ],
)
def test_a_refused_override_is_typed_and_writes_nothing(
    client: Client, store: Store, change: dict[str, str], error: type[Exception]
) -> None:
    store.sessions.create(id="run-1")
    store.update_status("session", "run-1", new_status="failed", reason_code="run.failed.exception")
    before = everything(store, "session", "run-1")
    call = {
        "id": "run-1", "status": "completed", "reason": "run.completed.admin",
        "justification": "why", "actor": "who", **change,
    }  # fmt: skip
    with pytest.raises(error):
        client.override(**call)
    assert everything(store, "session", "run-1") == before


def test_a_run_that_still_runs_is_its_owners_to_end(client: Client, store: Store) -> None:
    store.sessions.create(id="live-1")
    before = everything(store, "session", "live-1")
    with pytest.raises(ConflictError, match="still running"):
        client.override("live-1", "failed", reason="run.failed.admin", justification="j", actor="a")
    assert everything(store, "session", "live-1") == before


def test_a_record_changed_meanwhile_is_refused(
    client: Client, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.sessions.create(id="run-1")
    store.update_status("session", "run-1", new_status="failed", reason_code="run.failed.exception")
    real = Store.update_status

    def racing(self: Store, *args: Any, **kwargs: Any) -> bool:
        real(self, "session", "run-1", new_status="failed", reason_code="run.failed.escalated",
             override=True, override_actor="x", override_justification="y")  # fmt: skip
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Store, "update_status", racing)
    with pytest.raises(RecordChangedError):
        client.override(
            "run-1", "completed", reason="run.completed.admin", justification="j", actor="a"
        )
    monkeypatch.undo()
    assert store.get_entity("session", "run-1")["status"] == "failed"  # type: ignore[index]


# -- the async twins -----------------------------------------------------------------------


def test_the_async_client_has_the_same_methods(
    db_url: str, lirun_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, "legs: [{id: only, run: [echo, hi]}]\n")

    async def main() -> tuple[Any, ...]:
        async with AsyncClient(db_url, settings=Settings(write_retry_seconds=5.0)) as lirun:
            flow = await lirun.flow(path)
            lirun.sync.store.teams.create_with_members("crew", ["ann"])
            team = await lirun.team("crew")
            sent = await team.send("all", "hi", sender="ann")
            read = await team.log()
            run = flow.legs["only"] if isinstance(flow, FlowResult) else None
            assert run is not None
            fixed = await lirun.override(
                run.id, "failed", reason="run.failed.admin", justification="j", actor="a"
            )
            with pytest.raises(NotFoundError):
                await lirun.team("nobody")
            return flow, sent, read, fixed

    flow, sent, read, fixed = asyncio.run(main())
    assert flow.status is RunStatus.COMPLETED
    assert read == [sent]
    assert (fixed.previous_status, fixed.status) == ("completed", "failed")

"""Owners bring teams to their agents, on both backends: a flow with ``team: true`` whose
two agent legs exchange messages through ``li team``; the file settings and their
problems."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from lirun.exec.task import Task
from lirun.flows.engine import FlowOptions, run_flow
from lirun.flows.load import FlowFileError, load_flow
from lirun.flows.spec import FlowSpec, LegSpec
from lirun.teams.membership import TeamSetting, parse_setting, run_team_name
from support.storekit import opened
from support.teamkit import chatty_agent


def test_a_flow_with_team_true_gives_its_agents_one_team_they_talk_in(
    db_url: str, tmp_path: Path, monkeypatch: Any
) -> None:
    seen = tmp_path / "seen"
    seen.mkdir()
    monkeypatch.setenv("LIRUN_CLAUDE_BIN", str(chatty_agent(seen)))
    spec = FlowSpec(
        legs=(
            LegSpec("api", Task(agent="claude", prompt="change the api")),
            LegSpec("web", Task(agent="claude", prompt="change the web page")),
            LegSpec("check", Task(run=("true",)), depends_on=("api", "web")),
        ),
        cwd=str(tmp_path),
        parallel=2,
        path=str(tmp_path / "pair.yaml"),
        team=TeamSetting(None),
    )
    report = run_flow(spec, db_url=db_url, options=FlowOptions(retry_delay=0.0))
    assert report.status == "completed", report.reason_summary
    with opened(db_url) as store:
        [team] = store.teams.of_owner("invocation", report.invocation_id)
        assert team.name == f"pair-{report.invocation_id}"
        assert [m.member for m in store.teams.members(team.id)] == ["api", "web"]
        messages = store.teams.conversation(team.id)
        sessions = {s.flow_leg: s for s in store.sessions.list_recent(limit=10)}
    assert sorted(m.body for m in messages) == ["hello from api", "hello from web"]
    for m in messages:  # each message names the run that sent it
        assert m.run_id == sessions[m.sender].id
        assert sessions[m.sender].meta["flow"]["team"]["member"] == m.sender
    assert "web -> all: hello from web" in (seen / "api.seen").read_text()
    assert "api -> all: hello from api" in (seen / "web.seen").read_text()
    assert (seen / "api.env").read_text().strip() == team.id
    prompt = (seen / "api.prompt").read_text()
    assert prompt.startswith(f"You work in team '{team.name}' as member 'api'")
    # `li` by its absolute path: the one beside this interpreter (a venv's bin/)
    li = Path(sys.executable).parent / "li"
    assert f'  {li} team inbox "$LIRUN_TEAM" --unread' in prompt
    environ = dict(
        v.split("=", 1) for v in (seen / "api.environ").read_text().split("\0") if "=" in v
    )
    assert environ["LIRUN_LI"] == str(li)
    assert prompt.endswith("change the api")


def test_team_preamble_false_leaves_the_prompt_alone(
    db_url: str, tmp_path: Path, monkeypatch: Any
) -> None:
    seen = tmp_path / "seen"
    seen.mkdir()
    monkeypatch.setenv("LIRUN_CLAUDE_BIN", str(chatty_agent(seen, expect=0)))
    spec = FlowSpec(
        legs=(LegSpec("solo", Task(agent="claude", prompt="just this")),),
        cwd=str(tmp_path),
        team=TeamSetting("standing-crew", preamble=False),
    )
    first = run_flow(spec, db_url=db_url, options=FlowOptions(retry_delay=0.0))
    second = run_flow(spec, db_url=db_url, options=FlowOptions(retry_delay=0.0))
    assert first.status == second.status == "completed"
    assert (seen / "solo.prompt").read_text() == "just this"
    with opened(db_url) as store:
        [team] = store.teams.list_all()  # team: NAME is one standing team both runs joined
        assert team.name == "standing-crew"
        # the two agents' hellos, and lirun's word that the second invocation joined
        assert team.message_count == 3


@pytest.mark.parametrize(
    ("team", "preamble", "expected"),
    [
        (None, None, (None, None)),
        (True, None, (TeamSetting(None, True), None)),
        ("crew", False, (TeamSetting("crew", False), None)),
        ("bad name", None, (None, "team must be true or a name")),
        (None, False, (None, "team_preamble needs team")),
        ("crew", "no", (None, "team_preamble must be true or false")),
    ],
)
def test_parse_setting(team: Any, preamble: Any, expected: tuple[Any, Any]) -> None:
    setting, problem = parse_setting(team, preamble)
    assert setting == expected[0]
    assert (problem is None) == (expected[1] is None)
    if expected[1]:
        assert problem is not None
        assert problem.startswith(expected[1])


def test_flow_file_team_keys(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text('team: true\nlegs:\n  - id: a\n    run: ["true"]\n')
    assert load_flow(good).team == TeamSetting(None, True)
    bad = tmp_path / "bad.yaml"
    bad.write_text('team: [x]\nlegs:\n  - id: a\n    run: ["true"]\n')
    with pytest.raises(FlowFileError) as caught:
        load_flow(bad)
    assert "bad.yaml:1: team must be true or a name" in str(caught.value)
    assert run_team_name("show", "Fix <b>auth</b>!", "0123456789") == "Fix--b-auth--b-0123456789"


def test_a_resumed_flow_with_team_true_goes_on_in_the_same_team(
    db_url: str, tmp_path: Path, monkeypatch: Any
) -> None:
    from lirun.flows.engine import resume_flow

    seen = tmp_path / "seen"
    seen.mkdir()
    monkeypatch.setenv("LIRUN_CLAUDE_BIN", str(chatty_agent(seen, expect=0)))
    flag = tmp_path / "failed-once"
    spec = FlowSpec(
        legs=(
            LegSpec("talk", Task(agent="claude", prompt="say hello")),
            LegSpec("check", Task(run=("sh", "-c", f"[ -e {flag} ] || {{ : > {flag}; exit 1; }}"))),
        ),
        cwd=str(tmp_path),
        team=TeamSetting(None),
    )
    first = run_flow(spec, db_url=db_url, options=FlowOptions(retry_delay=0.0))
    assert first.status == "failed"
    second = resume_flow(first.invocation_id, db_url=db_url)
    assert second.status == "completed"
    with opened(db_url) as store:
        [team] = store.teams.list_all()
        assert team.owner_id == first.invocation_id
        assert [m.body for m in store.teams.conversation(team.id)] == ["hello from talk"]

"""A show with ``team: true`` on a real repository (both backends): its two plays talk
through ``li team``, and the conductor's merge notice reaches the second play before its
gate runs."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from lirun.shows.engine import ShowOptions, run_show
from lirun.teams.membership import TeamSetting
from support.cli import li_command
from support.showkit import play, script, show_repo, spec
from support.storekit import opened

LI = f"{shlex.quote(sys.executable)} -m lirun"
COMMIT = "git add -A && git -c user.name=t -c user.email=t@example.invalid commit -qm"


def _wait_for(seen: Path, pattern: str) -> str:
    """Shell: read the inbox into ``seen`` until a line matches ``pattern`` (bounded)."""
    return (
        f": > {seen}; i=0; while ! grep -q {shlex.quote(pattern)} {seen} && [ $i -lt 300 ]; do "
        f'{LI} team inbox "$LIRUN_TEAM" --unread >> {seen}; sleep 0.1; i=$((i+1)); done; '
        f"grep -q {shlex.quote(pattern)} {seen} || exit 4; "
    )


def test_plays_talk_and_the_merge_notice_reaches_the_second_play_before_its_gate(
    tmp_path: Path, db_url: str
) -> None:
    repo = show_repo(tmp_path)
    first_seen, second_seen = tmp_path / "first.seen", tmp_path / "second.seen"
    send = f'{LI} team send "$LIRUN_TEAM" --to all "hello from $LIRUN_MEMBER" >/dev/null; '
    first = play(
        "first",
        script(send + _wait_for(first_seen, "hello from second")
               + f"echo one > api.txt && {COMMIT} first"),
    )  # fmt: skip
    second = play(
        "second",
        script(send + _wait_for(second_seen, "play first merged")
               + f"echo two > web.txt && {COMMIT} second"),
        # its gate checks the play knew of the merge before the gate ran
        gate=f"grep -q 'api.txt' {second_seen}",
    )  # fmt: skip
    show_spec = dataclasses.replace(
        spec(repo, [first, second], topic="pair work"), team=TeamSetting(None)
    )
    lines: list[str] = []
    report = run_show(
        show_spec, db_url=db_url, options=ShowOptions(parallel=2, on_progress=lines.append)
    )
    assert report.status == "completed", (report.to_dict(), lines)
    assert "first -> all: hello from first" in second_seen.read_text()
    assert "second -> all: hello from second" in first_seen.read_text()
    notice = [x for x in second_seen.read_text().splitlines() if "lirun -> all" in x]
    assert notice
    assert "play first merged into" in notice[0]
    assert "api.txt" in notice[0]
    with opened(db_url) as store:
        [team] = store.teams.of_owner("show", report.show_id)
        assert team.name == f"pair-work-{report.show_id}"
        assert [m.member for m in store.teams.members(team.id)] == ["first", "second"]
        said = [(m.sender, m.body.split(" as ")[0]) for m in store.teams.conversation(team.id)]
    assert sorted(said)[:1] == [("first", "hello from first")]
    merges = [body for sender, body in said if sender == "lirun"]
    assert merges == [
        f"play first merged into {report.integration}",
        f"play second merged into {report.integration}",
    ]
    # li status of the play, and of its execution, lists what it sent and received
    env = {**os.environ, "LIRUN_DB_URL": db_url, "COLUMNS": "200"}
    second_play = next(p for p in report.plays if p.name == "second")
    shown = subprocess.run(
        li_command("status", second_play.id), env=env, capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    assert f"team {team.name} ({team.id}) as second" in shown.stdout
    assert "second -> all: hello from second" in shown.stdout
    assert "first -> all: hello from first" in shown.stdout
    assert "lirun -> all: play first merged" in shown.stdout
    with opened(db_url) as store:
        [run] = [
            s for s in store.shows.list_play_sessions(second_play.id) if s.meta["role"] == "agent"
        ]
    as_json = subprocess.run(
        li_command("status", run.id, "--json"), env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    talk = json.loads(as_json.stdout)["team"]
    assert (talk["member"], talk["id"]) == ("second", team.id)
    assert {m["sender"] for m in talk["messages"]} == {"first", "second", "lirun"}


def test_a_play_that_needs_a_person_is_announced_to_the_team(tmp_path: Path, db_url: str) -> None:
    repo = show_repo(tmp_path)
    doomed = play("doomed", script(f"echo x > x.txt && {COMMIT} doomed"), attempts=1,
                  gate="exit 1")  # fmt: skip
    show_spec = dataclasses.replace(spec(repo, [doomed], topic="t"), team=TeamSetting("standing"))
    report = run_show(show_spec, db_url=db_url, options=ShowOptions(parallel=1))
    assert report.status == "active"
    assert report.plays[0].status == "gate_failed"
    with opened(db_url) as store:
        [team] = store.teams.list_all()
        [notice] = store.teams.conversation(team.id)
    assert team.name == "standing"
    assert notice.sender == "lirun"
    assert notice.body.startswith("play doomed failed its gate for the last time and waits")


def test_a_head_moved_outside_the_show_is_announced(tmp_path: Path, db_url: str) -> None:
    from support.showkit import INTEGRATION, writes

    repo = show_repo(tmp_path)
    once = tmp_path / "moved"
    sneak = (  # the first gate run moves the integration branch, as a person would
        f"test -f {once} && exit 0; touch {once}; "
        f"tree=$(git -C {repo} rev-parse refs/heads/{INTEGRATION}^{{tree}}); "
        f"new=$(git -C {repo} -c user.name=p -c user.email=p@x commit-tree $tree "
        f"-p refs/heads/{INTEGRATION} -m sneaked); "
        f"git -C {repo} update-ref refs/heads/{INTEGRATION} $new"
    )
    show_spec = dataclasses.replace(
        spec(repo, [play("p", writes("p.txt", "P"))], gate=sneak), team=TeamSetting(None)
    )
    report = run_show(show_spec, db_url=db_url)
    assert report.status == "completed", report.to_dict()
    with opened(db_url) as store:
        [team] = store.teams.of_owner("show", report.show_id)
        said = [m.body for m in store.teams.conversation(team.id)]
    assert said[0].startswith(f"the integration branch {INTEGRATION} moved to ")
    assert said[0].endswith("outside the show")
    assert said[1].startswith("play p merged into")

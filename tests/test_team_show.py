"""A show with ``team: true`` on a real repository (both backends): its two plays talk
through ``li team``, and the conductor's merge notice reaches the second play before its
gate runs."""

from __future__ import annotations

import dataclasses
import shlex
import sys
from pathlib import Path

from lirun.shows.engine import ShowOptions, run_show
from lirun.teams.membership import TeamSetting
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
    assert notice and "play first merged into" in notice[0] and "api.txt" in notice[0]
    with opened(db_url) as store:
        [team] = store.teams_of_owner("show", report.show_id)
        assert team["name"] == f"pair-work-{report.show_id[:8]}"
        assert [m["member"] for m in store.team_members(team["id"])] == ["first", "second"]
        said = [
            (m["sender"], m["body"].split(" as ")[0]) for m in store.team_conversation(team["id"])
        ]
    assert sorted(said)[:1] == [("first", "hello from first")]
    merges = [body for sender, body in said if sender == "lirun"]
    assert merges == [
        "play first merged into " + report.integration,
        "play second merged into " + report.integration,
    ]

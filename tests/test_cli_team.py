"""``li team`` on both backends: the commands and their exit codes, a follower in one
process woken by a message sent from another, and concurrent senders that lose nothing
and duplicate nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lirun.cli.main import main
from lirun.store import Store
from support.cli import li_command


def li(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = main(["team", *args])
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_terminal_line_escapes_every_invisible_character(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    """A message that would read backwards (a right-to-left override), hide text (zero-width
    characters, a byte order mark) or drive the terminal (an escape sequence) is one line
    of visible escapes in `li team log` and `li team inbox`."""
    team = store.teams.create_with_members("crew", ["api", "web"])
    body = "invoice\u202efdp.exe \u200b\u2066x\u2069\ufeff\x1b]0;owned\x07\u2028end"
    store.teams.send_message(team.id, sender="api", recipient="web", text=body)
    for args in (("log", "crew"), ("inbox", "crew", "--as", "web")):
        code, out, _ = li(capsys, *args)
        assert code == 0
        assert out.endswith(
            "api -> web: invoice\\u202efdp.exe \\u200b\\u2066x\\u2069\\ufeff"
            "\\x1b]0;owned\\x07\\u2028end\n"
        ), out
        assert out.replace("\n", "").isprintable()


def test_create_send_inbox_show_archive(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = li(capsys, "create", "crew", "--member", "api", "--member", "web")
    team_id = out.strip()
    assert code == 0
    assert store.get_entity("team", team_id) is not None
    assert li(capsys, "send", "crew", "--from", "api", "--to", "web", "schema changed")[0] == 0
    assert li(capsys, "send", team_id[:8], "--from", "web", "ack")[0] == 0
    code, out, _ = li(capsys, "inbox", "crew", "--as", "web")
    assert code == 0, out
    assert out.endswith("api -> web: schema changed\n"), out
    code, out, _ = li(capsys, "inbox", "crew", "--as", "web", "--unread")
    assert (code, out) == (0, "")
    code, out, _ = li(capsys, "log", "crew", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["seq"], r["sender"], r["text"]) for r in rows] == [
        (1, "api", "schema changed"),
        (2, "web", "ack"),
    ]
    code, out, _ = li(capsys, "inbox", "crew", "--as", "api", "--since", rows[0]["id"], "--json")
    assert [json.loads(line)["text"] for line in out.splitlines()] == ["ack"]
    code, out, _ = li(capsys, "show", "crew", "--json")
    shown = json.loads(out)
    assert {m["member"]: (m["sent"], m["unread"]) for m in shown["members"]} == {
        "api": (1, 0),
        "web": (1, 0),
    }
    code, out, _ = li(capsys, "list", "--json")
    assert [(t["name"], t["message_count"]) for t in json.loads(out)] == [("crew", 2)]
    code, out, err = li(capsys, "archive", "crew", "--actor", "ops", "--justification", "shipped")
    assert code == 0
    assert "archived" in out
    code, out, err = li(capsys, "send", "crew", "--from", "api", "one more")
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert "is archived" in err
    code, _, err = li(capsys, "join", "crew", "late")
    assert code == 2
    assert "is archived" in err
    history = store.list_transitions("team", team_id)
    assert [(h.reason_code, h.actor, h.reason_summary) for h in history][1:] == [
        ("team.archived.operator", "ops", "shipped")
    ]
    team = store.teams.get(team_id)
    assert team is not None
    assert team.message_count == 2


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("send", "crew", "--from", "nobody", "hi"), "'nobody' is not a member"),
        (("send", "crew", "--from", "api", "--to", "ghost", "hi"), "no member 'ghost'"),
        (("send", "crew", "--from", "api", ""), "the message is empty"),
        (("send", "crew", "hi"), "give --from M"),
        (("send", "ghost-team", "--from", "api", "hi"), "no team 'ghost-team'"),
        (("inbox", "crew", "--as", "nobody"), "'nobody' is not a member"),
        (("inbox", "crew", "--as", "api", "--since", "m0"), "no message 'm0'"),
        (("create", "crew"), "already exists and is active"),
        (("create", "bad name"), "invalid team name"),
        (("create", "other", "--member", "all"), "reserved"),
        (("send", "\udcff", "--from", "api", "hi"), "is not UTF-8 text"),
        (("inbox", "crew", "--as", "api", "--since", "m\udcff"), "is not UTF-8 text"),
        (("send", "crew", "--from", "api", "bad \udcff"), "the message is not UTF-8 text"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    store: Store, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], said: str
) -> None:
    li(capsys, "create", "crew", "--member", "api", "--member", "web")
    code, out, err = li(capsys, *args)
    assert (code, out) == (2, ""), err
    assert err.count("\n") == 1, err
    assert said in err, err
    assert [t.name for t in store.teams.list_all()] == ["crew"]
    assert store.teams.list_all()[0].message_count == 0


def test_send_from_stdin_in_a_supervised_child_records_its_run(
    store: Store, li_env: dict[str, str]
) -> None:
    team_id = str(store.teams.create_with_members("crew", ["api", "web"]).id)
    env = {**li_env, "LIRUN_PARENT_RUN_ID": "run-123", "LIRUN_MEMBER": "api"}
    text = "line one\nline two <script>alert(1)</script>\x1b[2J"
    done = subprocess.run(
        li_command("team", "send", "crew", "-"), input=text, env=env,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [message] = store.teams.conversation(team_id)
    assert (message.body, message.run_id, message.sender) == (text, "run-123", "api")
    shown = subprocess.run(
        li_command("team", "inbox", "crew", "--as", "web"), env=li_env,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.stdout.count("\n") == 1
    assert "\x1b" not in shown.stdout
    assert "line one\\nline two <script>" in shown.stdout
    assert "\\x1b[2J" in shown.stdout


def _follower(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        li_command("team", "inbox", "crew", "--as", "web", "--follow", "--json", *args),
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _ready(store: Store, team_id: str, follower: subprocess.Popen[str]) -> dict[str, object]:
    """Send a first message and read it from the follower: from then on it is following."""
    store.teams.send_message(team_id, sender="api", recipient="web", text="warm-up")
    assert follower.stdout is not None
    return dict(json.loads(follower.stdout.readline()))


def test_follow_prints_messages_from_another_process_and_ends_when_archived(
    store: Store, li_env: dict[str, str]
) -> None:
    team_id = str(store.teams.create_with_members("crew", ["api", "web"]).id)
    follower = _follower(li_env)
    try:
        assert _ready(store, team_id, follower)["text"] == "warm-up"
        sender = subprocess.run(
            li_command("team", "send", "crew", "--from", "api", "--to", "web", "from afar"),
            env=li_env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert sender.returncode == 0, sender.stderr
        assert follower.stdout is not None
        line = json.loads(follower.stdout.readline())
        assert (line["sender"], line["text"], line["seq"]) == ("api", "from afar", 2)
        store.teams.send_message(team_id, sender="api", recipient="all", text="last words")
        store.update_status(
            "team", team_id, new_status="archived", reason_code="team.archived.operator",
            source="admin", actor="ops",
        )  # fmt: skip
        out, err = follower.communicate(timeout=30)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    assert follower.returncode == 0, err
    assert [json.loads(x)["text"] for x in out.splitlines()] == ["last words"]
    # what the follower printed it read: receipts for web
    assert store.teams.read_inbox(team_id, "web", unread_only=True) == []


def test_follow_stops_on_sigterm(store: Store, li_env: dict[str, str]) -> None:
    team_id = str(store.teams.create_with_members("crew", ["api", "web"]).id)
    follower = _follower(li_env)
    try:
        _ready(store, team_id, follower)
        follower.terminate()
        _, err = follower.communicate(timeout=30)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    assert follower.returncode == 0
    assert err == ""


SENDERS = 8
EACH = 100
SENDER_SCRIPT = """
import sys
from lirun.store import open_store
url, me, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = open_store(url)
team = store.teams.resolve("crew")
sys.stdout.write("ready\\n"); sys.stdout.flush()
sys.stdin.readline()
for i in range(count):
    store.teams.send_message(team, sender=me, recipient="all", text=f"{me} {i}")
store.close()
"""


def test_concurrent_senders_lose_nothing_and_duplicate_nothing(
    store: Store, db_url: str, tmp_path: Path
) -> None:
    names = [f"s{i}" for i in range(SENDERS)]
    team_id = str(store.teams.create_with_members("crew", [*names, "reader"]).id)
    script = tmp_path / "sender.py"
    script.write_text(SENDER_SCRIPT)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), db_url, name, str(EACH)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in names
    ]
    for p in procs:
        assert p.stdout is not None
        assert p.stdout.readline() == "ready\n"
    for p in procs:  # all start at once
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    messages = store.teams.conversation(team_id, limit=10_000)
    assert [m.seq for m in messages] == list(range(1, SENDERS * EACH + 1))
    assert len({m.id for m in messages}) == SENDERS * EACH
    for name in names:  # each sender's messages in the order it sent them
        mine = [m.body for m in messages if m.sender == name]
        assert mine == [f"{name} {i}" for i in range(EACH)]
    inbox = store.teams.read_inbox(team_id, "reader", limit=10_000)
    assert len(inbox) == SENDERS * EACH
    assert store.teams.read_inbox(team_id, "reader", unread_only=True, limit=10_000) == []


def test_inbox_without_a_database_is_one_line_and_creates_none(tmp_path: Path) -> None:
    done = subprocess.run(
        li_command("--db", str(tmp_path / "none.db"), "team", "inbox", "crew", "--as", "a"),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "none.db").exists()

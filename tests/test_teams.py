"""Teams in the store, on both backends: members, messages, read receipts, archive
through the guarded status write, and the rules that refuse what a team cannot take."""

from __future__ import annotations

import pytest

from lirun.errors import ConflictError, NotFoundError, UsageError
from lirun.store import Store
from lirun.store.records import decode_row
from lirun.store.rows import (
    InboxMessageRow,
    RunMembershipRow,
    TeamMemberRow,
    TeamMessageRow,
    TeamRow,
)
from lirun.teams.message import escape_line, message_line
from lirun.teams.rules import MAX_MESSAGE_BYTES, TeamArchivedError


def make(store: Store, name: str = "crew", members: tuple[str, ...] = ("a", "b", "c")) -> str:
    return str(store.teams.create_with_members(name, members).id)


def test_create_send_read_with_receipts_and_history(store: Store) -> None:
    team_id = make(store)
    assert [m.member for m in store.teams.members(team_id)] == ["a", "b", "c"]
    first = store.teams.send_message(team_id, sender="a", recipient="all", text="hello all")
    second = store.teams.send_message(team_id, sender="b", recipient="a", text="hi a")
    third = store.teams.send_message(team_id, sender="a", recipient="b", text="for b only")
    assert (first.seq, second.seq, third.seq) == (1, 2, 3)
    assert first.id < second.id < third.id  # sortable ids
    # c receives what went to all, nothing of a's and b's private talk, not its own
    inbox_c = store.teams.read_inbox(team_id, "c")
    assert [m.body for m in inbox_c] == ["hello all"]
    assert inbox_c[0].read_at is None  # as it was before this read
    assert store.teams.read_inbox(team_id, "c", unread_only=True) == []
    assert [m.body for m in store.teams.read_inbox(team_id, "c")] == ["hello all"]
    receipts = store.teams.read_receipts([first.id, second.id])
    assert set(receipts[first.id]) == {"c"}
    assert second.id not in receipts
    # b: sees the all-message and its own private one; --since skips what came before
    assert [m.seq for m in store.teams.read_inbox(team_id, "b", since_seq=1)] == [3]
    summary = {m.member: m for m in store.teams.member_summary(team_id)}
    assert (summary["a"].sent, summary["a"].unread) == (2, 1)
    assert (summary["b"].unread, summary["c"].unread) == (1, 0)
    team = store.teams.get(team_id)
    assert team is not None
    assert team.message_count == 3
    assert store.teams.message_seq(team_id, second.id) == 2


def test_archive_goes_through_the_guarded_write_and_refuses_messages_and_members(
    store: Store,
) -> None:
    team_id = make(store)
    assert store.update_status(
        "team", team_id, new_status="archived", reason_code="team.archived.operator",
        source="admin", actor="ops", reason_summary="done", expected_statuses=["active"],
    )  # fmt: skip
    history = store.list_transitions("team", team_id)
    assert [(h.status, h.reason_code, h.actor) for h in history] == [
        ("active", "team.active.created", None),
        ("archived", "team.archived.operator", "ops"),
    ]
    team = store.teams.get(team_id)
    assert team is not None
    assert team.archived_at is not None
    with pytest.raises(TeamArchivedError, match="archived: it takes no new messages"):
        store.teams.send_message(team_id, sender="a", recipient="all", text="late")
    with pytest.raises(TeamArchivedError):
        store.teams.add_members(team_id, ["d"])
    assert store.teams.conversation(team_id) == []
    assert [m.member for m in store.teams.members(team_id)] == ["a", "b", "c"]
    # the name is free again, and resolves to the new active team
    new_id = make(store)
    assert store.teams.resolve("crew") == new_id


@pytest.mark.parametrize(
    ("sender", "recipient", "text", "message"),
    [
        ("x", "all", "hi", "'x' is not a member of team crew"),
        ("a", "x", "hi", "no member 'x' in team crew"),
        ("a", "a", "hi", "cannot send a message to itself"),
        ("a", "all", "  \n", "the message is empty"),
        ("a", "all", "nul\x00", "NUL character"),
        ("a", "all", "bad \udcff byte", "not UTF-8 text"),
        ("a", "all", "é" * (MAX_MESSAGE_BYTES // 2 + 1), f"limit is {MAX_MESSAGE_BYTES} bytes"),
    ],
)
def test_refused_messages_leave_nothing(
    store: Store, sender: str, recipient: str, text: str, message: str
) -> None:
    team_id = make(store)
    with pytest.raises(UsageError, match=message):
        store.teams.send_message(team_id, sender=sender, recipient=recipient, text=text)
    assert store.teams.conversation(team_id) == []
    team = store.teams.get(team_id)
    assert team is not None
    assert team.message_count == 0


def test_a_message_of_exactly_the_bound_is_kept_whole(store: Store) -> None:
    team_id = make(store)
    text = "x" * MAX_MESSAGE_BYTES
    store.teams.send_message(team_id, sender="a", recipient="all", text=text)
    assert store.teams.conversation(team_id)[0].body == text


def test_names_membership_and_resolution(store: Store) -> None:
    team_id = make(store, "crew", ("a",))
    with pytest.raises(ConflictError, match="already exists and is active"):
        make(store, "crew", ("z",))
    joined = store.teams.create_with_members("crew", ["b"], join_existing=True)
    assert joined.id == team_id
    assert store.teams.add_members(team_id, ["a", "c", "c"]) == ["c"]
    for bad in ("all", "lirun", "", "-x", "a b", "x" * 65, "<script>"):
        with pytest.raises(UsageError):
            store.teams.add_members(team_id, [bad])
    with pytest.raises(UsageError, match="invalid team name"):
        store.teams.create_with_members("bad name")
    assert store.teams.resolve(team_id[:8]) == team_id
    assert store.teams.resolve("crew") == team_id
    with pytest.raises(NotFoundError):
        store.teams.resolve("nobody")
    with pytest.raises(UsageError, match="'zed' is not a member"):
        store.teams.read_inbox(team_id, "zed")
    # lirun speaks in every team without being a member
    store.teams.send_message(team_id, sender="lirun", recipient="all", text="play a merged")
    assert [m.sender for m in store.teams.read_inbox(team_id, "b")] == ["lirun"]


def test_lines_escape_control_characters() -> None:
    assert escape_line("a\nb\x1b[31mc\\") == "a\\nb\\x1b[31mc\\\\"
    assert escape_line("report\u202eexe.txt\x9b") == "report\\u202eexe.txt\\x9b"
    # every format character: zero-width ones, isolates, the byte order mark, tags
    hidden = "a\u200bb\u200dc\u2066d\u2069e\ufefff\u00adg\U000e0041h"
    assert escape_line(hidden) == ("a\\u200bb\\u200dc\\u2066d\\u2069e\\ufefff\\xadg\\U000e0041h")
    line = message_line(TeamMessageRow("m1", "t1", 3, "a", "all", "x\r\ny", None, 0.0))
    assert line.endswith("a -> all: x\\r\\ny")
    assert "\n" not in line


def test_team_rows_hold_every_column_their_queries_read(store: Store) -> None:
    """``TeamRow``, ``TeamMemberRow``, ``TeamMessageRow`` and ``InboxMessageRow`` name
    each column: one a table gains fails here, not later as a missing attribute."""
    team_id = make(store)
    sent = store.teams.send_message(team_id, sender="a", recipient="all", text="hi")
    read = store.connector.read
    [team] = read(store.sql("team_list"), {"status": None, "limit": 5})
    assert set(team) == set(TeamRow._fields)
    assert store.teams.list_all()[0].as_dict() == decode_row(team)
    members = read(store.sql("team_members"), {"team_id": team_id})
    assert set(members[0]) == set(TeamMemberRow._fields)
    assert [m.as_dict() for m in store.teams.members(team_id)] == [dict(m) for m in members]
    [message] = read(store.sql("team_recent"), {"team_id": team_id, "limit": 5})
    assert set(message) == set(TeamMessageRow._fields)
    assert store.teams.conversation(team_id) == [sent]
    assert sent.as_dict() == dict(message)
    inbox = {"team_id": team_id, "member": "b", "since": 0, "unread_only": 0, "limit": 5}
    [received] = read(store.sql("team_inbox"), inbox)
    assert set(received) == set(InboxMessageRow._fields)
    assert store.teams.read_inbox(team_id, "b") == [InboxMessageRow(**sent._asdict(), read_at=None)]
    assert store.teams.memberships_of_run("no-run") == []
    other = store.teams.create_with_members("pair", ["x"], run_id="run-1")
    assert store.teams.memberships_of_run("run-1") == [RunMembershipRow(other.id, "x")]

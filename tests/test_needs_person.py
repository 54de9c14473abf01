"""Which plays need a person is one decision (``shows.decide.play_needs_person``): the
table of it, then every place that shows it agreeing on one record, on both backends —
``li attention``, the dashboard's needs-you page and ``/api/shows``, ``li show list``
(its NEED YOU column and ``--json``), and each show's board (``li show status SHOW``)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from starlette.testclient import TestClient

from lirun.cli.main import main
from lirun.cli.show_board import needs_person as board_needs_person
from lirun.lifecycle import PLAY_STATUS_ORDER, policy_for
from lirun.shows.decide import play_needs_person, plays_needing_person
from lirun.shows.engine import show_report
from lirun.store import Store
from lirun.ui.app import create_app
from support.storekit import raw_write

SHOW_STATUSES = sorted(policy_for("show").statuses)


@pytest.mark.parametrize("show_status", SHOW_STATUSES)
@pytest.mark.parametrize("play_status", PLAY_STATUS_ORDER)
def test_a_play_needs_a_person_only_stopped_short_in_an_active_show(
    play_status: str, show_status: str
) -> None:
    expected = play_status in ("escalated", "gate_failed") and show_status == "active"
    assert play_needs_person(play_status, show_status) is expected


def test_plays_counted_by_status_are_counted_by_the_same_rule() -> None:
    counts = {"escalated": 2, "gate_failed": 1, "merged": 4, "blocked": 1}
    assert plays_needing_person(counts, "active") == 3
    assert plays_needing_person(counts, "aborted") == 0
    assert plays_needing_person(counts, "completed") == 0


def li(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    out, _ = capsys.readouterr()
    return code, out


def _shows(store: Store) -> dict[str, str]:
    """An active, an aborted and a completed show, each with a play in every status
    (a completed show with unmerged plays only by hand, to hold the rule there too)."""
    made = {}
    for status in SHOW_STATUSES:
        show = store.shows.create(topic=f"topic-{status}")
        for play_status in PLAY_STATUS_ORDER:
            play = store.shows.create_play(show_id=show.id, name=f"p-{play_status}")
            raw_write(
                store,
                "UPDATE plays SET status = :s WHERE id = :id",
                {"s": play_status, "id": play.id},
            )
        raw_write(
            store, "UPDATE shows SET status = :s WHERE id = :id", {"s": status, "id": show.id}
        )
        made[status] = show.id
    return made


def test_attention_the_dashboard_the_shows_list_and_the_board_agree(
    store: Store, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    shows = _shows(store)
    expected = {shows["active"]: 2, shows["aborted"]: 0, shows["completed"]: 0}

    code, out = li(capsys, "attention", "--json")
    assert code == 1
    attention = Counter(
        i["href"].split("/")[2].split("#")[0] for i in json.loads(out) if i["kind"] == "play"
    )
    assert {s: attention.get(s, 0) for s in expected} == expected

    code, out = li(capsys, "show", "list", "--json")
    assert code == 0
    assert {r["id"]: r["plays_need_you"] for r in json.loads(out)} == expected

    code, out = li(capsys, "show", "list")
    table = {line.split()[0]: line.split()[4] for line in out.splitlines()[1:] if line.strip()}
    shown = {ident: table[ident] for ident in expected}
    assert shown == {s: str(n) if n else "-" for s, n in expected.items()}

    with TestClient(create_app(db_url, watch=False)) as client:
        listed = client.get("/api/shows").json()["shows"]
        assert {s["id"]: s["plays_need_you"] for s in listed} == expected
        items = client.get("/api/attention").json()["items"]
        assert sorted(i["id"] for i in items if i["kind"] == "play") == sorted(
            i["id"] for i in json.loads(li(capsys, "attention", "--json")[1])
            if i["kind"] == "play"
        )  # fmt: skip

    for ident, count in expected.items():
        report = show_report(ident, db_url=db_url).to_dict()
        assert len(board_needs_person(report)) == count

"""The show page says what the record says and no more: a moved head's gate is not the
final gate, a play merged by hand has no stale feedback and says it was merged by hand,
a play's position is its place in the show file (both backends)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from lirun.store import Store
from lirun.ui.app import create_app

FEEDBACK = "the gate failed on the merge result 8c22df37d874 (run.failed.exit_nonzero)"


@pytest.fixture
def client(store: Store, db_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(db_url, watch=False)) as c:
        yield c


def _show(store: Store, *, final_gate: str | None) -> tuple[str, str]:
    """An active show as the engine writes it: spec, a moved head's gate on record, a
    play a person merged by hand after it failed its gate (its feedback still stored)."""
    show = store.shows.create_with_plays(
        id="show-truth",
        fields={
            "topic": "truth",
            "spec_json": {"topic": "truth", "final_gate": final_gate, "plays": []},
            "integration": "show/truth",
            "base": "main",
        },
        plays=[
            {"id": "show-truth.api", "name": "api", "position": 0, "attempts": 1},
            {"id": "show-truth.ui", "name": "ui", "position": 1, "attempts": 1},
        ],
    )
    head_gate = {
        "verdict": "pass",
        "role": "head_gate",
        "commit": "a" * 40,
        "session_id": "head-gate-run",
        "reason": "run.completed.ok",
    }
    store.update_fields("show", "show-truth", {"final_gate_json": head_gate})
    store.update_status(
        "play", "show-truth.api", new_status="gate_failed", reason_code="play.gate_failed.check"
    )
    store.update_fields("play", "show-truth.api", {"feedback": FEEDBACK, "attempt": 1})
    store.update_status(
        "play",
        "show-truth.api",
        new_status="merged",
        reason_code="play.merged.admin",
        source="admin",
        override=True,
        override_actor="me",
        override_justification="merged by hand after fixing the test",
    )
    return show.id, "show-truth.api"


@pytest.mark.parametrize(("final_gate", "words"), [("pytest -q", "not run yet"), (None, "none")])
def test_a_moved_heads_gate_is_not_called_the_final_gate(
    store: Store, client: TestClient, final_gate: str | None, words: str
) -> None:
    show_id, _ = _show(store, final_gate=final_gate)
    page = client.get(f"/shows/{show_id}").text
    final = page.split('id="final-gate">', 1)[1].split("</dd>", 1)[0]
    assert words in final
    assert "passed" not in final
    head = page.split('id="head-gate">', 1)[1].split("</dd>", 1)[0]
    assert "passed" in head
    assert "not the final gate" in head
    assert "<code>li logs head-gate-run</code>" in head  # where its output is read
    data = client.get(f"/api/shows/{show_id}").json()
    assert data["final_gate"] is None
    assert data["head_gate"]["verdict"] == "pass"


def test_a_play_merged_by_hand_says_so_without_stale_feedback(
    store: Store, client: TestClient
) -> None:
    show_id, play_id = _show(store, final_gate=None)
    page = client.get(f"/shows/{show_id}").text
    card = page.split(f'id="play-{play_id}"', 1)[1].split('<div class="card"', 1)[0]
    assert "merged by hand, recorded by <b>me</b>" in card
    assert FEEDBACK not in card
    assert "merged by hand after fixing the test" in card
    assert "merged as" not in card  # no merge commit was recorded: none is shown
    assert "#1 in the file" in card
    assert "position" not in page
    data = client.get(f"/api/shows/{show_id}").json()
    [api] = [p for c in data["board"] for p in c["plays"] if p["id"] == play_id]
    assert api["by_hand"]["actor"] == "me"
    assert api["feedback"] is None
    assert api["file_order"] == 1
    assert json.dumps(data)  # the JSON twin carries the same

"""checkpoint.json: what it holds, one leg a line (rewritten after every leg, a 1,000-item
fan-out writes it 1,000 times: each line is encoded by the C encoder, never by the
pure-Python one an indented dump falls back to)."""

from __future__ import annotations

import json
from pathlib import Path

from lirun.orchestra.checkpoint import read_checkpoint, write_checkpoint


def _legs(count: int) -> dict[str, dict[str, object]]:
    return {
        f"each[{n}]": {
            "leg": "each",
            "item": f"item-{n}",
            "session_id": f"20260101T000000-{n:06x}",
            "status": "completed",
            "reason_code": "run.completed.ok",
            "attempts": 1,
            "reused": False,
            "outputs": {"reply": f"did {n}\n", "artifacts": {"r": f"/runs/{n}/r.md"}},
        }
        for n in range(count)
    }


def test_the_checkpoint_round_trips_with_one_leg_per_line(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    legs = _legs(3)
    write_checkpoint(path, {"invocation_id": "inv", "vars": {"x": "1"}, "legs": legs})
    assert read_checkpoint(path) == {
        "version": 1,
        "invocation_id": "inv",
        "vars": {"x": "1"},
        "legs": legs,
    }
    lines = path.read_text().splitlines()
    for leg_id, entry in legs.items():  # a leg is one line: grep finds it whole
        [line] = [line for line in lines if json.dumps(leg_id) in line]
        assert json.loads("{" + line.rstrip(",") + "}") == {leg_id: entry}


def test_the_entries_written_one_a_line_are_named_by_the_caller(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    plays = {"a": {"status": "merged"}, "b": {"status": "pending"}}
    write_checkpoint(path, {"show_id": "s", "plays": plays}, entries="plays")
    assert read_checkpoint(path) == {"version": 1, "show_id": "s", "plays": plays}
    lines = path.read_text().splitlines()
    assert '  "a": {"status": "merged"},' in lines
    assert '  "b": {"status": "pending"}' in lines

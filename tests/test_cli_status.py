"""``li status``: the list, one record with its history, filters, JSON, colour, no database."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from lirun.cli import status as status_cli
from lirun.cli.main import main as li_main
from lirun.cli.render import format_span, record_fields, status_style
from lirun.errors import UsageError
from lirun.liveness import boot_id, host_name
from lirun.store import Store
from support.cli import li_command


def li(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(li_command(*args), env=env, capture_output=True, text=True, timeout=60)


def finish(
    store: Store, sid: str, status: str, reason: str, summary: str = "", **extra: Any
) -> None:
    applied = store.update_status(
        "session",
        sid,
        new_status=status,
        reason_code=reason,
        reason_summary=summary,
        extra_fields={"ended_at": time.time(), **extra},
    )
    assert applied


def backdate(store: Store, sid: str, seconds: float) -> None:
    with store.connector.write() as tx:
        tx.execute(
            "UPDATE sessions SET created_at = created_at - :s, started_at = started_at - :s "
            "WHERE id = :id",
            {"s": seconds, "id": sid},
        )


@pytest.fixture
def populated(store: Store) -> Store:
    """Three executions: one completed with evidence and artifacts, one failed, one running."""
    store.sessions.create(
        id="20260101T000000-aaaaaa",
        run_dir="/runs/20260101T000000-aaaaaa",
        artifacts_path="/runs/20260101T000000-aaaaaa/artifacts",
        provider="claude",
        model="sonnet",
        artifact_contract={"expected": [{"id": "report", "path": "report.md"}]},
        engine_session_uid="engine-123",
        branch_id="branch-1",
    )
    store.update_fields(
        "session",
        "20260101T000000-aaaaaa",
        {
            "artifact_verification_json": {
                "status": "warning",
                "checked_at": time.time(),
                "missing_required": [],
                "missing_optional": [{"id": "notes", "path": "notes.md", "required": False}],
                "produced": [{"id": "report", "path": "report.md", "size": 42, "present": True}],
            }
        },
    )
    applied = store.update_status(
        "session",
        "20260101T000000-aaaaaa",
        new_status="completed",
        reason_code="run.completed.ok",
        reason_summary="wrote the report [red]now[/red]",
        evidence_refs=[{"kind": "commit", "ref": "abc1234"}],
        extra_fields={"ended_at": time.time(), "exit_code": 0},
    )
    assert applied
    store.sessions.create(id="20260101T000001-bbbbbb")
    finish(store, "20260101T000001-bbbbbb", "failed", "run.failed.exit_nonzero", exit_code=1)
    store.sessions.create(id="20260101T000002-cccccc")
    backdate(store, "20260101T000000-aaaaaa", 3 * 3600)
    return store


def test_list_table_shows_recent_executions(populated: Store, li_env: dict[str, str]) -> None:
    result = li(li_env, "status")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "ID", "STATUS", "AGE", "DURATION", "EXIT", "TOKENS", "COST", "REASON", "SUMMARY"
    ]  # fmt: skip
    ids = [line.split()[0] for line in lines[1:]]
    # newest first
    assert ids == ["20260101T000002-cccccc", "20260101T000001-bbbbbb", "20260101T000000-aaaaaa"]
    assert "run.failed.exit_nonzero" in result.stdout
    assert "wrote the report [red]now[/red]" in result.stdout
    assert "3h00m" in lines[3]
    assert "\x1b[" not in result.stdout  # not a terminal: no colour
    assert all(line == line.rstrip() for line in lines)


def test_list_json_and_filters(populated: Store, li_env: dict[str, str]) -> None:
    everything = json.loads(li(li_env, "status", "--json").stdout)
    assert [r["status"] for r in everything] == ["running", "failed", "completed"]
    assert everything[2]["status_evidence_refs"] == [{"kind": "commit", "ref": "abc1234"}]
    failed = json.loads(li(li_env, "status", "--json", "--status", "failed").stdout)
    assert [r["id"] for r in failed] == ["20260101T000001-bbbbbb"]
    running = json.loads(li(li_env, "status", "--json", "--running").stdout)
    assert [r["id"] for r in running] == ["20260101T000002-cccccc"]
    recent = json.loads(li(li_env, "status", "--json", "--since", "2h").stdout)
    assert {r["id"] for r in recent} == {"20260101T000001-bbbbbb", "20260101T000002-cccccc"}
    limited = json.loads(li(li_env, "status", "--json", "--limit", "1").stdout)
    assert [r["id"] for r in limited] == ["20260101T000002-cccccc"]


def test_a_run_is_called_a_run_and_the_old_names_still_read(
    populated: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    populated.update_fields("session", "20260101T000000-aaaaaa", {"reply_text": "done"})
    assert li_main(["status", "--json", "--kind", "run"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["schema"] for r in rows} == {"lirun.status_row/1"}
    done = rows[-1]
    assert done["artifact_dir"] == "/runs/20260101T000000-aaaaaa/artifacts"
    assert done["reply"] == "done"
    # the old keys, deprecated, for this shape version only
    assert done["artifacts_path"] == done["artifact_dir"]
    assert done["reply_text"] == done["reply"]
    assert li_main(["status", "--json", "--kind", "session"]) == 0
    old = capsys.readouterr()
    assert json.loads(old.out) == rows
    assert old.err == "li status: --kind session is deprecated; use --kind run\n"


def test_list_filters_in_process(populated: Store, capsys: pytest.CaptureFixture[str]) -> None:
    assert li_main(["status", "--status", "timed_out"]) == 0
    assert capsys.readouterr().out == "no runs match these filters\n"
    assert li_main(["status", "--since", "1d"]) == 0
    assert "20260101T000000-aaaaaa" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args",
    [
        ["--running", "--status", "failed"],
        ["--since", "soon"],
        ["--since", "0m"],
        ["--limit", "0"],
        ["--status", "exploded"],
        ["20260101", "--running"],
    ],
)
def test_bad_list_options_exit_2(
    populated: Store, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    try:
        code = li_main(["status", *args])
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    assert code == 2
    assert capsys.readouterr().err


def test_one_record_with_history_evidence_and_artifacts(
    populated: Store, li_env: dict[str, str]
) -> None:
    result = li(li_env, "status", "20260101T000000-aaaaaa")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.splitlines()[0] == "run 20260101T000000-aaaaaa  completed"
    for fragment in (
        "run.completed.ok: completed with evidence of work",
        "wrote the report [red]now[/red]",
        "/runs/20260101T000000-aaaaaa/artifacts",
        "claude/sonnet",
        "engine-123",
        "branch-1",
        "kind=commit ref=abc1234",
        "verdict: warning",
        "report  report.md  42 B",
        "missing optional  notes  notes.md",
        "history",
    ):
        assert fragment in out, fragment
    history = out[out.index("history") :].splitlines()[2:]
    assert [line.split()[4:6] for line in history] == [["-", "running"], ["running", "completed"]]


def test_one_record_json_by_prefix(populated: Store, li_env: dict[str, str]) -> None:
    populated.update_status(
        "session",
        "20260101T000001-bbbbbb",
        new_status="completed",
        reason_code="run.completed.admin",
        source="admin",
        actor="alice",
        override=True,
        override_actor="alice",
        override_justification="checked by hand",
    )
    result = li(li_env, "status", "--json", "20260101T000001")
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["kind"] == "run"
    assert record["id"] == "20260101T000001-bbbbbb"
    assert [t["status"] for t in record["transitions"]] == ["running", "failed", "completed"]
    assert record["transitions"][-1]["source"] == "admin"
    [event] = record["admin_events"]
    assert event["event_type"] == "status_transition_override"
    assert event["justification"] == "checked by hand"
    human = li(li_env, "status", "20260101T000001").stdout
    assert "admin events" in human
    assert "checked by hand" in human
    assert "failed → completed" in human


def test_ambiguous_and_unknown_ids_exit_2(populated: Store, li_env: dict[str, str]) -> None:
    ambiguous = li(li_env, "status", "20260101T00000")
    assert ambiguous.returncode == 2
    assert "ambiguous" in ambiguous.stderr
    assert "20260101T000000-aaaaaa" in ambiguous.stderr
    assert ambiguous.stdout == ""
    missing = li(li_env, "status", "nope")
    assert missing.returncode == 2
    assert "no execution or record" in missing.stderr


def test_prefix_is_literal_not_a_pattern(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    store.sessions.create(id="run_1")
    store.sessions.create(id="runX1")
    assert li_main(["status", "--json", "run_"]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == "run_1"
    assert li_main(["status", "run%"]) == 2


def test_invocation_record_lists_its_runs(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    store.invocations.create(skill="review", id="inv-1")
    store.sessions.create(id="s-1", invocation_id="inv-1")
    store.sessions.create(id="s-2", invocation_id="inv-1")
    store.sessions.create(id="s-3")
    assert li_main(["status", "--json", "inv-1"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["kind"] == "invocation"
    assert record["skill"] == "review"
    assert [s["id"] for s in record["runs"]] == ["s-1", "s-2"]
    assert record["sessions"] == record["runs"]  # the old key, deprecated
    assert li_main(["status", "inv-1"]) == 0
    out = capsys.readouterr().out
    assert "\nruns\n" in out
    assert "s-2" in out
    assert "s-3" not in out


def test_dead_owner_is_flagged_but_not_written(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    store.sessions.create(
        id="orphan",
        owner_pid=gone.pid,
        owner_host=host_name(),
        owner_boot_id=boot_id(),
        owner_start_time=time.time(),
        heartbeat_at=time.time(),
    )
    assert li_main(["status", "--json", "orphan"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["owner_verdict"]["reason_code"] == "session.orphaned.no_process"
    assert li_main(["status", "orphan"]) == 0
    assert "looks dead" in capsys.readouterr().out
    row = store.get_entity("session", "orphan")
    assert row is not None
    assert row["status"] == "running"


def test_colour_only_when_forced_and_not_with_no_color(
    populated: Store, li_env: dict[str, str]
) -> None:
    forced = li({**li_env, "FORCE_COLOR": "1"}, "status")
    assert "\x1b[1;32mcompleted" in forced.stdout  # bold green
    plain = li({**li_env, "FORCE_COLOR": "1", "NO_COLOR": "1"}, "status")
    assert "\x1b[1;32m" not in plain.stdout
    assert "\x1b[31m" not in plain.stdout


def test_no_database_yet(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert status_cli.main(["--db", db_url]) == 0
    assert capsys.readouterr().out.startswith("no runs yet")
    assert status_cli.main(["--db", db_url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert li_main(["status", "--db", db_url, "some-id"]) == 2
    assert "no record 'some-id'" in capsys.readouterr().err


def test_no_database_yet_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "absent" / "state.db"
    assert status_cli.main(["--db", str(db)]) == 0
    assert li_main(["status", "--db", str(db), "some-id"]) == 2
    assert "no lirun database" in capsys.readouterr().err
    assert not db.exists()
    assert not db.parent.exists()


def test_status_never_migrates_or_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    db = tmp_path / "state.db"
    with sqlite3.connect(db) as conn:  # a database, but no lirun schema: a read-only open
        conn.execute("CREATE TABLE other (x)")  # cannot migrate it
    conn.close()
    before = db.read_bytes()
    assert li_main(["status", "--db", str(db)]) == 2
    assert "li db migrate" in capsys.readouterr().err
    assert db.read_bytes() == before
    db.write_bytes(b"")  # an empty file is named as such, and left as it is
    assert li_main(["status", "--db", str(db)]) == 2
    assert "is empty (0 bytes)" in capsys.readouterr().err
    assert db.read_bytes() == b""


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90),
        ("90s", 90),
        ("30m", 1800),
        ("2h", 7200),
        ("1.5d", 129600),
        ("1w", 604800),
        ("1h30m", 5400),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert status_cli.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "h", "-1h", "2x", "30m1h", "0", "9" * 40 + "w"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        status_cli.parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (-3, "0s"), (42, "42s"), (185, "3m05s"), (7620, "2h07m"), (273600, "3d04h")],
)
def test_format_span(seconds: float | None, text: str) -> None:
    assert format_span(seconds) == text


def test_status_styles() -> None:
    assert status_style("session", "completed") == "bold green"
    assert status_style("session", "running") == "yellow"
    assert status_style("session", "failed") == "bold red"
    assert status_style("session", "timed_out") == "magenta"
    assert status_style("play", "merged") == "bold green"


def test_record_fields_skip_empty_values() -> None:
    row = {"status": "running", "status_reason_code": "bogus.code.x", "created_at": 0.0}
    labels = dict(record_fields("session", row, now=10.0))
    assert labels["reason"] == "unknown"
    assert labels["duration"] == "10s"
    assert "exit code" not in labels
    assert "run dir" not in labels


def test_branch_id_names_its_latest_execution(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    store.sessions.create(id="first", branch_id="conv-1")
    store.sessions.create(id="second", branch_id="conv-1", resumed_from="first")
    assert li_main(["status", "--json", "conv-1"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert (record["id"], record["resumed_from"]) == ("second", "first")


def test_things_are_named_by_what_they_are(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    """A session's ``branch_id`` is the conversation `li agent --resume` continues, not a
    git branch; a play's branch is its git branch, its merge commit what it merged as."""
    store.sessions.create(id="conv-1", branch_id="20260101T000000-aaaaaa", owner_pid=None)
    show = store.shows.create(topic="t")
    play = store.shows.create_play(show_id=show.id, name="api")
    store.update_fields("play", play.id, {"branch": "show/t--api-a1", "merge_sha": "abc123"})
    assert li_main(["status", "conv-1"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"conversation\s+20260101T000000-aaaaaa", out)
    assert "branch" not in out
    assert li_main(["status", play.id]) == 0
    out = capsys.readouterr().out
    assert re.search(r"git branch\s+show/t--api-a1", out)
    assert re.search(r"merged as\s+abc123", out)

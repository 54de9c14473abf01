"""Lists of everything from the command line, on both backends: ``li flow list``,
``li show list`` (--status, --since, --json), ``li status --kind``, ``li attention``;
and the sentences and one-line commands a person reads (``li schedule add``,
``li flow run --dry-run``)."""

from __future__ import annotations

import json
import time

import pytest

from lirun.cli.main import main
from lirun.cli.schedule import added_sentence
from lirun.flows.preview import typed_command
from lirun.store import Store
from lirun.store.rows import ScheduleRow
from support.storekit import raw_write


def li(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = main(list(args))
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _flow(store: Store, status: str, age: float = 0.0) -> str:
    inv = store.invocations.create(skill="/tmp/some/where/fan.yaml")
    raw_write(
        store,
        "UPDATE invocations SET kind = 'flow', status = :s, created_at = :at WHERE id = :id",
        {"s": status, "at": time.time() - age, "id": inv.id},
    )
    return str(inv.id)


def test_flow_list_filters_by_status_and_since(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = li(capsys, "flow", "list")
    assert code == 0
    assert out == "no flows yet (li flow run FILE starts one)\n"
    old = _flow(store, "failed", age=3 * 3600)
    new = _flow(store, "completed")
    store.invocations.create(skill="manual")  # not a flow
    code, out, _ = li(capsys, "flow", "list")
    lines = out.splitlines()
    assert code == 0
    assert lines[0].split()[:3] == ["ID", "FLOW", "STATUS"]
    assert [line.split()[0] for line in lines[1:]] == [new, old]
    assert "fan.yaml" in lines[1]
    assert "/tmp/some" not in out
    code, out, _ = li(capsys, "flow", "list", "--status", "failed", "--json")
    assert [r["id"] for r in json.loads(out)] == [old]
    code, out, _ = li(capsys, "flow", "list", "--since", "1h", "--json")
    assert [r["id"] for r in json.loads(out)] == [new]
    code, out, _ = li(capsys, "flow", "list", "--status", "merged")
    assert code == 2
    code, out, _ = li(capsys, "flow", "list", "--status", "aborted")
    assert code == 0
    assert out == "no flows match these filters\n"


def test_show_list_counts_plays_and_filters(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    done = store.shows.create(topic="auth")
    live = store.shows.create(topic="billing")
    raw_write(store, "UPDATE shows SET status = 'completed' WHERE id = :id", {"id": done.id})
    for name, status in (("api", "merged"), ("db", "escalated")):
        play = store.shows.create_play(show_id=done.id, name=name)
        raw_write(
            store, "UPDATE plays SET status = :s WHERE id = :id", {"s": status, "id": play.id}
        )
    code, out, _ = li(capsys, "show", "list")
    lines = out.splitlines()
    assert code == 0
    assert lines[0].split()[:3] == ["ID", "TOPIC", "STATUS"]
    assert [line.split()[0] for line in lines[1:]] == [live.id, done.id]
    assert "1/2" in lines[2]
    code, out, _ = li(capsys, "show", "list", "--status", "completed", "--json")
    [row] = json.loads(out)
    assert row["id"] == done.id
    assert row["plays"] == {"merged": 1, "escalated": 1}
    assert li(capsys, "show", "list", "--status", "failed")[0] == 2


def test_status_lists_each_kind(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    show = store.shows.create(topic="auth")
    play = store.shows.create_play(show_id=show.id, name="models")
    flow = _flow(store, "running")
    raw_write(
        store,
        "INSERT INTO schedules (id, name, spec, action_kind, enabled, status, created_at, "
        "updated_at) VALUES ('s1', 'nightly', 'every 1h', 'run', 1, 'enabled', 1, 1)",
    )
    srun = store.schedules.create_run(action_kind="run", schedule_id="s1")
    code, out, _ = li(capsys, "status", "--kind", "play")
    assert code == 0
    assert out.splitlines()[0].split()[:3] == ["ID", "PLAY", "SHOW"]
    assert play.id in out
    assert "models" in out
    assert show.id in out
    code, out, _ = li(capsys, "status", "--kind", "schedule_run", "--json")
    [row] = json.loads(out)
    assert row["id"] == srun.id
    assert row["schedule"] == "nightly"
    code, out, _ = li(capsys, "status", "--kind", "schedule_run")
    assert "nightly" in out
    assert "ACTION" in out.splitlines()[0]
    code, out, _ = li(capsys, "status", "--kind", "invocation", "--status", "running")
    assert flow in out
    assert "fan.yaml" in out
    code, _, err = li(capsys, "status", "--kind", "play", "--status", "failed")
    assert code == 2
    assert "a play is never failed" in err
    assert li(capsys, "status", "--kind", "play", play.id)[0] == 2


def test_attention_lists_what_needs_you_with_what_to_do(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = li(capsys, "attention")
    assert code == 0
    assert out == "nothing needs you\n"
    show = store.shows.create(topic="auth")
    play = store.shows.create_play(show_id=show.id, name="api")
    raw_write(
        store,
        "UPDATE plays SET status = 'escalated', "
        "status_reason_code = 'play.escalated.merge_conflict' WHERE id = :id",
        {"id": play.id},
    )
    flow = _flow(store, "failed")
    code, out, _ = li(capsys, "attention")
    lines = out.splitlines()
    assert code == 1
    assert lines[0] == "2 things need you:"
    assert lines[1].startswith("- play api of show auth escalated (play.escalated.merge_conflict")
    assert lines[2] == f"    li show status {show.id}"
    assert lines[4] == f"    li logs {flow}; li flow resume {flow}"
    code, out, _ = li(capsys, "attention", "--json")
    assert code == 1
    assert [i["kind"] for i in json.loads(out)] == ["play", "flow"]


def test_a_schedule_add_confirms_in_a_sentence() -> None:
    now = time.mktime((2026, 12, 1, 10, 40, 0, 0, 0, -1))
    given = {"name": "tick", "status": "enabled", "next_due_at": int(now) + 3}
    row = ScheduleRow.from_row({**dict.fromkeys(ScheduleRow._fields), **given})
    assert added_sentence(row, now) == "added schedule tick; next run 10:40:03 (in 3 s)"
    later = row._replace(next_due_at=int(now) + 2 * 86400)
    assert added_sentence(later, now) == (
        "added schedule tick; next run 2026-12-03 10:40:00 (in 2 d)"
    )
    off = row._replace(status="disabled")
    assert added_sentence(off, now) == (
        "added schedule tick, disabled: it runs once `li schedule enable tick`"
    )


@pytest.mark.parametrize(
    ("argv", "typed"),
    [
        (("sh", "-c", "echo 'hi there' > out.txt"), "echo 'hi there' > out.txt"),
        (("sh", "-c", "make test\n"), "make test"),
        (("sh", "-c", 'echo one\necho "two"\n'), "sh -c $'echo one\\necho \"two\"'"),
        (("printf", "%s\n", "a b"), "printf $'%s\\n' 'a b'"),
        (("pytest", "-q", "tests/x.py"), "pytest -q tests/x.py"),
    ],
)
def test_a_dry_runs_commands_are_one_line_as_typed(argv: tuple[str, ...], typed: str) -> None:
    assert typed_command(argv) == typed
    assert "\n" not in typed_command(argv)


def test_a_schedule_runs_status_names_what_it_produced(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    """``li status`` on a schedule run names its schedule and the record it made, with
    that record's status and reason; a record gone since shows ``?``."""
    raw_write(
        store,
        "INSERT INTO schedules (id, name, spec, action_kind, enabled, status, created_at, "
        "updated_at) VALUES ('s1', 'nightly', 'every 1h', 'flow', 1, 'enabled', 1, 1)",
    )
    flow = store.invocations.create(skill="flow", id="flow-made")
    store.update_status(
        "invocation", flow.id, new_status="failed", reason_code="run.failed.exception"
    )
    made = store.schedules.create_run(action_kind="flow", schedule_id="s1", invocation_id=flow.id)
    gone = store.schedules.create_run(action_kind="agent", schedule_id="s1")
    raw_write(store, "UPDATE schedule_runs SET session_id = 'gone' WHERE id = :id", {"id": gone.id})
    code, out, _ = li(capsys, "status", made.id, "--json")
    assert code == 0
    shown = json.loads(out)
    assert (shown["schedule"], shown["produced"]) == (
        "nightly",
        "invocation flow-made failed run.failed.exception",
    )
    code, out, _ = li(capsys, "status", gone.id, "--json")
    assert json.loads(out)["produced"] == "run gone ?"

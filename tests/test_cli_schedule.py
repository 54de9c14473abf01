"""``li schedule`` on both backends: add, list, show, enable, disable, delete, apply,
runs; bad input exits 2 saying what was wrong and writes nothing; ``li wait`` still
resolves a schedule run's id."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lirun.cli.main import main
from lirun.providers.registry import providers
from lirun.store import Store
from support.cli import li_command
from support.workerkit import next_due


def li(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = main(["schedule", *args])
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def history(store: Store, name: str) -> list[str]:
    row = store.schedules.get(name)
    assert row is not None
    return [t.reason_code for t in store.list_transitions("schedule", row.id)]


def test_add_list_show_enable_disable_delete(
    store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = li(
        capsys, "add", "nightly", "--cron", "30 2 * * *", "--tz", "Europe/Berlin",
        "--retries", "1", "--", "agent", "claude", "review it", "--cwd", str(tmp_path),
    )  # fmt: skip
    assert code == 0, out
    assert out.startswith("added schedule nightly; next run "), out
    code, out, _ = li(capsys, "add", "poll", "--every", "5m", "--json", "--", "run", "true")
    assert code == 0
    assert json.loads(out)["spec"] == "every 5m"
    code, out, _ = li(capsys, "list")
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["NAME", "STATUS", "TRIGGER"]
    assert "cron '30 2 * * *' Europe/Berlin" in lines[1]
    assert "Z" in lines[1]
    code, out, _ = li(capsys, "list", "--json")
    assert [r["name"] for r in json.loads(out)] == ["nightly", "poll"]
    code, out, _ = li(capsys, "show", "nightly")
    assert "--retries 1" in out
    assert str(tmp_path) in out
    assert "Europe/Berlin" in out
    assert li(capsys, "disable", "nightly")[1] == "disabled schedule nightly\n"
    code, _, err = li(capsys, "disable", "nightly")
    assert code == 0
    assert "already disabled" in err
    assert li(capsys, "enable", "nightly")[0] == 0
    assert history(store, "nightly") == [
        "schedule_definition.enabled.created",
        "schedule_definition.disabled.user",
        "schedule_definition.enabled.user",
    ]
    code, out, _ = li(capsys, "show", "nightly", "--json")
    shown = json.loads(out)
    assert shown["schedule"]["status"] == "enabled"
    assert len(shown["history"]) == 3
    assert li(capsys, "delete", "poll")[1] == "deleted schedule poll\n"
    assert [r.name for r in store.schedules.list_all()] == ["nightly"]
    assert li(capsys, "add", "poll", "--every", "1m", "--", "run", "true")[0] == 0


@pytest.mark.parametrize(
    ("args", "says"),
    [(["add", "x", "--every", "5.5", "--", "run", "true"], "whole seconds"),
     (["add", "x", "--every", "evry", "--", "run", "true"], "'evry' is not a duration"),
     (["add", "x", "--cron", "61 * * * *", "--", "run", "true"], "Bad minute"),
     (["add", "x", "--cron", "* * * * *", "--tz", "Nowhere/Town", "--", "run", "true"],
      "unknown time zone"),
     (["add", "x", "--at", "2026-12-24T18:00:00", "--", "run", "true"], "no UTC offset"),
     (["add", "x", "--at", "2001-01-01T00:00:00Z", "--", "run", "true"], "in the past"),
     (["add", "x", "--every", "1h", "--at", "2030-01-01T00:00:00Z", "--", "run", "true"],
      "exactly one trigger"),
     (["add", "x", "--every", "1h"], "no action"),
     (["add", "x", "--every", "1h", "--"], "no action given"),
     (["add", "bad name", "--every", "1h", "--", "run", "true"], "is not valid"),
     (["add", "x", "--every", "1h", "--budget-window", "1d", "--", "run", "true"],
      "needs --budget-usd"),
     (["add", "x", "--every", "1h", "--max-runs", "0", "--", "run", "true"], ">= 1"),
     (["add", "x", "--every", "1h", "--", "agent", "claude", "hi", "--resume", "b"],
      "new conversation"),
     (["add", "x", "--every", "1h", "--", "flow", "no-such.yaml"], "does not exist"),
     (["add", "x", "--every", "1h", "--overlap", "sometimes", "--", "run", "true"],
      "invalid choice"),
     (["add", "x", "--every", "99999999999d", "--", "run", "true"], "longer than 366d"),
     (["add", "x", "--at", "9999-12-31T23:59:59-14:00", "--", "run", "true"], "too far"),
     (["enable", "ghost"], "no schedule named 'ghost'"),
     (["runs", "ghost"], "no schedule named 'ghost'")],
)  # fmt: skip
def test_bad_input_exits_2_and_writes_nothing(
    store: Store, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    code, out, err = li(capsys, *args)
    assert code == 2
    assert says in err
    assert out == ""
    assert store.schedules.list_all(include_deleted=True) == []


def test_a_usage_error_does_not_create_the_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "fresh.db"
    monkeypatch.setenv("LIRUN_DB_URL", str(db))
    assert li(capsys, "add", "x", "--every", "soon", "--", "run", "true")[0] == 2
    assert not db.exists()


def test_a_taken_name_exits_2(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    assert li(capsys, "add", "x", "--every", "1h", "--", "run", "true")[0] == 0
    code, _, err = li(capsys, "add", "x", "--every", "2h", "--", "run", "true")
    assert code == 2
    assert "already exists" in err
    assert store.schedules.list_all()[0].spec == "every 1h"


def test_a_usd_budget_says_it_cannot_see_codex_runs(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    """Codex reports no cost: add says so at once, and show says what has been spent."""
    code, _, err = li(capsys, "add", "cx", "--every", "1h", "--budget-usd", "2", "--", "agent",
                      "codex", "hi")  # fmt: skip
    assert code == 0
    assert "codex reports no cost" in err
    assert "--budget-tokens" in err
    code, _, err = li(capsys, "add", "cl", "--every", "1h", "--budget-usd", "2", "--", "agent",
                      "claude", "hi")  # fmt: skip
    assert code == 0
    assert err == ""
    code, out, _ = li(capsys, "show", "cx")
    spent = [line for line in out.splitlines() if line.startswith("spent")]
    costless = ", ".join(p.name for p in providers() if not p.capabilities.reports_cost)
    assert "codex" in costless
    assert spent == ["spent      no cost recorded, 0 tokens (of --budget-usd 2.0; runs that "
                     f"record no cost are invisible to it (those of {costless}))"]  # fmt: skip


SCHEDULES = """\
missing: disable
schedules:
  - name: nightly
    cron: "30 2 * * *"
    tz: Europe/Berlin
    action: agent claude "review the open pull requests" --timeout 1800
  - name: poll
    every: 5m
    action: [run, sh, -c, "echo polled"]
    overlap: allow
    retries: 2
"""


def test_apply_dry_run_then_apply_then_update(
    store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert li(capsys, "add", "legacy", "--every", "1h", "--", "run", "true")[0] == 0
    file = tmp_path / "schedules.yaml"
    file.write_text(SCHEDULES)
    code, out, err = li(capsys, "apply", str(file), "--dry-run")
    assert code == 0
    assert "dry run" in err
    assert [line.split(None, 2) for line in out.splitlines()] == [
        ["CHANGE", "SCHEDULE", "DETAIL"],
        ["create", "nightly", "-"],
        ["create", "poll", "-"],
        ["disable", "legacy", "not in the file"],
    ]
    assert [r.name for r in store.schedules.list_all()] == ["legacy"]
    assert li(capsys, "apply", str(file))[0] == 0
    rows = {r.name: r for r in store.schedules.list_all()}
    assert rows["legacy"].status == "disabled"
    assert rows["poll"].action_json["cwd"] == str(tmp_path)  # the file's directory
    assert rows["poll"].policies_json["overlap"] == "allow"
    file.write_text(SCHEDULES.replace("retries: 2", "retries: 3\n    enabled: false"))
    code, out, _ = li(capsys, "apply", str(file), "--json")
    ops = {c["name"]: c for c in json.loads(out)["changes"]}
    assert ops["poll"]["op"] == "update"
    assert ops["nightly"]["op"] == "unchanged"
    assert ops["poll"]["changes"] == {"policies.retries": [2, 3], "enabled": [True, False]}
    assert history(store, "poll")[-1] == "schedule_definition.disabled.updated"


def test_apply_takes_require_change_for_a_run_action(
    store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    file = tmp_path / "schedules.yaml"
    file.write_text(
        "schedules:\n"
        "  - name: deploy\n    every: 1h\n    action: run make deploy\n    require_change: true\n"
        "  - name: probe\n    every: 1h\n    action: run --require-change test -f ok\n"
        "  - name: plain\n    every: 1h\n    action: run true\n"
    )
    assert li(capsys, "apply", str(file))[0] == 0
    rows = {r.name: r for r in store.schedules.list_all()}
    assert rows["deploy"].action_json["task"]["require_change"] is True
    assert rows["probe"].action_json["task"]["require_change"] is True
    assert rows["plain"].action_json["task"]["require_change"] is False
    flow = tmp_path / "f.yaml"
    flow.write_text("legs:\n  - {id: a, run: [echo, hi]}\n")
    file.write_text(
        "schedules:\n  - name: f\n    every: 1h\n    action: flow f.yaml\n"
        "    require_change: true\n"
    )
    code, _, err = li(capsys, "apply", str(file))
    assert code == 2
    assert "schedules.yaml:5: schedule 'f': require_change: applies to run" in err


def test_apply_takes_every_as_seconds_or_a_duration(
    store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    file = tmp_path / "schedules.yaml"
    file.write_text(
        "schedules:\n  - name: a\n    every: 300\n    action: run true\n"
        "  - name: b\n    every: 1h30m\n    action: run true\n"
        "    start_deadline: 90\n    missed_grace: 2m\n"
    )
    assert li(capsys, "apply", str(file))[0] == 0
    rows = {r.name: r for r in store.schedules.list_all()}
    assert rows["a"].trigger_json["seconds"] == 300
    assert rows["b"].trigger_json["seconds"] == 5400
    assert rows["b"].policies_json["missed_grace"] == 120


@pytest.mark.parametrize(
    ("text", "says"),
    [("schedules:\n  - name: a\n    every: 1h\n    action: run true\n    colour: red\n",
      "schedules.yaml:5: unknown schedule key 'colour'"),
     ("schedule: []\n", "schedules.yaml:1: unknown top-level key 'schedule'; did you mean "
      "'schedules'?"),
     ("schedules:\n  - name: a\n    evry: 1h\n    action: run true\n",
      "schedules.yaml:3: unknown schedule key 'evry'; did you mean 'every'?"),
     ("schedules:\n  - name: a\n    every: 5x\n    action: run true\n",
      "'5x' is not a duration; give a number of seconds (90, 2.5) or 30s, 5m"),
     ("schedules:\n  - name: a\n    cron: '99 * * * *'\n    action: run true\n",
      "schedules.yaml:3: schedule 'a': cron expression"),
     ("schedules:\n  - name: a\n    every: 1h\n    action: run true\n"
      "  - name: a\n    every: 2h\n    action: run true\n",
      "schedules.yaml:5: schedule 'a' is defined twice"),
     ("schedules:\n  - name: a\n    every: 1h\n    action: deploy\n",
      "schedules.yaml:4: schedule 'a': unknown action"),
     ("schedules:\n  - name: a\n    at: 2030-01-01T00:00:00Z\n    action: run true\n",
      "quote the time"),
     ("missing: purge\nschedules: []\n", "schedules.yaml:1: missing: 'purge'"),
     ("schedules:\n  - name: a\n    every: 1h\n    action: run true\n    require_change: 1\n",
      "schedules.yaml:5: schedule 'a': require_change: 1; expected true or false"),
     ("schedules: [\n", "invalid YAML")],
)  # fmt: skip
def test_apply_refuses_bad_files_with_file_and_line(
    store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, says: str
) -> None:
    file = tmp_path / "schedules.yaml"
    file.write_text(text)
    code, _, err = li(capsys, "apply", str(file))
    assert code == 2, err
    assert says in err, err
    assert store.schedules.list_all(include_deleted=True) == []


def test_runs_lists_a_schedules_runs_and_li_wait_resolves_them(
    store: Store, capsys: pytest.CaptureFixture[str], li_env: dict[str, Any]
) -> None:
    assert li(capsys, "add", "poll", "--every", "1m", "--", "run", "true")[0] == 0
    code, out, err = li(capsys, "runs", "poll")
    assert code == 0
    assert out == ""
    assert "no runs yet" in err
    row = store.schedules.get("poll")
    assert row is not None
    run = store.schedules.insert_due_run(
        schedule_id=row.id, due_at=next_due(row), action_kind="run"
    )
    assert run is not None
    for status, reason in (
        ("running", "schedule.running.started"),
        ("completed", "schedule.completed.ok"),
    ):
        store.update_status("schedule_run", run.id, new_status=status, reason_code=reason)
    code, out, _ = li(capsys, "runs", "poll", "--json")
    assert [(r["id"], r["status"], r["due_at"]) for r in json.loads(out)] == [
        (run.id, "completed", row.next_due_at)
    ]
    header, line = li(capsys, "runs", "poll")[1].splitlines()
    assert header.split() == [
        "RUN",
        "STATUS",
        "DUE",
        "(UTC)",
        "STARTED",
        "(UTC)",
        "ENDED",
        "(UTC)",
        "EVENT",
        "REASON",
    ]
    assert line.split()[:2] == [run.id, "completed"]
    assert line.split()[-2] == "-"  # a due time's run, no event
    assert line.split()[-1] == "schedule.completed.ok"
    waited = subprocess.run(
        li_command("wait", "--timeout", "10", run.id),
        env=li_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert waited.returncode == 0, waited.stderr
    assert run.id in waited.stdout
    assert "completed" in waited.stdout


def test_help_names_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = li(capsys, "add", "--help")
    assert code == 0
    assert "exit codes" in out
    assert "-- ACTION" in out


WORDS = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12)
TRIGGER_TEXT = st.one_of(
    WORDS,
    st.sampled_from(["* * * * *", "0 0 29 2 *", "*/0 * * * *", "L * * * *", "0 0 * * 8",
                     "1h", "0s", "99999999999d", "2030-01-01T00:00:00Z",
                     "2030-02-30T00:00:00Z", "9999-12-31T23:59:59+14:00"]),
)  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    trigger=st.sampled_from(["--cron", "--every", "--at"]),
    text=TRIGGER_TEXT,
    tz=st.one_of(st.none(), WORDS, st.sampled_from(["UTC", "Europe/Berlin"])),
    action=st.one_of(
        st.just(["run", "true"]),
        st.lists(st.one_of(WORDS, st.sampled_from(["agent", "run", "flow", "--", "--cwd"])),
                 max_size=5),
    ),
)  # fmt: skip
def test_add_never_tracebacks(trigger: str, text: str, tz: str | None, action: list[str]) -> None:
    import os
    import tempfile

    from lirun.errors import LirunError

    argv = ["add", "fuzz", trigger, text, *(["--tz", tz] if tz is not None else []), "--"]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["LIRUN_DB_URL"] = os.path.join(tmp, "state.db")
        try:
            from lirun.cli.schedule import main as schedule_main
            from lirun.settings import Settings

            code = schedule_main([*argv, *action], Settings.from_env())
        except LirunError as exc:
            code = exc.exit_code
        except SystemExit as exc:
            code = int(exc.code or 0)
        finally:
            del os.environ["LIRUN_DB_URL"]
    assert code in (0, 2)

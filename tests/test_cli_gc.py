"""`li gc` as a user runs it, on both backends: `li wait` prints the same line for a pruned
id, `li status` says it was pruned, bad input gets one line and exit 2, and a policy
stored with --schedule is applied by a real worker."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from lirun.schedules.submit import fire_now
from lirun.store import open_store
from support.cli import li_command
from support.workerkit import status_is, until, workers


def li(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(li_command(*args), env=env, capture_output=True, text=True, timeout=60)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def started_run(env: dict[str, str], *command: str) -> str:
    done = li(env, "run", "--json", "--", *command, check=False)
    return str(json.loads(done.stdout.splitlines()[-1])["run_id"])


def test_wait_prints_the_same_line_for_a_pruned_id(li_env: dict[str, str], db_url: str) -> None:
    ok = started_run(li_env, "sh", "-c", "echo done > $LIRUN_ARTIFACT_DIR/out.txt")
    bad = started_run(li_env, "sh", "-c", "exit 3")
    before = li(li_env, "wait", ok, bad, check=False)
    assert before.returncode == 1  # one of the two failed
    time.sleep(1.1)
    gc = li(li_env, "gc", "--older-than", "1s", "--json")
    summary = json.loads(gc.stdout)
    assert summary["pruned"] == {"run": 2}
    assert summary["refused"] == []
    assert summary["bytes"]["files"] > 0
    assert summary["run_dirs_removed"] == 2
    assert "runs: 2 examined, 2 pruned" in gc.stderr  # progress on stderr
    after = li(li_env, "wait", ok, bad, check=False)
    assert (after.returncode, after.stdout) == (before.returncode, before.stdout)
    artifact_dir = before.stdout.split("artifact_dir=")[1].split("\t")[0]
    assert artifact_dir != "-"
    assert not Path(artifact_dir).exists()
    status = li(li_env, "status", ok)
    assert "(pruned)" in status.stdout
    assert "pruned " in status.stdout
    data = json.loads(li(li_env, "status", ok, "--json").stdout)
    assert data["pruned_at"]
    assert data["status"] == "completed"
    assert data["exit_code"] == 0
    again = json.loads(li(li_env, "gc", "--older-than", "1s", "--json").stdout)
    assert again["pruned"] == {}
    assert again["run_dirs_removed"] == 0


def test_dry_run_and_keep_failed_from_the_command_line(li_env: dict[str, str]) -> None:
    ok = started_run(li_env, "true")
    bad = started_run(li_env, "false")
    time.sleep(1.1)
    dry = li(li_env, "gc", "--older-than", "1s", "--dry-run")
    assert dry.stdout.startswith("would prune 2 run(s)")
    assert dry.stdout.splitlines()[1:] == ["  runs: completed 1, failed 1"]  # a count per status
    listed = json.loads(li(li_env, "gc", "--older-than", "1", "--dry-run", "--json").stdout)
    assert sorted((w["id"], w["status"]) for w in listed["would_prune"]) == sorted(
        [(ok, "completed"), (bad, "failed")]
    )
    assert listed["pruned"] == {"run": 2}
    assert {w["kind"] for w in listed["would_prune"]} == {"run"}
    real = json.loads(li(li_env, "gc", "--older-than", "9999d", "--json").stdout)
    assert "would_prune" not in real  # no ceiling on --older-than; nothing is that old
    assert real["policy"]["older_than"] == 9999 * 86400
    kept = li(li_env, "gc", "--older-than", "1s", "--keep-failed")
    assert kept.stdout.startswith("pruned 1 run(s)")
    assert "kept 1" in kept.stdout
    rows = {r: json.loads(li(li_env, "status", r, "--json").stdout) for r in (ok, bad)}
    assert rows[ok]["pruned_at"]
    assert rows[bad]["pruned_at"] is None


def test_refusals_are_named_on_stderr(li_env: dict[str, str], db_url: str) -> None:
    store = open_store(db_url)
    try:
        store.sessions.create(id="r-live", status="running", owner_pid=None)
    finally:
        store.close()
    time.sleep(1.1)
    done = li(li_env, "gc", "--older-than", "1s")
    assert "not pruned: run r-live: still running" in done.stderr
    assert "refused 1 still in use" in done.stdout


def test_bad_input_is_one_line_and_exit_2(li_env: dict[str, str], tmp_path: Path) -> None:
    cases = [
        (["gc", "--older-than", "5x"], "--older-than '5x' is not a duration"),
        (["gc", "--older-than=-3d"], "--older-than '-3d' is negative"),
        (["gc", "--older-than", "9" * 40 + "d"], "is longer than any duration"),
        (["gc", "--older-than", "99999999d"], "give at most 36600d"),
        (["gc", "--older-than", "1d", "--status", "running"], "is not a final status"),
        (["gc", "--older-than", "1d", "--batch", "0"], "--batch 0"),
        (["gc", "--older-than", "1d", "--schedule", "1d", "--dry-run"], "--schedule"),
        (["--db", str(tmp_path / "none.db"), "gc", "--older-than", "1d"], "no lirun database"),
        (["schedule", "add", "r", "--every", "1d", "--", "gc"], "--older-than DUR is required"),
        (
            ["schedule", "add", "r", "--every", "1d", "--", "gc", "--older-than", "1d", "x"],
            "unexpected 'x'",
        ),
    ]
    for args, text in cases:
        done = li(li_env, *args, check=False)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stdout == ""
        assert text in done.stderr
        assert len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "none.db").exists()
    missing = li(li_env, "gc", check=False)
    assert missing.returncode == 2
    assert "--older-than" in missing.stderr


def test_help_lists_the_exit_codes(li_env: dict[str, str]) -> None:
    text = li(li_env, "gc", "--help").stdout
    assert "exit codes:" in text
    assert "130" in text
    assert "--schedule EVERY" in text


def test_a_stored_policy_is_applied_by_a_worker(
    li_env: dict[str, str], db_url: str, tmp_path: Path
) -> None:
    old = started_run(li_env, "true")
    stored = li(li_env, "gc", "--older-than", "1s", "--keep-failed", "--schedule", "1d")
    assert stored.stdout.startswith("schedule gc: li gc --older-than 1s --keep-failed every 1d")
    again = json.loads(li(li_env, "gc", "--older-than", "2s", "--schedule", "1d", "--json").stdout)
    assert again["action_json"]["retention"]["older_than"] == 2  # replaced, not a second one
    time.sleep(2.1)
    store = open_store(db_url)
    try:
        with workers(li_env, tmp_path, "--allow-root", str(tmp_path)):  # gc runs no code there
            run = fire_now(store, "gc")
            done = until(lambda: status_is(store, run.id, "completed", "failed"), timeout=30)
        assert done["status"] == "completed", done["status_reason_summary"]
        assert "pruned 1 run(s)" in done["status_reason_summary"]
        row = store.get_entity("session", old)
        assert row is not None
        assert row["pruned_at"]
        assert "schedule run" in row["pruned_by"]
    finally:
        store.close()

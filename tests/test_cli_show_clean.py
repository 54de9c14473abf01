"""``li show clean`` and what ``li show run --dry-run`` says about leftovers, end to end:
a show whose one play merges and whose other escalates, aborted, then cleaned; real git
repositories, real ``li`` processes, both backends for the main path."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from support.cli import li_command
from support.gitkit import GIT_ENV, git
from support.showfilekit import write_show

TIMEOUT = 120

# "good" merges; "bad" fails its gate on both attempts and escalates.
ESCALATING_SHOW = """
topic: clean
repo: repo
base: main
gate: "test ! -f bad.txt"
plays:
  - name: good
    run: "echo g > good.txt && git add good.txt && git commit -q -m good"
  - name: bad
    run: "echo b >> bad.txt && git add bad.txt && git commit -q -m bad"
"""


def li(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        li_command(*args),
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def _aborted_show(tmp_path: Path, env: dict[str, str]) -> tuple[Path, str]:
    path = write_show(tmp_path, ESCALATING_SHOW)
    first = li(env, "show", "run", str(path), "--json")
    assert first.returncode == 1, first.stderr
    show_id = json.loads(first.stdout)["show_id"]
    aborted = li(env, "show", "abort", show_id, "--actor", "me", "--justification", "retry")
    assert aborted.returncode == 0, aborted.stderr
    return path, show_id


def test_clean_keeps_unmerged_work_until_forced_and_a_new_run_then_starts(
    tmp_path: Path, li_env: dict[str, str], lirun_home: Path
) -> None:
    env = {**li_env, **GIT_ENV}
    repo = tmp_path / "repo"
    path, show_id = _aborted_show(tmp_path, env)
    root = lirun_home / "worktrees" / show_id
    assert (root / "bad").is_dir()  # kept for a person after the escalation
    # the dry run says what the real run would trip on, and exits 2
    dry = li(env, "show", "run", str(path), "--dry-run")
    assert dry.returncode == 2, dry.stderr
    assert "show/clean--bad-a2 is checked out in" in dry.stderr
    assert "integration branch show/clean has" in dry.stderr
    assert "a real run would stop on" in dry.stderr
    assert li(env, "show", "run", str(path)).returncode == 2  # as the dry run said
    # clean without --force: the worktrees go, the unmerged attempts stay, and why
    kept = li(env, "show", "clean", show_id, "--json")
    assert kept.returncode == 1, kept.stderr
    report = json.loads(kept.stdout)
    assert {i["name"] for i in report["kept"]} == {"show/clean--bad-a1", "show/clean--bad-a2"}
    assert all("unmerged: 1 commit(s)" in i["why"] for i in report["kept"])
    removed = {(i["kind"], Path(i["name"]).name) for i in report["removed"]}
    assert removed == {("worktree", "bad")}  # the abort removed the gate worktree
    assert not root.exists()
    assert git(repo, "rev-parse", "--verify", "show/clean--bad-a1")  # still there
    # the dry run now names the unmerged attempts a new run would reset
    dry = li(env, "show", "run", str(path), "--dry-run", "--continue-integration")
    assert dry.returncode == 2
    assert "show/clean--bad-a1 (play bad's attempt" in dry.stderr
    # --force drops them; the integration branch (the show's result) stays
    forced = li(env, "show", "clean", show_id)
    assert forced.returncode == 1  # nothing was forced yet: same answer, said in words
    assert "kept     branch   show/clean--bad-a2: unmerged" in forced.stdout
    forced = li(env, "show", "clean", show_id, "--force")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert "removed  branch   show/clean--bad-a1: --force: dropped 1 commit(s)" in forced.stdout
    assert "integration branch show/clean is the show's result" in forced.stdout
    assert git(repo, "branch", "--list", "show/clean--*") == ""
    assert git(repo, "rev-parse", "--verify", "show/clean")
    dry = li(env, "show", "run", str(path), "--dry-run", "--continue-integration")
    assert dry.returncode == 0, dry.stderr
    again = li(env, "show", "run", str(path), "--continue-integration", "--json")
    assert again.returncode == 1, again.stderr  # bad escalates again; it started
    assert json.loads(again.stdout)["show_id"] != show_id


def test_clean_removes_merged_and_abandoned_attempts_without_force(
    tmp_path: Path, li_env: dict[str, str]
) -> None:
    """A play whose first attempt failed its gate and whose second merged: its first
    attempt is abandoned, and the clean of the completed show removes it."""
    env = {**li_env, **GIT_ENV}
    path = write_show(
        tmp_path,
        """
        topic: redo
        repo: repo
        base: main
        gate: "test ! -f once.txt || test -f twice.txt"
        plays:
          - name: p
            run: "if [ -f ../marker ]; then echo 2 > twice.txt; else touch ../marker; fi;
              echo 1 > once.txt; git add -A; git commit -q -m try"
        """,
    )
    run = li(env, "show", "run", str(path), "--json")
    assert run.returncode == 0, run.stderr
    show_id = json.loads(run.stdout)["show_id"]
    repo = tmp_path / "repo"
    assert json.loads(run.stdout)["plays"][0]["attempt"] == 2
    # the engine removed the merged play's branches; leave two behind, as a crash between
    # the merge and that removal would: the failed first attempt (work no branch holds,
    # replaced by the second) and the merged second
    lost = git(repo, "commit-tree", "main^{tree}", "-p", "main", "-m", "first try")
    git(repo, "branch", "show/redo--p-a1", lost)
    git(repo, "branch", "show/redo--p-a2", "show/redo")
    cleaned = li(env, "show", "clean", show_id, "--json")
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    why = {i["name"]: i["why"] for i in json.loads(cleaned.stdout)["removed"]}
    assert why == {
        "show/redo--p-a1": "abandoned: attempt a2 replaced it and merged",
        "show/redo--p-a2": "merged: another branch holds all its commits",
    }
    assert git(repo, "branch", "--list", "show/redo--*") == ""


def test_clean_refuses_an_active_show_and_unknown_ids(
    tmp_path: Path, li_env: dict[str, str]
) -> None:
    env = {**li_env, **GIT_ENV}
    path = write_show(tmp_path, ESCALATING_SHOW)
    first = li(env, "show", "run", str(path), "--json")
    show_id = json.loads(first.stdout)["show_id"]
    refused = li(env, "show", "clean", show_id)
    assert refused.returncode == 2
    assert "is still active" in refused.stderr
    assert f"li show abort {show_id}" in refused.stderr
    assert (Path(li_env["LIRUN_HOME"]) / "worktrees" / show_id / "bad").is_dir()
    unknown = li(env, "show", "clean", "nosuchshow")
    assert unknown.returncode == 2
    assert len(unknown.stderr.strip().splitlines()) == 1
    helped = li(env, "show", "clean", "--help")
    assert helped.returncode == 0
    assert "exit codes:" in helped.stdout
    assert "--force" in helped.stdout

"""Agent legs running side by side in a git repository: each in its own worktree by
default; ``isolation: shared`` keeps the tree shared and its evidence cannot alone prove
work (fake providers, a real repository, both backends)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lirun.exec.task import Task
from lirun.exec.worktrees import Repo
from lirun.flows.engine import run_flow
from lirun.flows.spec import FlowSpec, LegSpec
from support.providerkit import fake_env
from support.storekit import opened


@pytest.fixture
def fake_claude(fake_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Fake claude on the environment; returns the argv log (one JSON line per call)."""
    log = tmp_path / "argv.jsonl"
    monkeypatch.setenv("LIRUN_CLAUDE_BIN", str(fake_bin / "claude"))
    return log


def _use(monkeypatch: pytest.MonkeyPatch, fixture: str, log: Path) -> None:
    for key, value in fake_env(fixture, argv_log=log, touch="work.txt", base={}).items():
        monkeypatch.setenv(key, value)


def _calls(log: Path) -> list[dict[str, Any]]:
    lines = log.read_text().splitlines()
    return [c for c in map(json.loads, lines) if c["argv"] != ["--version"]]


def _shared_agent_beside_a_command(repo: Path) -> FlowSpec:
    """An agent leg in the shared checkout running at the same time as a command leg."""
    return FlowSpec(
        legs=(
            LegSpec("agent", Task(agent="claude", prompt="edit"), isolation="shared"),
            LegSpec("beside", Task(run=("sh", "-c", "sleep 0.1; echo ok"))),
        ),
        cwd=str(repo),
        parallel=2,
    )


def test_parallel_agent_legs_each_get_a_worktree_and_leave_the_checkout_alone(
    db_url: str, repo: Path, fake_claude: Path, monkeypatch: pytest.MonkeyPatch, lirun_home: Path
) -> None:
    _use(monkeypatch, "claude/success.jsonl", fake_claude)
    spec = FlowSpec(
        legs=(
            LegSpec("one", Task(agent="claude", prompt="do one")),
            LegSpec("two", Task(agent="claude", prompt="do two")),
            LegSpec("review", Task(agent="claude", prompt="review"), depends_on=("one", "two")),
        ),
        cwd=str(repo),
        parallel=2,
    )
    report = run_flow(spec, db_url=db_url)
    assert report.status == "completed", report.reason_summary
    cwds = {Path(c["cwd"]).name: c["cwd"] for c in _calls(fake_claude)}
    root = lirun_home / "worktrees" / report.invocation_id
    assert cwds["one"] == str(root / "one")
    assert cwds["two"] == str(root / "two")
    assert Path(cwds["one"], "work.txt").exists()
    assert Path(cwds["two"], "work.txt").exists()
    # the join runs alone: in the flow's own tree, not a worktree
    assert str(repo) in cwds.values()
    branches = Repo(str(repo)).checked_out_branches()
    assert branches[f"lirun/flow/{report.invocation_id}/one"] == str(root / "one")
    with opened(db_url) as store:
        meta = {
            s.flow_leg: s.meta["flow"]
            for s in store.waits.invocation_sessions(report.invocation_id)
        }
    assert meta["one"]["isolation"] == "worktree"
    assert not meta["one"]["evidence_shared"]
    assert meta["one"]["branch"] == f"lirun/flow/{report.invocation_id}/one"
    assert meta["review"]["isolation"] == "shared"
    assert not meta["review"]["evidence_shared"]


def test_a_shared_leg_beside_others_cannot_prove_work_by_a_change_alone(
    db_url: str, repo: Path, fake_claude: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _use(monkeypatch, "claude/success_silent.jsonl", fake_claude)  # no reply, but a change
    spec = _shared_agent_beside_a_command(repo)
    report = run_flow(spec, db_url=db_url)
    legs = {leg.id: leg for leg in report.legs}
    assert legs["agent"].status == "completed"  # its own row saw a change
    assert (report.status, report.reason_code) == ("completed_empty", "run.completed_empty.leg")
    with opened(db_url) as store:
        row = store.get_entity("invocation", report.invocation_id) or {}
        session = store.get_entity("session", legs["agent"].session_id or "") or {}
    assert {"kind": "shared_evidence", "legs": ["agent"]} in row["status_evidence_refs"]
    assert session["metadata_json"]["flow"]["evidence_shared"] is True


def test_a_resume_reusing_a_shared_leg_that_proved_nothing_stays_completed_empty(
    db_url: str, repo: Path, fake_claude: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reusing a leg keeps what it counted for: a shared leg whose only proof was a change
    in the shared tree made the flow completed_empty, and resuming (which runs nothing
    new) must not turn that into a success."""
    from lirun.flows.engine import resume_flow

    _use(monkeypatch, "claude/success_silent.jsonl", fake_claude)
    spec = _shared_agent_beside_a_command(repo)
    first = run_flow(spec, db_url=db_url)
    assert first.status == "completed_empty", first.reason_summary
    again = resume_flow(first.invocation_id, db_url=db_url)
    assert all(leg.reused for leg in again.legs)
    assert (again.status, again.reason_code, again.exit_code) == (
        "completed_empty",
        "run.completed_empty.leg",
        1,
    )
    with opened(db_url) as store:
        row = store.get_entity("invocation", again.invocation_id) or {}
    assert {"kind": "shared_evidence", "legs": ["agent"]} in row["status_evidence_refs"]


def test_worktrees_are_decided_by_each_legs_cwd_and_need_a_commit(
    db_url: str, repo: Path, tmp_path: Path, fake_claude: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repository without a commit has nothing to branch a worktree from, so its legs
    share the tree (evidence marked shared) instead of all failing to set up; and a leg
    whose own cwd is in a repository is isolated there even when the flow's cwd is not
    (as --dry-run says)."""
    import subprocess

    from lirun.flows.preview import preview_flow

    _use(monkeypatch, "claude/success.jsonl", fake_claude)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    subprocess.run(["git", "init", "-q", str(fresh)], check=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    spec = FlowSpec(
        legs=(
            LegSpec("a", Task(agent="claude", prompt="a"), cwd=str(fresh)),
            LegSpec("b", Task(agent="claude", prompt="b"), cwd=str(fresh)),
            LegSpec("c", Task(agent="claude", prompt="c"), cwd=str(repo)),
        ),
        cwd=str(outside),
        parallel=3,
    )
    planned = {node.id: node.isolation for node in preview_flow(spec).nodes}
    assert planned == {"a": "shared", "b": "shared", "c": "worktree"}
    report = run_flow(spec, db_url=db_url)
    assert report.status == "completed", report.reason_summary
    with opened(db_url) as store:
        meta = {
            s.flow_leg: s.meta["flow"]
            for s in store.waits.invocation_sessions(report.invocation_id)
        }
    assert {leg: m["isolation"] for leg, m in meta.items()} == planned
    assert meta["a"]["evidence_shared"]
    assert meta["b"]["evidence_shared"]


def test_a_leg_whose_cwd_is_not_committed_cannot_get_a_worktree_and_says_why(
    db_url: str, repo: Path, lirun_home: Path
) -> None:
    """A worktree holds what HEAD holds: a leg whose cwd is an untracked directory has
    no such place there. The leg fails to set up naming its cwd and the ways out, and no
    worktree is left behind for it."""
    (repo / "scratch").mkdir()
    spec = FlowSpec(
        legs=(LegSpec("a", Task(run=("true",)), cwd="scratch", isolation="worktree"),),
        cwd=str(repo),
    )
    report = run_flow(spec, db_url=db_url)
    (leg,) = report.legs
    assert (leg.status, leg.reason_code, leg.session_id) == ("failed", "run.failed.setup", None)
    assert "scratch" in (leg.error or ""), leg.error
    assert "isolation: shared" in (leg.error or ""), leg.error
    assert "--cwd" not in (leg.error or "")
    assert not (lirun_home / "worktrees" / report.invocation_id).exists()


def test_an_agent_legs_leftover_work_is_committed_to_its_branch(
    db_url: str, repo: Path, fake_claude: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fake agent writes work.txt and commits nothing: at the end of the leg its work
    is a commit on its leg branch (the docs say the work lives on the branches), and the
    worktree is clean, so a clean can tell merged work from abandoned."""
    _use(monkeypatch, "claude/success.jsonl", fake_claude)
    spec = FlowSpec(
        legs=(
            LegSpec("one", Task(agent="claude", prompt="do one")),
            LegSpec("two", Task(agent="claude", prompt="do two")),
        ),
        cwd=str(repo),
        parallel=2,
    )
    report = run_flow(spec, db_url=db_url)
    assert report.status == "completed", report.reason_summary
    git = Repo(str(repo))
    for leg in ("one", "two"):
        branch = f"lirun/flow/{report.invocation_id}/{leg}"
        assert git.out("log", "-1", "--format=%s", branch) == f"{leg}: work left uncommitted"
        assert git.out("show", "--name-only", "--format=", branch) == "work.txt"
        worktree = git.checked_out_branches()[branch]
        assert not Repo(worktree).is_dirty()
    assert git.out("status", "--porcelain") == ""  # the person's checkout is untouched


def test_li_flow_clean_removes_worktrees_and_merged_leg_branches_keeps_the_rest(
    db_url: str,
    repo: Path,
    fake_claude: Path,
    monkeypatch: pytest.MonkeyPatch,
    lirun_home: Path,
    li_env: dict[str, str],
) -> None:
    from support.execkit import run_li

    _use(monkeypatch, "claude/success.jsonl", fake_claude)
    spec = FlowSpec(
        legs=(
            LegSpec("one", Task(agent="claude", prompt="do one")),
            LegSpec("two", Task(agent="claude", prompt="do two")),
        ),
        cwd=str(repo),
        parallel=2,
    )
    inv = run_flow(spec, db_url=db_url).invocation_id
    root = lirun_home / "worktrees" / inv
    git = Repo(str(repo))
    first = run_li("flow", "clean", inv, "--json", env=li_env, cwd=repo)
    assert first.returncode == 1, first.stderr
    report = json.loads(first.stdout)
    assert {i["name"] for i in report["removed"]} == {str(root / "one"), str(root / "two")}
    assert [i["name"] for i in report["kept"]] == [f"lirun/flow/{inv}/one", f"lirun/flow/{inv}/two"]
    assert "unmerged: 1 commit(s)" in report["kept"][0]["why"]
    assert not root.exists()
    # a dry run in that repository notes the leftovers (they do not stop a new flow)
    flow_file = repo / "check.yaml"
    flow_file.write_text('legs:\n  - {id: a, run: ["true"]}\n')
    dry = run_li("flow", "run", str(flow_file), "--dry-run", env=li_env, cwd=repo)
    assert dry.returncode == 0, dry.stderr
    assert f"1 earlier flow(s) left leg branches in this repository ({inv})" in dry.stderr
    # a person merges leg one's work; the next clean lets its branch go
    git.run("merge", "--quiet", "--no-edit", f"lirun/flow/{inv}/one")
    second = run_li("flow", "clean", inv, env=li_env, cwd=repo)
    assert second.returncode == 1
    assert f"removed  branch   lirun/flow/{inv}/one: merged" in second.stdout
    assert f"kept     branch   lirun/flow/{inv}/two: unmerged" in second.stdout
    forced = run_li("flow", "clean", inv, "--force", env=li_env, cwd=repo)
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert git.branches("lirun/flow/") == {}
    dry = run_li("flow", "run", str(flow_file), "--dry-run", env=li_env, cwd=repo)
    assert dry.returncode == 0
    assert "earlier flow" not in dry.stderr
    nothing = run_li("flow", "clean", inv, env=li_env, cwd=repo)
    assert nothing.returncode == 0
    assert "nothing to clean" in nothing.stdout


def test_a_shared_leg_whose_reply_did_not_count_cannot_prove_work_by_a_change_alone(
    db_url: str, repo: Path, fake_claude: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``require_change`` the reply is kept in the record but labelled not counted:
    it is not the leg's own proof, so its only proof is still the shared tree's change."""
    _use(monkeypatch, "claude/success.jsonl", fake_claude)  # a reply, and a change
    agent = Task(agent="claude", prompt="edit", require_change=True)
    spec = FlowSpec(
        legs=(
            LegSpec("agent", agent, isolation="shared"),
            LegSpec("beside", Task(run=("sh", "-c", "sleep 0.1; echo ok"))),
        ),
        cwd=str(repo),
        parallel=2,
    )
    report = run_flow(spec, db_url=db_url)
    legs = {leg.id: leg for leg in report.legs}
    assert legs["agent"].status == "completed"
    with opened(db_url) as store:
        session = store.get_entity("session", legs["agent"].session_id or "") or {}
    (reply,) = [e for e in session["status_evidence_refs"] if e["kind"] == "assistant_output"]
    assert reply["counted"] is False
    assert (report.status, report.reason_code) == ("completed_empty", "run.completed_empty.leg")

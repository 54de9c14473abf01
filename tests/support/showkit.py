"""Shows in tests: real repositories, fake agents that edit and commit, a ref-update log.

A fake agent is a ``run:`` command play (a shell script that writes a file and commits)
or the fake provider with ``LIRUN_FAKE_TOUCH`` / ``LIRUN_FAKE_COMMIT``. The repository
gets a ``reference-transaction`` hook that logs every committed update of the
integration branch, so a test can assert that each commit it ever pointed at passed
its gate.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lirun.exec.task import Task
from lirun.shows.spec import Gate, PlaySpec, ShowSpec
from support.gitkit import git, make_repo

INTEGRATION = "show/t"
COMMIT = "git add -A && git -c user.name=t -c user.email=t@example.invalid commit -qm"

HOOK = """#!/bin/sh
# Log every committed update of refs/heads/{branch}: "<old> <new>".
[ "$1" = committed ] || exit 0
while read old new ref; do
  [ "$ref" = "refs/heads/{branch}" ] && echo "$old $new" >> "{log}"
done
exit 0
"""


def show_repo(tmp_path: Path, *, files: dict[str, str] | None = None) -> Path:
    """A repository on ``main`` with ``files`` committed and the ref-update hook."""
    repo = make_repo(tmp_path / "repo")
    for name, text in (files or {}).items():
        (repo / name).write_text(text, encoding="utf-8")
        git(repo, "add", name)
        git(repo, "commit", "-qm", f"add {name}")
    hook = repo / ".git" / "hooks" / "reference-transaction"
    log = tmp_path / "integration-moves.log"
    hook.write_text(HOOK.format(branch=INTEGRATION, log=log), encoding="utf-8")
    hook.chmod(0o755)
    return repo


def moves(tmp_path: Path) -> list[tuple[str, str]]:
    """Every (old, new) the integration branch was moved through, in order."""
    log = tmp_path / "integration-moves.log"
    if not log.exists():
        return []
    return [tuple(line.split()) for line in log.read_text().splitlines()]  # type: ignore[misc]


def writes(path: str, text: str, *, message: str = "work") -> Task:
    """A fake agent: write ``text`` to ``path`` in its worktree and commit."""
    script = f"printf '%s\\n' {shlex.quote(text)} > {shlex.quote(path)} && {COMMIT} {message}"
    return Task(run=("sh", "-c", script))


def script(body: str) -> Task:
    return Task(run=("sh", "-c", body))


def play(name: str, task: Task, *deps: str, attempts: int = 2, gate: Any = None) -> PlaySpec:
    return PlaySpec(
        name=name,
        task=task,
        depends_on=tuple(deps),
        attempts=attempts,
        gate=Gate(gate) if isinstance(gate, str) else gate,
    )


def spec(
    repo: Path,
    plays: Sequence[PlaySpec],
    *,
    gate: str | None = "true",
    final_gate: str | None = None,
    topic: str = "t",
    parallel: int | None = None,
) -> ShowSpec:
    return ShowSpec(
        topic=topic,
        repo=str(repo),
        base="main",
        integration=INTEGRATION,
        plays=tuple(plays),
        gate=Gate(gate) if gate is not None else None,
        final_gate=Gate(final_gate) if final_gate is not None else None,
        parallel=parallel,
    )


def gated_commits(store: Any, show_id: str) -> set[str]:
    """Commits a gate of the show passed on (play gates, gates on the integration head)."""
    sessions = list(store.shows.list_gate_sessions(show_id))
    for p in store.shows.list_plays(show_id):
        sessions += store.shows.list_play_sessions(p.id)
    return {
        s.meta["commit"]
        for s in sessions
        if s.meta.get("role") != "agent" and s.status in ("completed", "completed_empty")
    }


def assert_only_gated_moves(tmp_path: Path, store: Any, show_id: str, base_sha: str) -> None:
    """The integration branch was created at base and then only moved to gated commits."""
    seen = moves(tmp_path)
    assert seen, "the integration branch never moved"
    assert seen[0] == ("0" * 40, base_sha)
    passed = gated_commits(store, show_id)
    for old, new in seen[1:]:
        assert new in passed, f"integration moved {old[:12]} -> {new[:12]} without a passing gate"

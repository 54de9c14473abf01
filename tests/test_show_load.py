"""Reading show files: every problem reported with file:line, nothing written."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from lirun.errors import UsageError
from lirun.shows.load import ShowFileError, check_branch_name, load_show
from lirun.shows.spec import Gate, ShowSpec
from support.gitkit import git
from support.showfilekit import COMMAND_SHOW, refs, write_show

VALID = """
topic: add-auth
repo: repo
base: main
gate: "pytest -q"
gate_timeout: 600
final_gate: [make, check]
parallel: 3
plays:
  - name: models
    run: "echo models"
  - name: api
    depends_on: [models]
    run: [sh, -c, "echo api"]
    gate: "pytest tests/api -q"
    attempts: 1
    timeout: 120
  - name: docs
    run: [echo, docs]
    gate_timeout: 30
    require_change: true
"""


def problems_of(path: Path) -> tuple[str, ...]:
    with pytest.raises(ShowFileError) as info:
        load_show(path)
    return info.value.problems


def test_a_valid_file_becomes_a_spec(tmp_path: Path) -> None:
    path = write_show(tmp_path, VALID)
    spec = load_show(path)
    assert spec.topic == "add-auth"
    assert spec.repo == str((tmp_path / "repo").resolve())
    assert spec.base == "main"
    assert spec.integration == "show/add-auth"  # the default: show/<topic>
    assert spec.gate == Gate("pytest -q", 600.0)
    assert spec.final_gate == Gate(("make", "check"), None)
    assert spec.parallel == 3
    assert spec.path == str(path.resolve())
    assert spec.digest is not None
    assert len(spec.digest) == 64
    models, api, docs = spec.plays
    # a run string goes through sh -c, like a gate string
    assert models.task.run == ("sh", "-c", "echo models")
    assert models.line == 9
    assert models.attempts == 2
    assert models.gate is None
    assert spec.gate_for(models) == spec.gate
    assert api.depends_on == ("models",)
    assert api.attempts == 1
    assert api.task.timeout == 120.0
    assert api.gate == Gate("pytest tests/api -q", None)
    # gate_timeout alone: the show's gate with the play's own limit
    assert docs.gate == Gate("pytest -q", 30.0)
    assert docs.task.run == ("echo", "docs")
    assert docs.task.require_change
    assert not api.task.require_change
    assert ShowSpec.from_dict(spec.to_dict()) == spec


def test_agent_plays_take_provider_options(tmp_path: Path, fake_bin: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", f"{fake_bin}{os.pathsep}{os.environ['PATH']}")
    path = write_show(
        tmp_path,
        """
        topic: t
        base: main
        repo: repo
        integration: "nightly/{id}"
        gate: "true"
        plays:
          - name: a
            agent: claude/sonnet
            prompt: "Add the User model"
            permission_mode: acceptEdits
            max_turns: 5
            artifacts: [{id: notes, path: notes.md, required: false}]
          - name: b
            agent: codex
            prompt: "Review it"
            sandbox: workspace-write
        """,
    )
    spec = load_show(path)
    a, b = spec.plays
    assert a.task.agent == "claude/sonnet"
    assert a.task.prompt == "Add the User model"
    assert dict(a.task.options) == {"permission_mode": "acceptEdits", "max_turns": 5}
    assert a.task.artifacts == ({"id": "notes", "path": "notes.md", "required": False},)
    assert dict(b.task.options) == {"sandbox": "workspace-write"}
    assert spec.integration_branch("20260101T000000-abc123") == "nightly/20260101T000000-abc123"


def test_repo_is_relative_to_the_file_not_the_cwd(tmp_path: Path, monkeypatch) -> None:
    path = write_show(tmp_path / "project", COMMAND_SHOW.format(topic="x"))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    spec = load_show(os.path.relpath(path))
    assert spec.repo == str((tmp_path / "project" / "repo").resolve())


# (file text, line, words the problem must contain)
PROBLEMS = [
    ("topic: t\nbase: main\ngaet: x\nplays: []\n", 3, "unknown key 'gaet'; did you mean 'gate'"),
    ("topic: t\ntopic: u\nbase: main\ngate: x\nplays: [{name: a, run: x}]\n", 2, "given twice"),
    ("base: main\ngate: x\nplays: [{name: a, run: x}]\n", 1, "topic is required"),
    ("topic: t\ngate: x\nplays: [{name: a, run: x}]\n", 1, "base is required"),
    ("topic: t\nbase: main\ngate: x\n", 1, "plays is required"),
    ("topic: t\nbase: main\ngate: x\nplays: {a: 1}\n", 4, "plays must be a non-empty list"),
    ("topic: t\nbase: nope\ngate: x\nplays: [{name: a, run: x}]\n", 2, "base branch 'nope'"),
    (
        "topic: t\nrepo: nowhere\nbase: main\ngate: x\nplays: [{name: a, run: x}]\n",
        2,
        "is not a git repository",
    ),
    ("topic: t\nbase: main\ngate: 5\nplays: [{name: a, run: x}]\n", 3, "gate must be a shell"),
    ("topic: t\nbase: main\ngate: []\nplays: [{name: a, run: x}]\n", 3, "gate must be a shell"),
    (
        "topic: t\nbase: main\ngate: [no-such-program-x]\nplays: [{name: a, run: x}]\n",
        3,
        "'no-such-program-x' not found on PATH",
    ),
    (
        "topic: t\nbase: main\ngate: x\ngate_timeout: -1\nplays: [{name: a, run: x}]\n",
        4,
        "gate_timeout -1 is negative",
    ),
    (
        "topic: t\nbase: main\ngate: x\nfinal_gate_timeout: 5\nplays: [{name: a, run: x}]\n",
        4,
        "final_gate_timeout needs final_gate",
    ),
    ("topic: t\nbase: main\ngate: x\nparallel: 0\nplays: [{name: a, run: x}]\n", 4, "parallel"),
    ("topic: t\nbase: main\ngate: x\nparallel: 33\nplays: [{name: a, run: x}]\n", 4, "1 to 32"),
    ("topic: t\nbase: main\ngate: x\nparallel: yes\nplays: [{name: a, run: x}]\n", 4, "parallel"),
    ("topic: t\nbase: main\nplays:\n  - name: a\n    run: x\n", 1, "no gate for play(s) a"),
    ("topic: a b\nbase: main\ngate: x\nplays: [{name: a, run: x}]\n", 1, "show/a b must not"),
    (
        "topic: t\nbase: main\nintegration: main\ngate: x\nplays: [{name: a, run: x}]\n",
        3,
        "must not be the base branch",
    ),
    (
        "topic: t\nbase: main\nintegration: x/{topic}\ngate: x\nplays: [{name: a, run: x}]\n",
        3,
        "no other braces",
    ),
    (
        "topic: t\nbase: main\nintegration: 'a..b'\ngate: x\nplays: [{name: a, run: x}]\n",
        3,
        "must not contain '..'",
    ),
    (
        "topic: t\nbase: main\nintegration: refs/heads/evil\ngate: x\nplays: [{name: a, run: x}]\n",
        3,
        "must not start with refs/",
    ),
    (
        "topic: t\nbase: main\ngate: x\ngate_timeout: .nan\nplays: [{name: a, run: x}]\n",
        4,
        "is not a duration",
    ),
    (
        "topic: t\nbase: main\ngate: x\nplays:\n  - name: a\n    run: x\n    timeout: .inf\n",
        7,
        "is not a duration",
    ),
    ("topic: t\nbase: main\ngate: x\nplays:\n  - run: x\n", 5, "play 1: name is required"),
    ("topic: t\nbase: main\ngate: x\nplays:\n  - name: a b\n    run: x\n", 5, "name 'a b' must"),
    ("topic: t\nbase: main\ngate: x\nplays:\n  - name: a..b\n    run: x\n", 5, "no '..'"),
    ("topic: t\nbase: main\ngate: x\nplays:\n  - just text\n", 0, "must be a mapping"),
    (
        "topic: t\nbase: main\ngate: x\nplays:\n  - name: a\n    run: x\n    run: y\n",
        7,
        "play a: 'run' is given twice",
    ),
    (
        "topic: t\nbase: main\ngate: x\nplays:\n  - name: a\n    run: x\n  - name: a\n    run: y\n",
        7,
        "play name 'a' is used twice (first on line 5)",
    ),
    (
        "topic: t\nbase: main\ngate: x\nplays:\n  - name: a\n    run: x\n    agent: claude\n",
        5,
        "exactly one of agent (with a prompt) and run (a command), not both",
    ),
    ("topic: t\nbase: main\ngate: x\nplays:\n  - name: a\n", 5, "not neither"),
    (
        "topic: t\nbase: main\ngate: x\nplays:\n  - name: a\n    run: x\n    prompt: hi\n",
        7,
        "prompt is for agents",
    ),
    (
        "topic: t\nbase: main\ngate: x\nplays:\n  - name: a\n    run: x\n"
        "    permission_mode: plan\n",
        7,
        "permission_mode is for agents",
    ),
    (
        "topic: t\nbase: main\ngate: x\nplays:\n  - name: a\n    agent: nope\n    prompt: hi\n",
        6,
        "unknown provider 'nope'",
    ),
    (
        "topic: t\nbase: main\ngate: x\nplays:\n  - name: a\n    agent: claude\n"
        "    prompt: hi\n    max_turns: 0\n",
        8,
        "max_turns must be a positive whole number",
    ),
    (
        "topic: t\nbase: main\ngate: x\nplays:\n  - name: a\n    agent: claude\n"
        "    prompt: hi\n    sandbox: read-only\n",
        6,
        "sandbox is not claude option",
    ),
    (
        "topic: t\nbase: main\ngate: x\nplays:\n  - name: a\n    agent: claude\n"
        "    prompt: hi\n    provider_args: [--output-format, json]\n",
        6,
        "cannot be passed",
    ),
    (
        "topic: t\nbase: main\ngate: x\nplays:\n  - name: a\n    agent: claude\n",
        6,
        "no prompt",
    ),
    (
        "topic: t\nbase: main\ngate: x\nplays:\n  - name: a\n    agent: claude\n"
        "    prompt: hi\n    profile: missing\n",
        6,
        "no profile named 'missing'",
    ),
    (
        "topic: t\nbase: main\ngate: x\nplays:\n  - name: a\n    run: x\n    attempts: 3\n",
        7,
        "attempts must be 1",
    ),
    (
        "topic: t\nbase: main\ngate: x\nplays:\n  - name: a\n    run: x\n    timeout: 0\n",
        7,
        "timeout 0 is zero",
    ),
    (
        "topic: t\nbase: main\ngate: x\nplays:\n  - name: a\n    run: x\n    require_change: 1\n",
        7,
        "require_change must be true or false",
    ),
    (
        "topic: t\nbase: main\ngate: x\nplays:\n  - name: a\n    run: x\n    depends_on: a\n",
        7,
        "depends_on must be a list",
    ),
    (
        "topic: t\nbase: main\ngate: x\nplays:\n  - name: a\n    run: x\n    depends_on: [b]\n",
        7,
        "depends on 'b', which is not a play here (plays: a)",
    ),
    (
        "topic: t\nbase: main\ngate: x\nplays:\n  - name: a\n    run: x\n    depends_on: [b]\n"
        "  - name: b\n    run: x\n    depends_on: [a]\n",
        7,
        "dependency cycle: a -> b -> a",
    ),
    (
        "topic: t\nbase: main\ngate: x\nplays:\n  - name: a\n    run: x\n"
        "    artifacts: [{id: r, path: r.md, requird: true}]\n",
        7,
        "unknown field 'requird'",
    ),
    (
        "topic: t\nbase: main\ngate: x\nplays:\n  - name: a\n    run: x\n"
        "    artifacts: [{id: r, path: /abs}]\n",
        7,
        "artifacts:",
    ),
    ("topic: t\nbase: main\ngate: x\nplays: [{name: a, run: x}\n", 5, "invalid YAML"),
    ("- just\n- a list\n", 0, "the top level must be a mapping (topic:, base:, plays:, ...)"),
]


@pytest.mark.parametrize(("text", "line", "words"), PROBLEMS, ids=[p[2] for p in PROBLEMS])
def test_each_problem_is_named_with_its_line(
    tmp_path: Path, fake_bin: Path, monkeypatch, text: str, line: int, words: str
) -> None:
    monkeypatch.setenv("PATH", f"{fake_bin}{os.pathsep}{os.environ['PATH']}")
    if "repo:" not in text and not text.startswith("-") and "invalid YAML" not in words:
        text += "repo: repo\n"  # at the end: the lines above keep their numbers
    path = write_show(tmp_path, text)
    problems = problems_of(path)
    matching = [p for p in problems if words in p]
    assert matching, problems
    where = f"{path}:{line}:" if line else f"{path}:"
    assert matching[0].startswith(where), matching


def test_every_problem_at_once_in_file_order_and_nothing_written(
    tmp_path: Path, lirun_home: Path
) -> None:
    path = write_show(
        tmp_path,
        """
        topic: t
        repo: repo
        base: nope
        gaet: x
        parallel: 0
        plays:
          - name: a
            run: x
            agent: claude
          - name: a
            depends_on: [ghost]
            run: y
          - name: b
            run: []
            attempts: 3
        """,
    )
    before = refs(tmp_path / "repo")
    with pytest.raises(ShowFileError) as info:
        load_show(path)
    error = info.value
    assert isinstance(error, UsageError)
    assert error.exit_code == 2
    lines = [int(p.split(":")[1]) for p in error.problems]
    assert lines == sorted(lines)
    text = "\n".join(error.problems)
    for words in (
        "base branch 'nope'",
        "unknown key 'gaet'",
        "parallel must be",
        "not both",
        "used twice",
        "run must be a shell command",
        "attempts must be 1",
        "no gate for play(s) a, b",
    ):
        assert words in text, text
    assert (
        str(error).splitlines()[0] == f"{path}: {len(error.problems)} problems; nothing was started"
    )
    # nothing written: no database, no run directory, no worktree, no branch
    assert list(lirun_home.iterdir()) == []
    assert refs(tmp_path / "repo") == before
    assert git(tmp_path / "repo", "worktree", "list").count("\n") == 0


def test_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    problems = problems_of(tmp_path / "absent.yaml")
    assert problems[0].startswith(f"{tmp_path / 'absent.yaml'}: cannot read the show file")


def test_repo_may_be_a_subdirectory_of_the_repository(tmp_path: Path) -> None:
    path = write_show(
        tmp_path, COMMAND_SHOW.format(topic="sub").replace("repo: repo", "repo: repo/sub")
    )
    (tmp_path / "repo" / "sub").mkdir()
    assert load_show(path).repo == str((tmp_path / "repo").resolve())


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("show/add-auth", True),
        ("nightly/20260101T000000-abc123", True),
        ("a b", False),
        ("-x", False),
        ("x/", False),
        ("x.lock", False),
        ("a/.b", False),
        ("a..b", False),
        ("a@{b", False),
        ("a:b", False),
        ("a/b.lock/c", False),
        ("a//b", False),
        ("HEAD", False),
        ("x.y/z", True),
        ("a@b", True),
        ("", False),
    ],
)
def test_branch_names(tmp_path: Path, name: str, ok: bool) -> None:
    assert (check_branch_name(name) is None) is ok
    # the same answer git gives
    proc = subprocess.run(
        ["git", "check-ref-format", "--branch", name], capture_output=True, cwd=tmp_path
    )
    assert (proc.returncode == 0) is ok


@pytest.mark.parametrize(
    "name",
    ["refs/heads/evil", "heads/x", "tags/v1", "remotes/origin/main", "FETCH_HEAD", "a" * 40],
)
def test_names_git_accepts_but_would_read_as_another_ref_are_refused(
    tmp_path: Path, name: str
) -> None:
    """``git branch refs/heads/evil`` makes refs/heads/refs/heads/evil, and every later
    ``git rev-parse refs/heads/evil`` means another ref: lirun refuses such a name."""
    ok = subprocess.run(
        ["git", "check-ref-format", "--branch", name], capture_output=True, cwd=tmp_path
    )
    assert ok.returncode == 0  # git alone would take it
    assert check_branch_name(name) is not None


def test_a_playbook_may_give_the_prompt(
    tmp_path: Path, fake_bin: Path, lirun_home: Path, monkeypatch
) -> None:
    monkeypatch.setenv("PATH", f"{fake_bin}{os.pathsep}{os.environ['PATH']}")
    (lirun_home / "playbooks").mkdir()
    (lirun_home / "playbooks" / "review.yaml").write_text("prompt: Review the diff\n")
    (lirun_home / "playbooks" / "silent.yaml").write_text("description: no prompt\n")
    text = """
        topic: t
        repo: repo
        base: main
        gate: "true"
        plays:
          - name: a
            agent: claude
            playbook: {playbook}
        """
    spec = load_show(write_show(tmp_path, text.format(playbook="review")))
    assert spec.plays[0].task.playbook == "review"
    assert spec.plays[0].task.prompt is None
    problems = problems_of(write_show(tmp_path, text.format(playbook="silent")))
    assert len(problems) == 1
    assert "no prompt" in problems[0]
    assert ":7: play a:" in problems[0]


def test_a_play_sets_its_stall_limit(tmp_path: Path, fake_bin: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", f"{fake_bin}{os.pathsep}{os.environ['PATH']}")
    text = "topic: t\nbase: main\nrepo: repo\ngate: 'true'\nplays:\n"
    path = write_show(
        tmp_path, text + "  - {name: a, agent: codex, prompt: go, stall_timeout: 0}\n"
    )
    [play] = load_show(path).plays
    assert play.task.stall_timeout == 0.0
    bad = write_show(tmp_path, text + "  - {name: a, agent: codex, prompt: go, stall_timeout: x}\n")
    assert any("stall_timeout 'x' is not a duration" in p for p in problems_of(bad))

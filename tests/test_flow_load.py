"""Reading flow files: every problem found before anything starts, each with file:line."""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import pytest

from lirun.errors import UsageError
from lirun.flows.load import FlowFileError, load_flow, parse_var
from lirun.flows.spec import FlowSpec


@pytest.fixture(autouse=True)
def providers(fake_bin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIRUN_CLAUDE_BIN", str(fake_bin / "claude"))
    monkeypatch.setenv("LIRUN_CODEX_BIN", str(fake_bin / "codex"))


def write(tmp_path: Path, text: str, name: str = "flow.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


GOOD = """
vars: {target: src, depth: 2, strict: true}
parallel: 3
fail_fast: true
legs:
  - id: plan
    agent: claude/sonnet
    prompt: "Plan {{ vars.target }} to depth {{ vars.depth }}"
    permission_mode: plan
    artifacts: [{id: plan, path: plan.md}]
  - id: implement
    depends_on: [plan]
    for_each: {artifact: plan.plan, split: json}
    agent: codex
    sandbox: workspace-write
    prompt: "Do {{ item }} per {{ legs.plan.artifacts.plan }}"
    retries: 2
    isolation: shared
  - id: lint
    depends_on: plan
    for_each: [a, 2, true]
    run: [echo, "{{ item }}"]
  - id: review
    depends_on: [implement, lint]
    agent: claude
    prompt: "{% for r in legs.implement %}{{ r.reply }}{% endfor %} {{ legs['plan'].reply }}"
    may_be_empty: true
    timeout: 60
  - id: check
    depends_on: [review]
    run: "make test"
    cwd: sub
    require_change: true
"""


def test_a_valid_flow_becomes_a_spec(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    path = write(tmp_path, GOOD)
    spec = load_flow(path, {"target": "lib"}, cwd=str(tmp_path))
    assert spec.vars == {"target": "lib", "depth": "2", "strict": "true"}
    assert (spec.parallel, spec.fail_fast, spec.cwd) == (3, True, str(tmp_path))
    assert spec.path == str(path)
    assert spec.digest == hashlib.sha256(path.read_bytes()).hexdigest()
    assert [leg.id for leg in spec.legs] == ["plan", "implement", "lint", "review", "check"]
    plan, implement, lint, review, check = spec.legs
    assert plan.task.agent == "claude/sonnet"
    assert plan.task.options == {"permission_mode": "plan"}
    assert plan.task.artifacts == ({"id": "plan", "path": "plan.md"},)
    assert plan.line == 5
    assert implement.for_each is not None
    assert implement.for_each.artifact == "plan.plan"
    assert (implement.for_each.split, implement.retries, implement.isolation) == (
        "json",
        2,
        "shared",
    )
    assert lint.depends_on == ("plan",)
    assert lint.for_each is not None
    assert lint.for_each.items == ("a", "2", "true")
    assert review.may_be_empty
    assert review.task.timeout == 60.0
    assert check.task.run == ("sh", "-c", "make test")
    assert check.cwd == str(tmp_path / "sub")
    assert check.task.require_change
    assert not lint.task.require_change
    assert FlowSpec.from_dict(spec.to_dict()) == spec


def test_isolation_worktree_is_accepted_in_a_repository(repo: Path) -> None:
    path = write(repo, "legs: [{id: a, run: [echo], isolation: worktree}]\n")
    assert load_flow(path, cwd=str(repo)).legs[0].isolation == "worktree"


def test_the_default_cwd_is_the_current_directory_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, "legs: [{id: a, run: [echo, hi]}]\n")
    monkeypatch.chdir(tmp_path)
    spec = load_flow("flow.yaml")
    assert spec.cwd == str(tmp_path)
    assert spec.path == str(path)


# (file text, the line the problem is on, a fragment of its message)
PROBLEMS = [
    ("nope: 1\nlegs: [{id: a, run: [echo]}]\n", 1, "unknown flow key 'nope'"),
    ("legs: [{id: a, run: [echo], dependson: [b]}]\n", 1, "did you mean 'depends_on'"),
    ("parallel: 0\nlegs: [{id: a, run: [echo]}]\n", 1, "parallel must be a whole number"),
    (
        "parallel: 33\nlegs: [{id: a, run: [echo]}]\n",
        1,
        "parallel must be a whole number from 1 to 32",
    ),
    ("fail_fast: yes please\nlegs: [{id: a, run: [echo]}]\n", 1, "fail_fast must be true or false"),
    ("vars: [a]\nlegs: [{id: a, run: [echo]}]\n", 1, "vars must be a mapping"),
    ("vars:\n  x: {a: 1}\nlegs: [{id: a, run: [echo]}]\n", 2, "vars.x must be text"),
    ("vars:\n  9x: 1\nlegs: [{id: a, run: [echo]}]\n", 2, "variable name '9x'"),
    ("vars:\n  need: null\nlegs: [{id: a, run: [echo]}]\n", 2, "vars.need has no default"),
    ("legs: []\n", 1, "legs must be a non-empty list"),
    ("vars: {}\n", 1, "the flow has no legs"),
    ("legs:\n  - just a string\n", 1, "legs[0] must be a mapping"),
    ("legs:\n  - run: [echo]\n", 2, "legs[0] needs an id"),
    ("legs:\n  - id: a\n    run: [echo]\n  - id: a\n    run: [echo]\n", 4, "used twice"),
    ("legs:\n  - id: 'a[0]'\n    run: [echo]\n", 2, "mark fan-out instances"),
    ("legs:\n  - id: a.b\n    run: [echo]\n", 2, "leg id 'a.b'"),
    ("legs:\n  - id: a\n", 2, "needs exactly one of agent"),
    ("legs:\n  - id: a\n    run: [echo]\n    agent: claude\n    prompt: x\n", 2, "exactly one"),
    ("legs:\n  - id: a\n    agent: claude\n", 2, "needs prompt"),
    ("legs:\n  - id: a\n    run: [echo]\n    prompt: hi\n", 4, "applies to agent legs"),
    ("legs:\n  - id: a\n    run: [echo]\n    permission_mode: plan\n", 4, "applies to agent"),
    ("legs:\n  - id: a\n    run: []\n", 3, "run must be a command"),
    ("legs:\n  - id: a\n    run: {x: 1}\n", 3, "run must be a command"),
    ("legs:\n  - id: a\n    run: [no-such-program-xyz]\n", 3, "not found on PATH"),
    ("legs:\n  - id: a\n    run: [./nothere.sh]\n", 3, "not an executable file"),
    ("legs:\n  - id: a\n    run: [echo]\n    depends_on: [ghost]\n", 4, "unknown leg 'ghost'"),
    ("legs:\n  - id: a\n    run: [echo]\n    depends_on: [a]\n", 4, "depends on itself"),
    ("legs:\n  - id: a\n    run: [echo]\n    depends_on: 3\n", 4, "depends_on must be a list"),
    (
        "legs:\n  - id: a\n    run: [echo]\n    depends_on: [b]\n"
        "  - id: b\n    run: [echo]\n    depends_on: [a]\n",
        4,
        "dependency cycle: a -> b -> a",
    ),
    ("legs:\n  - id: a\n    run: [echo]\n    timeout: -1\n", 4, "timeout -1 is negative"),
    ("legs:\n  - id: a\n    run: [echo]\n    idle_timeout: x\n", 4, "idle_timeout 'x' is not a"),
    ("legs:\n  - id: a\n    run: [echo]\n    timeout: 5x\n", 4, "30s, 5m, 2h, 1d, 1h30m"),
    ("legs:\n  - id: a\n    run: [echo]\n    retries: 11\n", 4, "retries must be a whole number"),
    ("legs:\n  - id: a\n    run: [echo]\n    isolation: maybe\n", 4, "isolation must be"),
    ("legs:\n  - id: a\n    run: [echo]\n    isolation: worktree\n", 4, "needs its cwd"),
    ("legs:\n  - id: a\n    run: [echo]\n    may_be_empty: 1\n", 4, "may_be_empty must be true"),
    (
        "legs:\n  - id: a\n    run: [echo]\n    require_change: yes please\n",
        4,
        "require_change must be true or false",
    ),
    (
        "legs:\n  - id: a\n    run: [echo]\n    require_chang: true\n",
        4,
        "did you mean 'require_change'",
    ),
    ("legs:\n  - id: a\n    run: [echo]\n    cwd: nothere\n", 4, "is not a directory"),
    ("legs:\n  - id: a\n    run: [echo]\n    cwd: 5\n", 4, "cwd must be non-empty text"),
    ("legs:\n  - id: a\n    run: [echo]\n    for_each: 3\n", 4, "for_each must be a list"),
    ("legs:\n  - id: a\n    run: [echo]\n    for_each: [[1]]\n", 4, "items must be text"),
    ("legs:\n  - id: a\n    run: [echo]\n    for_each: {artifact: x}\n", 4, "LEG.ARTIFACT"),
    ("legs:\n  - id: a\n    run: [echo]\n    for_each: {items: [1]}\n", 4, "unknown for_each key"),
    (
        "legs:\n  - id: a\n    run: [echo]\n    for_each: {artifact: a.b, split: words}\n",
        4,
        "split must be lines or json",
    ),
    (
        "legs:\n  - id: a\n    run: [echo]\n  - id: b\n    run: [echo]\n"
        "    depends_on: [a]\n    for_each: {artifact: a.list}\n",
        7,
        "leg 'a' declares no artifact 'list'",
    ),
    (
        "legs:\n  - id: a\n    run: [echo]\n    artifacts: [{id: list, path: l.txt}]\n"
        "  - id: b\n    run: [echo]\n    for_each: {artifact: a.list}\n",
        7,
        "'a' is not an ancestor of 'b'",
    ),
    (
        "legs:\n  - id: b\n    run: [echo]\n    for_each: {artifact: ghost.list}\n",
        4,
        "there is no leg 'ghost'",
    ),
    (
        "legs:\n  - id: a\n    run: [echo]\n    for_each: [1, 2]\n"
        "    artifacts: [{id: list, path: l.txt}]\n"
        "  - id: b\n    run: [echo]\n    depends_on: [a]\n    for_each: {artifact: a.list}\n",
        9,
        "fans out itself",
    ),
    (
        "legs:\n  - id: a\n    run: [echo]\n    artifacts: [{id: x, path: /abs}]\n",
        4,
        "artifacts:",
    ),
    (
        "legs:\n  - id: a\n    run: [echo]\n    artifacts:\n"
        "      - {id: x, path: x, requird: true}\n",
        5,
        "did you mean 'required'",
    ),
    ("legs:\n  - id: a\n    agent: gpt\n    prompt: hi\n", 3, "unknown provider 'gpt'"),
    ("legs:\n  - id: a\n    agent: claude\n    prompt: hi\n    profile: nope\n", 3, "no profile"),
    (
        "legs:\n  - id: a\n    agent: claude\n    prompt: hi\n    sandbox: read-only\n",
        3,
        "sandbox is not claude option",
    ),
    (
        "legs:\n  - id: a\n    agent: codex\n    prompt: hi\n    provider_args: [--json]\n",
        3,
        "cannot be passed",
    ),
    (
        "legs:\n  - id: a\n    agent: claude\n    prompt: hi\n    max_turns: 0\n",
        3,
        "max_turns must be a positive",
    ),
    # templates
    ("legs:\n  - id: a\n    agent: claude\n    prompt: '{{ x'\n", 4, "template syntax error"),
    ("legs:\n  - id: a\n    run: [echo, '{% if %}']\n", 3, "template syntax error"),
    ("legs:\n  - id: a\n    agent: claude\n    prompt: '{{ vars.nope }}'\n", 4, "vars.nope"),
    ("legs:\n  - id: a\n    agent: claude\n    prompt: '{{ item }}'\n", 4, "item is defined only"),
    ("legs:\n  - id: a\n    agent: claude\n    prompt: '{{ os }}'\n", 4, "unknown name 'os'"),
    (
        "legs:\n  - id: a\n    agent: claude\n    prompt: \"{{ ''.__class__ }}\"\n",
        4,
        "attributes starting with _ are refused",
    ),
    ("legs:\n  - id: a\n    agent: claude\n    prompt: '{{ legs[vars.x] }}'\n", 4, "computed key"),
    (
        "legs:\n  - id: a\n    agent: claude\n    prompt: '{{ legs.a.reply }}'\n",
        4,
        "its own outputs",
    ),
    ("legs:\n  - id: a\n    agent: claude\n    prompt: '{{ legs.zz.reply }}'\n", 4, "no such leg"),
    (
        "legs:\n  - id: a\n    run: [echo]\n  - id: b\n    agent: claude\n"
        "    prompt: '{{ legs.a.reply }}'\n",
        6,
        "reads legs.a, but it is not an ancestor of 'b'",
    ),
    (
        "legs:\n  - id: a\n    run: [echo]\n  - id: b\n    run: [echo, '{{ legs.a.reply }}']\n",
        5,
        "reads legs.a, but it is not an ancestor",
    ),
    # the file itself
    ("legs:\n  - id: a\n    run: [echo]\n    run: [true]\n", 4, "key 'run' is given twice"),
    ("parallel: 1\nparallel: 2\nlegs: [{id: a, run: [echo]}]\n", 2, "(first on line 1)"),
    ("- a\n- b\n", None, "the top level must be a mapping (vars:, parallel:, legs:"),
    ("legs: [\n", None, "invalid YAML"),
]


@pytest.mark.parametrize(("text", "line", "fragment"), PROBLEMS)
def test_each_problem_is_reported_at_its_line(
    tmp_path: Path, text: str, line: int | None, fragment: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(FlowFileError) as caught:
        load_flow(path, cwd=str(tmp_path))
    assert caught.value.exit_code == 2
    assert isinstance(caught.value, UsageError)
    matching = [p for p in caught.value.problems if fragment in p]
    assert matching, caught.value.problems
    if line is not None:
        assert matching[0].startswith(f"{path}:{line}: "), matching


def test_a_non_ancestor_reached_through_a_sibling_is_refused_but_transitive_is_fine(
    tmp_path: Path,
) -> None:
    text = """
    legs:
      - {id: a, run: [echo, a]}
      - {id: b, run: [echo, b], depends_on: [a]}
      - {id: c, run: [echo, c]}
      - id: d
        depends_on: [b]
        run: [echo, "{{ legs.a.reply }} {{ legs.b.reply }}", "{{ legs.c.reply }}"]
    """
    with pytest.raises(FlowFileError) as caught:
        load_flow(write(tmp_path, text), cwd=str(tmp_path))
    [problem] = caught.value.problems
    assert ":7: " in problem
    assert "legs.c" in problem
    assert "not an ancestor of 'd'" in problem


def test_many_problems_are_reported_together_in_file_order(tmp_path: Path) -> None:
    text = """
    vars: {target: src}
    paralel: 2
    legs:
      - id: plan
        agent: claude
        prompt: "{{ vars.tagret }}"
      - id: plan
        run: [echo]
      - id: review
        depends_on: [ghost]
        agent: codex
        prompt: "{{ legs.plan.reply }} {{ item }}"
        isolation: sometimes
    """
    path = write(tmp_path, text)
    with pytest.raises(FlowFileError) as caught:
        load_flow(path, {"taget": "x"}, cwd=str(tmp_path))
    problems = caught.value.problems
    assert problems[0].startswith("--var taget: the flow declares no variable 'taget'")
    located = [p for p in problems[1:]]
    lines = [int(p.removeprefix(f"{path}:").split(":", 1)[0]) for p in located]
    assert lines == sorted(lines), problems
    assert len(problems) >= 7, problems
    for fragment in (
        "unknown flow key 'paralel'",
        "vars.tagret",
        "used twice",
        "unknown leg 'ghost'",
        "legs.plan, but it is not an ancestor",
        "item is defined only",
        "isolation must be",
    ):
        assert any(fragment in p for p in problems), (fragment, problems)
    message = str(caught.value)
    assert message.splitlines()[0] == f"{path}: {len(problems)} problems; nothing was started"


def test_vars_overrides_and_required_vars(tmp_path: Path) -> None:
    path = write(
        tmp_path, "vars: {a: 1, need: null}\nlegs: [{id: x, run: [echo, '{{ vars.need }}']}]\n"
    )
    spec = load_flow(path, {"need": "given", "a": "2"}, cwd=str(tmp_path))
    assert spec.vars == {"a": "2", "need": "given"}


def test_at_most_1000_literal_items(tmp_path: Path) -> None:
    items = ", ".join(str(i) for i in range(1001))
    path = write(tmp_path, f"legs:\n  - id: a\n    run: [echo]\n    for_each: [{items}]\n")
    with pytest.raises(FlowFileError, match="1001 items; at most 1000"):
        load_flow(path, cwd=str(tmp_path))
    path = write(tmp_path, f"legs:\n  - id: a\n    run: [echo]\n    for_each: [{items[:-6]}]\n")
    spec = load_flow(path, cwd=str(tmp_path))
    assert spec.legs[0].for_each is not None
    assert len(spec.legs[0].for_each.items or ()) == 1000


def test_a_missing_file_is_one_problem(tmp_path: Path) -> None:
    with pytest.raises(FlowFileError, match="cannot read the flow file"):
        load_flow(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("a=b", ("a", "b")), ("a=", ("a", "")), ("a_1=x=y", ("a_1", "x=y"))],
)
def test_parse_var(text: str, expected: tuple[str, str]) -> None:
    assert parse_var(text) == expected


@pytest.mark.parametrize("text", ["a", "=b", "1a=b", "a-b=c"])
def test_parse_var_refuses(text: str) -> None:
    with pytest.raises(UsageError, match="expected KEY=VALUE"):
        parse_var(text)


def test_loading_writes_nothing(tmp_path: Path, lirun_home: Path) -> None:
    (tmp_path / "sub").mkdir()
    load_flow(write(tmp_path, GOOD), cwd=str(tmp_path))
    with pytest.raises(FlowFileError):
        load_flow(write(tmp_path, "legs: [{id: a}]\n", "bad.yaml"), cwd=str(tmp_path))
    assert list(lirun_home.iterdir()) == []


def test_the_example_in_the_guide_is_a_valid_flow(tmp_path: Path) -> None:
    guide = Path(__file__).resolve().parents[1] / "docs" / "flows.md"
    example = guide.read_text(encoding="utf-8").split("```yaml\n", 1)[1].split("```", 1)[0]
    path = write(tmp_path, example)
    with pytest.raises(FlowFileError, match=r"vars\.ticket has no default"):
        load_flow(path, cwd=str(tmp_path))
    spec = load_flow(path, {"ticket": "T-1"}, cwd=str(tmp_path))
    assert [leg.id for leg in spec.legs] == ["plan", "implement", "test", "review"]


def test_a_declared_variable_without_a_value_is_one_problem_not_also_undeclared(
    tmp_path: Path,
) -> None:
    """``ticket: null`` declares ticket; without --var the one problem is its missing
    value. Saying the prompt reads an undeclared variable sends people to fix the wrong
    line."""
    path = write(
        tmp_path,
        """
        vars: {ticket: null}
        legs:
          - {id: a, run: [echo, "{{ vars.ticket }} {{ vars.tikcet }}"]}
        """,
    )
    with pytest.raises(FlowFileError) as caught:
        load_flow(path, cwd=str(tmp_path))
    assert caught.value.problems == [
        f"{path}:1: vars.ticket has no default; give it with --var ticket=VALUE",
        f"{path}:3: leg 'a': run: reads vars.tikcet, which is not declared; "
        "add it under vars: (or fix the name)",
    ]


def test_a_leg_sets_its_stall_limit_and_zero_turns_it_off(tmp_path: Path) -> None:
    from lirun.exec.task import build_request

    path = write(
        tmp_path,
        """
        legs:
          - {id: a, agent: codex, prompt: go, stall_timeout: 30}
          - {id: b, agent: codex, prompt: go, stall_timeout: 0}
          - {id: c, agent: codex, prompt: go}
          - {id: d, run: [echo, hi]}
        """,
    )
    spec = load_flow(path, {}, cwd=str(tmp_path))
    limits = {
        leg.id: build_request(leg.task, cwd=str(tmp_path)).limits.stall_timeout for leg in spec.legs
    }
    assert limits == {"a": 30.0, "b": None, "c": 600.0, "d": None}  # a command has none
    bad = write(
        tmp_path, "legs:\n  - {id: a, agent: codex, prompt: go, stall_timeout: -1}\n", "b.yaml"
    )
    with pytest.raises(FlowFileError, match="stall_timeout -1 is negative; give 0 \\(off\\)"):
        load_flow(bad, {}, cwd=str(tmp_path))


def test_the_check_leaves_the_collector_as_it_found_it(tmp_path: Path) -> None:
    """The collector is paused while a flow file is read and checked (every value lives to
    the end) and on again afterwards, also after a file that fails its check; a caller
    that had turned it off finds it off."""
    import gc

    good = tmp_path / "good.yaml"
    good.write_text("legs:\n  - {id: a, run: [echo, hi]}\n", encoding="utf-8")
    bad = tmp_path / "bad.yaml"
    bad.write_text("legs:\n  - {id: a, run: [echo, hi], bogus: 1}\n", encoding="utf-8")
    assert gc.isenabled()
    load_flow(good, cwd=str(tmp_path))
    assert gc.isenabled()
    with pytest.raises(FlowFileError):
        load_flow(bad, cwd=str(tmp_path))
    assert gc.isenabled()
    gc.disable()
    try:
        load_flow(good, cwd=str(tmp_path))
        assert not gc.isenabled()
    finally:
        gc.enable()

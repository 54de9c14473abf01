"""The dry-run preview: expanded graph, waves, and the isolation decision."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lirun.exec.task import Task
from lirun.flows.preview import (
    DEFAULT_PARALLEL,
    concurrent_legs,
    decide_isolation,
    preview_flow,
)
from lirun.flows.spec import FlowSpec, ForEach, LegSpec


def agent(leg_id: str, *deps: str, **more: Any) -> LegSpec:
    task = Task(agent="claude", prompt="do it")
    return LegSpec(id=leg_id, task=task, depends_on=deps, **more)


def command(leg_id: str, *deps: str, **more: Any) -> LegSpec:
    task = Task(run=("echo", leg_id))
    return LegSpec(id=leg_id, task=task, depends_on=deps, **more)


def flow(*legs: LegSpec, cwd: str = "/nowhere", parallel: int | None = None) -> FlowSpec:
    return FlowSpec(legs=legs, cwd=cwd, parallel=parallel, path="/f.yaml", digest="ab" * 32)


def never_git(path: str) -> bool:
    return False


def always_git(path: str) -> bool:
    return True


def test_a_diamond_has_three_waves() -> None:
    spec = flow(command("a"), command("b", "a"), command("c", "a"), command("d", "b", "c"))
    plan = preview_flow(spec, is_git=never_git)
    assert plan.waves == (("a",), ("b", "c"), ("d",))
    assert plan.parallel == DEFAULT_PARALLEL
    d = next(node for node in plan.nodes if node.id == "d")
    assert d.depends_on == ("b", "c")
    assert d.wave == 3
    assert d.kind == "command"
    assert d.does == "echo d"


def test_fan_out_literal_items_are_expanded_and_artifact_items_resolve_at_run_time() -> None:
    spec = flow(
        agent("plan"),
        command("lint", "plan", for_each=ForEach(items=("x", "y"))),
        agent("impl", "plan", for_each=ForEach(artifact="plan.list", split="json")),
        command("none", "plan", for_each=ForEach(items=())),
        agent("join", "lint", "impl", "none"),
    )
    plan = preview_flow(spec, parallel=2, is_git=never_git)
    ids = [node.id for node in plan.nodes]
    assert ids == ["plan", "lint[0]", "lint[1]", "impl[*]", "none[*]", "join"]
    by_id = {node.id: node for node in plan.nodes}
    assert by_id["lint[1]"].item == "y"
    assert by_id["lint[0]"].depends_on == ("plan",)
    assert by_id["impl[*]"].items_from == "the json of plan.list, read at run time"
    assert by_id["none[*]"].items_from == "none (an empty list)"
    assert by_id["join"].depends_on == ("lint[0]", "lint[1]", "impl[*]", "none[*]")
    assert plan.waves == (("plan",), ("lint[0]", "lint[1]", "impl[*]", "none[*]"), ("join",))
    text = "\n".join(plan.text_lines())
    assert "impl[*]" in text
    assert "read at run time" in text
    assert "item='x'" in text
    assert text.endswith("6 node(s) from 5 leg(s); nothing was run")
    data = json.loads(json.dumps(plan.to_dict()))
    assert data["waves"][1] == ["lint[0]", "lint[1]", "impl[*]", "none[*]"]
    assert data["nodes"][3]["items_from"].startswith("the json of")
    assert data["digest"] == "ab" * 32
    assert data["parallel"] == 2


@pytest.mark.parametrize(
    ("is_agent", "explicit", "concurrent", "in_git", "expected"),
    [
        (True, None, True, True, "worktree"),
        (True, None, False, True, "shared"),
        (True, None, True, False, "shared"),
        (True, "shared", True, True, "shared"),
        (True, "worktree", False, True, "worktree"),
        (True, "worktree", True, False, "worktree"),
        (False, None, True, True, "shared"),
        (False, "worktree", True, True, "worktree"),
    ],
)
def test_decide_isolation(
    is_agent: bool, explicit: str | None, concurrent: bool, in_git: bool, expected: str
) -> None:
    leg = (agent if is_agent else command)("x", isolation=explicit)
    assert decide_isolation(leg, concurrent=concurrent, in_git=in_git) == expected


def test_concurrent_legs() -> None:
    chain = flow(agent("a"), agent("b", "a"), agent("c", "b"))
    assert concurrent_legs(chain, 4) == set()
    diamond = flow(agent("a"), agent("b", "a"), agent("c", "a"), agent("d", "b", "c"))
    assert concurrent_legs(diamond, 4) == {"b", "c"}
    assert concurrent_legs(diamond, 1) == set()
    fan = flow(
        agent("a", for_each=ForEach(items=("1", "2"))),
        agent("b", "a", for_each=ForEach(items=("1",))),
        agent("c", "b", for_each=ForEach(artifact="b.x")),
    )
    assert concurrent_legs(fan, 4) == {"a", "c"}


def test_in_a_git_repository_parallel_agents_get_worktrees(repo: Path) -> None:
    spec = flow(agent("a"), agent("b", "a"), command("c", "a"), agent("d", "b", "c"), cwd=str(repo))
    plan = preview_flow(spec)
    isolation = {node.id: node.isolation for node in plan.nodes}
    assert isolation == {"a": "shared", "b": "worktree", "c": "shared", "d": "shared"}
    assert plan.in_git == {str(repo): True}
    assert "a git repository" in plan.text_lines()[1]
    serial = preview_flow(spec, parallel=1)
    assert {node.isolation for node in serial.nodes} == {"shared"}


def test_outside_git_nothing_is_isolated(tmp_path: Path) -> None:
    spec = flow(agent("a"), agent("b"), cwd=str(tmp_path))
    plan = preview_flow(spec)
    assert [node.isolation for node in plan.nodes] == ["shared", "shared"]
    assert "not a git repository" in plan.text_lines()[1]


def test_each_leg_cwd_is_asked_once(tmp_path: Path) -> None:
    asked: list[str] = []

    def is_git(path: str) -> bool:
        asked.append(path)
        return path == "/repo"

    spec = flow(agent("a", cwd="/repo"), agent("b", cwd="/repo"), agent("c"), cwd="/else")
    plan = preview_flow(spec, is_git=is_git)
    assert sorted(asked) == ["/else", "/repo"]
    assert [node.isolation for node in plan.nodes] == ["worktree", "worktree", "shared"]


def test_the_header_judges_the_flows_own_cwd_even_when_every_leg_has_its_own() -> None:
    spec = flow(agent("a", cwd="/elsewhere"), cwd="/repo")
    plan = preview_flow(spec, is_git=lambda path: path == "/repo")
    assert "(a git repository)" in plan.text_lines()[1]
    assert plan.to_dict()["git"]["/repo"] is True


def test_each_fan_out_instance_shows_its_template_rendered() -> None:
    review = LegSpec(
        id="review",
        task=Task(agent="claude", prompt="Review {{ item }} for {{ vars.who }}"),
        for_each=ForEach(items=("a.py", "b.py")),
    )
    lint = LegSpec(id="lint", task=Task(run=("ruff", "{{ item | upper }}")), for_each=ForEach(
        items=("x",)))  # fmt: skip
    later = LegSpec(
        id="later",
        task=Task(run=("echo", "{{ legs.lint.reply }} {{ item }}")),
        depends_on=("lint",),
        for_each=ForEach(items=("1",)),
    )
    spec = FlowSpec(legs=(review, lint, later), cwd="/nowhere", vars={"who": "ann"})
    plan = preview_flow(spec, is_git=never_git)
    nodes = {node.id: node for node in plan.nodes}
    assert nodes["review[1]"].prompt == "Review b.py for ann"
    assert nodes["lint[0]"].run == ("ruff", "X")
    assert nodes["later[0]"].run is None  # another leg's output is known only at run time
    assert nodes["later[0]"].unrendered == "reads legs.lint: rendered at run time"
    text = "\n".join(plan.text_lines())
    assert "review[0]  agent claude  [shared]  item='a.py'  prompt='Review a.py for ann'" in text
    assert "lint[0]    command ruff X  [shared]" in text
    assert plan.to_dict()["nodes"][1]["prompt"] == "Review b.py for ann"


def test_a_fan_out_template_that_fails_is_shown_failing_once() -> None:
    leg = LegSpec(
        id="bad", task=Task(run=("echo", "{{ item + 1 }}")), for_each=ForEach(items=("a", "b"))
    )
    plan = preview_flow(FlowSpec(legs=(leg,), cwd="/nowhere"), is_git=never_git)
    first, second = plan.nodes
    assert str(first.unrendered).startswith("the run would fail: ")
    assert second.unrendered == "not rendered: an earlier item's failed"

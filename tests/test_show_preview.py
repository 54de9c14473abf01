"""The dry-run plan: waves from depends_on, branches, gates; pure (no git, no database)."""

from __future__ import annotations

import json

import pytest

from lirun.exec.task import Task
from lirun.shows.preview import gate_text, plan_show, play_branch
from lirun.shows.spec import Gate, PlaySpec, ShowSpec


def spec_of(plays: dict[str, tuple[str, ...]], **more) -> ShowSpec:
    return ShowSpec(
        topic="t",
        repo="/nowhere/repo",  # never read: the plan is pure
        base="main",
        integration=more.pop("integration", "show/t"),
        plays=tuple(
            PlaySpec(name=n, task=Task(run=("sh", "-c", f"make {n}")), depends_on=d)
            for n, d in plays.items()
        ),
        gate=more.pop("gate", Gate("pytest -q")),
        **more,
    )


@pytest.mark.parametrize(
    ("plays", "waves"),
    [
        ({"a": (), "b": (), "c": ()}, [["a", "b", "c"]]),
        ({"a": (), "b": ("a",), "c": ("b",)}, [["a"], ["b"], ["c"]]),
        ({"d": ("b", "c"), "b": ("a",), "c": ("a",), "a": ()}, [["a"], ["b", "c"], ["d"]]),
        ({"x": ("y",), "y": (), "z": ()}, [["y", "z"], ["x"]]),
        # a wave is one after the *latest* dependency
        ({"a": (), "b": ("a",), "c": ("a", "b")}, [["a"], ["b"], ["c"]]),
    ],
)
def test_waves_follow_dependencies(plays: dict[str, tuple[str, ...]], waves) -> None:
    plan = plan_show(spec_of(plays))
    assert plan.waves == waves
    assert [p.name for p in plan.plays] == [n for wave in waves for n in wave]


def test_branches_gates_and_attempts() -> None:
    spec = ShowSpec(
        topic="auth",
        repo="/r",
        base="main",
        integration="nightly/{id}",
        plays=(
            PlaySpec(name="models", task=Task(agent="claude/sonnet", prompt="Add the model\nmore")),
            PlaySpec(
                name="api",
                task=Task(run=("./gen", "--all"), timeout=60.0),
                depends_on=("models",),
                gate=Gate(("pytest", "tests/api"), 30.0),
                attempts=1,
            ),
        ),
        gate=Gate("pytest -q"),
        final_gate=Gate("make check", 900.0),
        parallel=3,
    )
    plan = plan_show(spec)
    models, api = plan.plays
    assert models.branch == "nightly/{id}--models-a1"
    assert models.gate == Gate("pytest -q")
    assert models.gate_is_default
    assert models.work == "agent claude/sonnet: Add the model ..."
    assert api.branch == play_branch("nightly/{id}", "api") == "nightly/{id}--api-a1"
    assert api.gate == Gate(("pytest", "tests/api"), 30.0)
    assert not api.gate_is_default
    assert api.work == "run: ./gen --all"
    assert api.attempts == 1
    assert api.timeout == 60.0
    assert plan.parallel == 3
    assert plan_show(spec, parallel=1).parallel == 1
    text = plan.text()
    for words in (
        "show auth: 2 plays in 2 waves, at most 3 at a time",
        "integration  nightly/{id}",
        "final gate   make check (timeout 900s)",
        "wave 2\n  api (after models)\n    does      run: ./gen --all",
        "    gate      pytest tests/api (timeout 30s)\n    attempts  1 (a failed gate ends",
        "    gate      pytest -q (the show's)",
        "    timeout   60s",
    ):
        assert words in text, text
    data = json.loads(json.dumps(plan.to_dict()))
    assert data["waves"] == [["models"], ["api"]]
    assert data["plays"][1]["gate"] == {"command": ["pytest", "tests/api"], "timeout": 30.0}
    assert data["final_gate"] == {"command": "make check", "timeout": 900.0}
    assert data["integration"] == "nightly/{id}"
    assert data["parallel"] == 3


def test_a_run_string_shows_as_typed() -> None:
    plan = plan_show(spec_of({"a": ()}))
    assert plan.plays[0].work == "run: make a"
    assert "at most 4 at a time" in plan.text()  # DEFAULT_PARALLEL


@pytest.mark.parametrize(
    ("gate", "text"),
    [
        (None, "-"),
        (Gate("pytest -q"), "pytest -q"),
        (Gate(("sh", "-c", "a b")), "sh -c 'a b'"),
        (Gate("x", 2.5), "x (timeout 2.5s)"),
    ],
)
def test_gate_text(gate: Gate | None, text: str) -> None:
    assert gate_text(gate) == text

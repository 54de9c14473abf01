"""The package's value types are standard dataclasses: copyable, picklable, introspectable."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import inspect
import pickle
import pkgutil
from pathlib import Path
from typing import Any

import pytest

import lirun
from lirun import CommandProgram, Limits, RunRequest, RunResult
from lirun.providers.registry import provider_names
from lirun.record.rundir import RunDir

# Callables in their defaults (hooks a leg is given): copyable, not picklable by design.
HOLDS_CALLABLES = {"lirun.exec.legs.LegContext"}
# Fields a type checks when it is made: a value it accepts instead of the field's name.
ACCEPTED = {"lirun.exec.agent_legs.AgentProgram": {"provider": provider_names()[0]}}


def value_types() -> list[type]:
    found = []
    for info in pkgutil.walk_packages(lirun.__path__, "lirun."):
        if info.name.endswith("__main__"):  # running it is the CLI
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if (
                isinstance(obj, type)
                and dataclasses.is_dataclass(obj)
                and obj.__module__ == module.__name__
            ):
                found.append(obj)
    return found


VALUE_TYPES = value_types()


def qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def placeholder(cls: type) -> Any:
    """An instance with each required field set to its own name (no type is checked)."""
    required = {
        f.name: f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    return cls(**{**required, **ACCEPTED.get(qualified(cls), {})})


def test_the_walk_finds_the_value_types() -> None:
    names = {qualified(cls) for cls in VALUE_TYPES}
    assert "lirun.record.rundir.RunDir" in names
    assert "lirun.record.outcome_types.Outcome" in names
    assert len(VALUE_TYPES) > 60


@pytest.mark.parametrize("cls", VALUE_TYPES, ids=qualified)
def test_the_signature_shows_the_fields(cls: type) -> None:
    parameters = list(inspect.signature(cls).parameters)
    assert parameters == [f.name for f in dataclasses.fields(cls) if f.init]


@pytest.mark.parametrize("cls", VALUE_TYPES, ids=qualified)
def test_a_value_survives_copy_and_deepcopy(cls: type) -> None:
    value = placeholder(cls)
    assert copy.copy(value) == value
    assert copy.deepcopy(value) == value


@pytest.mark.parametrize(
    "cls", [c for c in VALUE_TYPES if qualified(c) not in HOLDS_CALLABLES], ids=qualified
)
def test_a_value_survives_pickle(cls: type) -> None:
    value = placeholder(cls)
    assert pickle.loads(pickle.dumps(value)) == value


def public_values(tmp: str) -> list[object]:
    run = RunDir(run_id="r-1", state_root=Path(tmp, "r-1"), artifact_dir=Path(tmp, "out"))
    return [
        run,
        Limits(timeout=30.0),
        CommandProgram(argv=["true"]),
        RunRequest(program=CommandProgram(argv=["true"]), cwd=tmp, metadata={"k": [1]}),
        RunResult(
            run_id="r-1",
            status="completed",
            reason="run.completed.ok",
            run_dir=str(run.state_root),
            artifact_dir=str(run.artifact_dir),
            exit_code=0,
            branch_id="b-1",
        ),
    ]


@pytest.mark.parametrize("index", range(5))
def test_the_public_values_round_trip_with_real_fields(index: int, tmp_path: Path) -> None:
    value = public_values(str(tmp_path))[index]
    for twin in (copy.copy(value), copy.deepcopy(value), pickle.loads(pickle.dumps(value))):
        assert twin == value
        assert type(twin) is type(value)


def test_a_frozen_value_stays_frozen_and_hashable() -> None:
    run = RunDir(run_id="r-1", state_root=Path("/tmp/r-1"), artifact_dir=Path("/tmp/out"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.run_id = "other"  # type: ignore[misc]  # frozen: the write must raise
    assert hash(copy.deepcopy(run)) == hash(run)
    assert dataclasses.replace(run, run_id="r-2").run_id == "r-2"

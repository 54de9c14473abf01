"""lirun.values behaves as dataclasses does, for the part of it the package uses."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import pytest

from lirun import values


def define(module: object) -> dict[str, type]:
    dc = module.dataclass
    field = module.field

    @dc(frozen=True, slots=True)
    class Point:
        x: int
        y: int = 0
        tags: list[str] = field(default_factory=list)
        kind: ClassVar[str] = "point"

    @dc(slots=True)
    class Box:
        name: str
        items: dict[str, int] = field(default_factory=dict)

        def __post_init__(self) -> None:
            self.name = self.name.strip()

    @dc
    class Plain:
        a: int
        b: str = "b"

    @dc(frozen=True, slots=True)
    class Nested:
        point: Point
        boxes: tuple[Box, ...] = ()

    return {"Point": Point, "Box": Box, "Plain": Plain, "Nested": Nested}


REAL = define(dataclasses)
LIGHT = define(values)


@pytest.mark.parametrize("kinds", [REAL, LIGHT], ids=["dataclasses", "values"])
def test_construction_defaults_and_factories(kinds: dict[str, type]) -> None:
    point = kinds["Point"](1)
    assert (point.x, point.y, point.tags) == (1, 0, [])
    assert kinds["Point"](1).tags is not point.tags  # a new list per instance
    assert kinds["Point"](1, 2, ["a"]) == kinds["Point"](x=1, y=2, tags=["a"])
    assert kinds["Point"].kind == "point"
    assert kinds["Box"]("  b ").name == "b"  # __post_init__ ran
    assert kinds["Plain"](1).b == "b" and kinds["Plain"].b == "b"


@pytest.mark.parametrize("kinds", [REAL, LIGHT], ids=["dataclasses", "values"])
def test_bad_calls_raise_type_error(kinds: dict[str, type]) -> None:
    for call in (
        lambda: kinds["Point"](),
        lambda: kinds["Point"](1, 2, [], 4),
        lambda: kinds["Point"](1, x=2),
        lambda: kinds["Point"](1, z=2),
    ):
        with pytest.raises(TypeError):
            call()


@pytest.mark.parametrize("kinds", [REAL, LIGHT], ids=["dataclasses", "values"])
def test_frozen_eq_hash_repr_slots(kinds: dict[str, type]) -> None:
    point = kinds["Point"](1, 2)
    with pytest.raises(AttributeError):
        point.x = 3  # type: ignore[misc]
    assert point == kinds["Point"](1, 2) and point != kinds["Point"](2, 2)
    assert point != (1, 2, [])
    assert hash(kinds["Nested"](kinds["Point"](1, 2, ()))) == hash(  # type: ignore[arg-type]
        kinds["Nested"](kinds["Point"](1, 2, ()))  # type: ignore[arg-type]
    )
    assert repr(point).endswith("Point(x=1, y=2, tags=[])")
    assert not hasattr(point, "__dict__")
    box = kinds["Box"]("b")
    box.name = "c"  # not frozen
    with pytest.raises(TypeError):
        hash(box)  # eq without frozen: unhashable
    assert kinds["Point"].__match_args__ == ("x", "y", "tags")


@pytest.mark.parametrize("module", [dataclasses, values], ids=["dataclasses", "values"])
def test_replace_fields_asdict(module: object) -> None:
    kinds = REAL if module is dataclasses else LIGHT
    point = kinds["Point"](1, 2, ["t"])
    moved = module.replace(point, y=5)
    assert (moved.x, moved.y, moved.tags) == (1, 5, ["t"])
    assert [f.name for f in module.fields(point)] == ["x", "y", "tags"]
    nested = kinds["Nested"](point, (kinds["Box"]("b", {"n": 1}),))
    assert module.asdict(nested) == {
        "point": {"x": 1, "y": 2, "tags": ["t"]},
        "boxes": ({"name": "b", "items": {"n": 1}},),
    }
    assert module.is_dataclass(point) and module.is_dataclass(kinds["Point"])
    assert not module.is_dataclass(object())


def test_unsupported_options_are_refused() -> None:
    with pytest.raises(TypeError, match="does not support"):

        @values.dataclass(order=True)
        class Ordered:
            a: int


def test_default_after_required_is_refused() -> None:
    with pytest.raises(TypeError):

        @values.dataclass
        class Bad:
            a: int = 1
            b: int  # type: ignore[misc]

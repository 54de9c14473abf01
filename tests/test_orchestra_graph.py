"""``ready``: what may start now, in the order given, each node judged when reached."""

from __future__ import annotations

from lirun.orchestra.graph import ready

DEPS = {"a": (), "b": ("a",), "c": ("a", "b"), "d": ()}


def test_ready_keeps_the_order_given_and_needs_every_dependency_done() -> None:
    assert list(ready(["d", "a", "b", "c"], DEPS, lambda n: False)) == ["d", "a"]
    assert list(ready(["c", "b"], DEPS, {"a"}.__contains__)) == ["b"]
    assert list(ready(["c", "b"], DEPS, {"a", "b"}.__contains__)) == ["c", "b"]
    assert list(ready(["x"], DEPS, lambda n: False)) == ["x"], "an unknown node needs nothing"


def test_ready_judges_each_node_when_it_is_reached() -> None:
    done: set[str] = set()
    started = []
    for node in ready(["a", "b", "c"], DEPS, done.__contains__):
        started.append(node)
        done.add(node)  # work that ends as it is made counts for the nodes after it
    assert started == ["a", "b", "c"]

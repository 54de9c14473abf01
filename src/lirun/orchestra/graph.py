"""A dependency graph as pure functions: order, ancestors, cycles. Flows use it for their
legs, shows for their plays.

Nodes are names; ``deps`` maps each node to the nodes it depends on. Every function
here is pure and table-tested; the loaders turn a cycle or an unknown name into a
``file:line`` error. A flow file is input, so nothing here recurses (a 10,000-leg chain
would pass Python's recursion limit) and nothing is quadratic in the number of legs:
``find_cycle`` and ``comparable_to_all`` are linear in nodes and edges (``graphlib``
finds cycles), ``topo_order`` adds a heap for the declared order,
``Reach`` answers "is A above B?" without building every leg's ancestor set.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping
from graphlib import CycleError, TopologicalSorter

__all__ = [
    "Reach",
    "ancestors",
    "comparable_to_all",
    "find_cycle",
    "ready",
    "topo_order",
    "unknown_deps",
]


def unknown_deps(deps: Mapping[str, Iterable[str]]) -> list[tuple[str, str]]:
    """(node, missing dependency) pairs, in node order."""
    return [(node, dep) for node, ds in deps.items() for dep in ds if dep not in deps]


def _known(deps: Mapping[str, Iterable[str]], node: str) -> list[str]:
    return [d for d in deps.get(node, ()) if d in deps]


def _sorter(deps: Mapping[str, Iterable[str]]) -> TopologicalSorter[str]:
    """The graph of known names, prepared; CycleError on a cycle."""
    sorter = TopologicalSorter({node: _known(deps, node) for node in deps})
    sorter.prepare()
    return sorter


def _dependency_path(error: CycleError) -> list[str]:
    # graphlib walks from a dependency to what depends on it; the path reads the other way.
    return list(reversed(error.args[1]))


def find_cycle(deps: Mapping[str, Iterable[str]]) -> list[str] | None:
    """One dependency cycle as a path ``[a, b, …, a]`` (a depends on b …), or None.
    Unknown names are ignored."""
    try:
        _sorter(deps)
    except CycleError as error:
        return _dependency_path(error)
    return None


def topo_order(deps: Mapping[str, Iterable[str]]) -> list[str]:
    """Dependencies first; of the nodes ready to go, the one declared first goes first.
    ValueError on a cycle."""
    try:
        sorter = _sorter(deps)
    except CycleError as error:
        raise ValueError("dependency cycle: " + " -> ".join(_dependency_path(error))) from None
    declared = {node: index for index, node in enumerate(deps)}
    ready = [(declared[node], node) for node in sorter.get_ready()]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        _, node = heapq.heappop(ready)
        order.append(node)
        sorter.done(node)
        for next_node in sorter.get_ready():
            heapq.heappush(ready, (declared[next_node], next_node))
    return order


def ready(
    nodes: Iterable[str], deps: Mapping[str, Iterable[str]], done: Callable[[str], bool]
) -> Iterator[str]:
    """The nodes of ``nodes``, in their order, whose every dependency is ``done``: what
    may start now. Lazy: each node is judged when reached, so work started for an
    earlier node (a flow leg that ends as it is made) counts for the later ones."""
    for node in nodes:
        if all(done(dep) for dep in deps.get(node, ())):
            yield node


def ancestors(deps: Mapping[str, Iterable[str]], node: str) -> set[str]:
    """Every node ``node`` depends on, directly or transitively (not itself)."""
    seen: set[str] = set()
    stack = _known(deps, node)
    while stack:
        dep = stack.pop()
        if dep not in seen:
            seen.add(dep)
            stack.extend(_known(deps, dep))
    return seen


class Reach:
    """``above(a, b)``: whether ``b`` depends on ``a``, directly or transitively. A direct
    dependency is a set lookup; any other question walks down from ``a`` once and keeps
    what it found, so checking every leg of a long chain that reads its parent stays
    linear instead of building each leg's ancestor set."""

    def __init__(self, deps: Mapping[str, Iterable[str]]) -> None:
        self._direct = {node: set(_known(deps, node)) for node in deps}
        self._users: dict[str, list[str]] = {node: [] for node in deps}
        for node, direct in self._direct.items():
            for dep in direct:
                self._users[dep].append(node)
        self._below: dict[str, set[str]] = {}

    def above(self, a: str, b: str) -> bool:
        if a not in self._direct or b not in self._direct:
            return False
        if a in self._direct[b]:
            return True
        below = self._below.get(a)
        if below is None:
            below = set()
            stack = list(self._users[a])
            while stack:
                node = stack.pop()
                if node not in below:
                    below.add(node)
                    stack.extend(self._users[node])
            self._below[a] = below
        return b in below


def comparable_to_all(deps: Mapping[str, Iterable[str]]) -> set[str]:
    """The nodes every other node depends on or is depended on by (so none can run beside
    them), in linear time. In a topological order, a node is comparable to all when it is
    the only node of the prefix it ends that nothing else in that prefix depends on (so
    every node before it is an ancestor), and the only node of the suffix it starts that
    depends on nothing else in that suffix (so every node after it is a descendant).
    ValueError on a cycle."""
    order = topo_order(deps)
    direct = {node: set(_known(deps, node)) for node in order}
    users: dict[str, set[str]] = {node: set() for node in order}
    for node, ds in direct.items():
        for dep in ds:
            users[dep].add(node)
    only_top: set[str] = set()
    tops = 0
    used: set[str] = set()  # prefix nodes some later prefix node depends on
    for node in order:
        tops += 1
        for dep in direct[node]:
            if dep not in used:
                used.add(dep)
                tops -= 1
        if tops == 1:
            only_top.add(node)
    bottoms = 0
    needing: set[str] = set()  # suffix nodes that depend on another suffix node
    out: set[str] = set()
    for node in reversed(order):
        bottoms += 1
        for user in users[node]:
            if user not in needing:
                needing.add(user)
                bottoms -= 1
        if bottoms == 1 and node in only_top:
            out.add(node)
    return out

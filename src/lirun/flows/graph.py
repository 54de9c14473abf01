"""The leg graph as pure functions: order, ancestors, cycles. Shows use it for plays too.

Nodes are names; ``deps`` maps each node to the nodes it depends on. Every function
here is pure and table-tested; the loaders turn a cycle or an unknown name into a
``file:line`` error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["ancestors", "find_cycle", "topo_order", "unknown_deps"]


def unknown_deps(deps: Mapping[str, Iterable[str]]) -> list[tuple[str, str]]:
    """(node, missing dependency) pairs, in node order."""
    return [(node, dep) for node, ds in deps.items() for dep in ds if dep not in deps]


def find_cycle(deps: Mapping[str, Iterable[str]]) -> list[str] | None:
    """One dependency cycle as a path ``[a, b, …, a]``, or None. Unknown names are ignored."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in deps.get(node, ()):
            if dep not in deps:
                continue
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state and (found := visit(dep)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for node in deps:
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def topo_order(deps: Mapping[str, Iterable[str]]) -> list[str]:
    """Dependencies first; ties keep the order the nodes were declared in.
    ValueError on a cycle."""
    cycle = find_cycle(deps)
    if cycle is not None:
        raise ValueError("dependency cycle: " + " -> ".join(cycle))
    done: dict[str, None] = {}

    def visit(node: str) -> None:
        for dep in deps.get(node, ()):
            if dep in deps and dep not in done:
                visit(dep)
        done.setdefault(node, None)

    for node in deps:
        visit(node)
    return list(done)


def ancestors(deps: Mapping[str, Iterable[str]], node: str) -> set[str]:
    """Every node ``node`` depends on, directly or transitively (not itself)."""
    seen: set[str] = set()
    stack = [d for d in deps.get(node, ()) if d in deps]
    while stack:
        dep = stack.pop()
        if dep not in seen:
            seen.add(dep)
            stack.extend(d for d in deps.get(dep, ()) if d in deps)
    return seen

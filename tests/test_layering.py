"""The package layout is the architecture: imports point down the layers, never in a cycle.

Every module's imports (top-level and inside functions; ``if TYPE_CHECKING:`` blocks
are skipped, they never run) are read with ``ast``. A module importing a higher layer,
a module no layer claims, two modules importing each other (directly or round a
loop), or a module over 500 lines fails the test, with the offending names.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
MAX_LINES = 500

# Lowest first. A module belongs to the first entry whose name is it or its package.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "base",
        (
            "lirun",  # the package itself: lazy exports only (importlib, never `import`)
            "lirun.paths",
            "lirun.inputfile",  # a user-named file read whole within a bound
            "lirun.settings",
            "lirun.durations",  # the DURATION grammar every option and file key reads
            "lirun.errors",
            "lirun.lifecycle",
            "lirun.reasons",
            "lirun.signals",
            "lirun.provider_errors",
            "lirun.liveness",
            "lirun.platform",
            "lirun.hints",
            "lirun.async_twin",
            "lirun.logs",
            "lirun.visible",  # record text shown with its invisible characters escaped
            "lirun.run_output",  # a run's stream files found and read (os only)
            "lirun.teams.rules",  # pure decisions the store applies under its lock
            "lirun.schemas",
        ),
    ),
    ("yamlfile", ("lirun.yamlfile",)),  # files read whole with file:line problems
    ("store", ("lirun.store",)),
    ("record", ("lirun.record",)),
    ("wait", ("lirun.wait",)),
    ("teams", ("lirun.teams",)),
    ("views", ("lirun.views",)),  # one record's detail document: li status --json, Run
    ("exec", ("lirun.exec", "lirun.providers")),  # a provider: one module in providers/
    ("orchestra", ("lirun.orchestra",)),  # what flows and shows share: graph, pool, lease
    ("flows", ("lirun.flows", "lirun.shows")),
    ("schedules", ("lirun.schedules",)),
    # lirun from Python: the commands are built on it, so it sits below them.
    ("client", ("lirun.client",)),
    ("cli", ("lirun.cli", "lirun.ui", "lirun.__main__")),
]


def module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int | None:
    """The rank of the longest prefix naming ``module`` (``lirun`` itself names only itself)."""
    matches = [
        (len(prefix), rank)
        for rank, (_, prefixes) in enumerate(LAYERS)
        for prefix in prefixes
        if module == prefix or (prefix != "lirun" and module.startswith(prefix + "."))
    ]
    return max(matches)[1] if matches else None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST) -> Iterator[ast.AST]:
    """Every node, except the bodies of ``if TYPE_CHECKING:``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for other in child.orelse:
                yield other
                yield from _walk(other)
            continue
        yield child
        yield from _walk(child)


def imports_of(path: Path, module: str, known: set[str]) -> set[str]:
    """The lirun modules ``module`` imports (``from lirun.x import y`` names lirun.x.y
    when that is a module, else lirun.x)."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in _walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in known else target)
    return {name for name in found if name == "lirun" or name.startswith("lirun.")}


def import_graph(src: Path = SRC) -> tuple[dict[str, set[str]], dict[str, Path]]:
    paths = {module_name(p, src): p for p in (src / "lirun").rglob("*.py")}
    known = set(paths)
    graph = {m: {i for i in imports_of(p, m, known) if i != m} for m, p in paths.items()}
    return graph, paths


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    problems = []
    for module, imported in sorted(graph.items()):
        own = layer_of(module)
        if own is None:
            problems.append(f"{module} belongs to no layer (add it to LAYERS or move it)")
            continue
        for name in sorted(imported):
            theirs = layer_of(name)
            if theirs is not None and theirs > own:
                problems.append(f"{module} ({LAYERS[own][0]}) imports {name} ({LAYERS[theirs][0]})")
    return problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One loop per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in graph:
                continue
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_a_higher_layer() -> None:
    graph, _ = import_graph()
    assert upward_imports(graph) == []


def test_no_import_cycle() -> None:
    graph, _ = import_graph()
    assert [" <-> ".join(loop) for loop in cycles(graph)] == []


def test_no_module_over_500_lines() -> None:
    _, paths = import_graph()
    long = {m: n for m, p in paths.items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_the_checker_sees_an_upward_import_and_a_cycle(tmp_path: Path) -> None:
    """The checks above can fail: a store module importing cli, and a two-module loop."""
    pkg = tmp_path / "lirun"
    (pkg / "store").mkdir(parents=True)
    (pkg / "wait").mkdir()
    (pkg / "cli").mkdir()
    for init in (pkg, pkg / "store", pkg / "wait", pkg / "cli"):
        (init / "__init__.py").write_text("")
    (pkg / "store" / "core.py").write_text("def f():\n    from lirun.cli import main\n")
    (pkg / "cli" / "main.py").write_text("")
    (pkg / "wait" / "a.py").write_text("from lirun.wait import b\n")
    (pkg / "wait" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nimport lirun.wait.a\nif TYPE_CHECKING:\n"
        "    from lirun.cli import main\n"
    )
    graph, _ = import_graph(tmp_path)
    assert upward_imports(graph) == ["lirun.store.core (store) imports lirun.cli.main (cli)"]
    assert cycles(graph) == [["lirun.wait.a", "lirun.wait.b"]]

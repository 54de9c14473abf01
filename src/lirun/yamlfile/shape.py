"""The shape of a YAML document before it becomes Python values: how deep it nests and
how many values its aliases expand to.

A flow, show or profile file is input. PyYAML builds values recursively, so a document
nested a few hundred levels deep ended in a ``RecursionError`` traceback; and a few
lines of aliases (``b: [*a, *a, ...]``, nine levels of ten) stand for a billion values
that every later walk over the data would visit. ``check_shape`` walks the node graph
once, without recursion and visiting each node once, and says what is wrong with the
line it starts on.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_DEPTH", "MAX_VALUES", "YamlShapeError", "check_shape"]

MAX_DEPTH = 64  # mappings and lists inside one another
MAX_VALUES = 2_000_000  # values the document stands for, each alias counted in full


class YamlShapeError(ValueError):
    """What is wrong, and the 1-based line of the node where it is."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line


def _containers(node: Any) -> tuple[int, list[Any]]:
    """(scalars directly inside ``node``, the mappings and lists directly inside it)."""
    scalars, inner = 0, []
    for item in node.value:
        for child in item if isinstance(item, tuple) else (item,):  # (key, value) pairs
            if isinstance(child.value, list):
                inner.append(child)
            else:
                scalars += 1
    return scalars, inner


def _has_alias(root: Any) -> bool:
    """Whether a container is reached twice (an alias); YamlShapeError past MAX_DEPTH."""
    seen: set[int] = set()
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if id(node) in seen:
            return True
        seen.add(id(node))
        if depth > MAX_DEPTH:
            raise YamlShapeError(
                node.start_mark.line + 1,
                f"nested more than {MAX_DEPTH} levels deep (mappings and lists inside one "
                "another); flatten it",
            )
        for item in node.value:
            for child in item if isinstance(item, tuple) else (item,):
                if isinstance(child.value, list):
                    stack.append((child, depth + 1))
    return False


def check_shape(root: Any) -> None:
    """YamlShapeError when ``root`` (a composed PyYAML node) nests deeper than MAX_DEPTH,
    refers to itself through an alias, or stands for more than MAX_VALUES values."""
    if not isinstance(root.value, list):
        return  # a lone scalar
    if not _has_alias(root):
        return  # as many values as nodes: the file's own size bounds them
    sizes: dict[int, int] = {}  # id(container) → the values it stands for, once known
    open_nodes: set[int] = set()
    stack: list[tuple[Any, int, list[Any] | None, int]] = [(root, 1, None, 0)]
    while stack:
        node, depth, inner, scalars = stack.pop()
        key = id(node)
        if inner is not None:  # its containers are measured: add them up
            open_nodes.discard(key)
            size = 1 + scalars + sum(sizes[id(child)] for child in inner)
            if size > MAX_VALUES:
                raise YamlShapeError(
                    node.start_mark.line + 1,
                    f"its aliases stand for more than {MAX_VALUES:,} values; write the data "
                    "out instead of multiplying it through aliases",
                )
            sizes[key] = size
            continue
        if key in sizes:
            continue  # an alias of a container already measured
        if key in open_nodes:
            raise YamlShapeError(
                node.start_mark.line + 1, "an alias refers to the value that holds it"
            )
        if depth > MAX_DEPTH:
            raise YamlShapeError(
                node.start_mark.line + 1,
                f"nested more than {MAX_DEPTH} levels deep (mappings and lists inside one "
                "another); flatten it",
            )
        open_nodes.add(key)
        scalars, inner = _containers(node)
        stack.append((node, depth, inner, scalars))
        stack.extend((child, depth + 1, None, 0) for child in inner)

"""The shape of a YAML document before it becomes Python values: how deep it nests and
how much its aliases expand to, in values and in text.

A flow, show, schedule or profile file is input. PyYAML builds values recursively, so a
document nested a few hundred levels deep ended in a ``RecursionError`` traceback; a few
lines of aliases (``b: [*a, *a, ...]``, nine levels of ten) stand for a billion values
that every later walk over the data would visit; and a 1 MB file whose text of 500,000
characters is aliased 6,000 times stands for 3 GB once anything copies it out (the
stored flow, a JSON dump, a rendered prompt). ``check_shape`` walks the node graph once,
without recursion, visiting each mapping and list once and never building a value; it
counts each value and each scalar's characters as often as aliases repeat them, and says
what is wrong with the line it starts on.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_DEPTH", "MAX_TEXT", "MAX_VALUES", "YamlShapeError", "check_shape"]

MAX_DEPTH = 64  # mappings and lists inside one another
MAX_VALUES = 2_000_000  # values the document stands for, each alias counted in full
# Characters of text the document stands for, each alias counted in full: the bound of
# the file itself (lines.MAX_FILE_BYTES), so aliases can share text but never multiply
# a file past what it could hold written out. A flow of 10,000 legs is about 0.6 MB.
MAX_TEXT = 4 * 1024 * 1024


class YamlShapeError(ValueError):
    """What is wrong, and the 1-based line of the node where it is."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line


def _line(node: Any) -> int:
    return int(node.start_mark.line) + 1


def _too_much_text(container: Any, biggest: Any, size: int) -> YamlShapeError:
    """The error for ``container``, where the text passed MAX_TEXT; ``biggest`` is its
    largest part (an alias is the node of its anchor, so the line named is the anchor's)."""
    return YamlShapeError(
        _line(container),
        f"its aliases expand to more than {MAX_TEXT:,} characters of text (its largest "
        f"part, the value from line {_line(biggest)}, stands for {size:,}); write the data "
        "out instead of multiplying it through aliases",
    )


def _too_deep(node: Any) -> YamlShapeError:
    return YamlShapeError(
        _line(node),
        f"nested more than {MAX_DEPTH} levels deep (mappings and lists inside one "
        "another); flatten it",
    )


def _children(node: Any) -> tuple[int, int, Any, list[Any]]:
    """(scalars directly inside ``node``, their characters, the longest of them, the
    mappings and lists directly inside it)."""
    scalars, text, longest, inner = 0, 0, None, []
    most = -1
    for item in node.value:
        for child in item if isinstance(item, tuple) else (item,):  # (key, value) pairs
            if isinstance(child.value, list):
                inner.append(child)
                continue
            scalars += 1
            size = len(child.value)
            text += size
            if size > most:
                most, longest = size, child
    return scalars, text, longest, inner


def _has_alias(root: Any) -> bool:
    """Whether a container is reached twice (an alias); YamlShapeError past MAX_DEPTH,
    or past MAX_TEXT when aliased scalars are (a container reached once is walked once,
    so the text counted is the text the document stands for)."""
    seen: set[int] = set()
    stack = [(root, 1)]
    text = 0
    while stack:
        node, depth = stack.pop()
        if id(node) in seen:
            return True
        seen.add(id(node))
        if depth > MAX_DEPTH:
            raise _too_deep(node)
        for item in node.value:
            for child in item if isinstance(item, tuple) else (item,):
                if isinstance(child.value, list):
                    stack.append((child, depth + 1))
                    continue
                text += len(child.value)
                if text > MAX_TEXT:
                    raise _too_much_text(node, child, len(child.value))
    return False


def check_shape(root: Any) -> None:
    """YamlShapeError when ``root`` (a composed PyYAML node) nests deeper than MAX_DEPTH,
    refers to itself through an alias, or stands for more than MAX_VALUES values or
    MAX_TEXT characters of text."""
    if not isinstance(root.value, list):
        return  # a lone scalar
    if not _has_alias(root):
        return  # each container once: what was counted is what it stands for
    sizes: dict[int, tuple[int, int]] = {}  # id(container) → (values, characters)
    open_nodes: set[int] = set()
    stack: list[tuple[Any, int, list[Any] | None, tuple[int, int, Any]]] = [
        (root, 1, None, (0, 0, None))
    ]
    while stack:
        node, depth, inner, (scalars, text, longest) = stack.pop()
        key = id(node)
        if inner is not None:  # its containers are measured: add them up
            open_nodes.discard(key)
            values = 1 + scalars + sum(sizes[id(child)][0] for child in inner)
            if values > MAX_VALUES:
                raise YamlShapeError(
                    _line(node),
                    f"its aliases stand for more than {MAX_VALUES:,} values; write the data "
                    "out instead of multiplying it through aliases",
                )
            parts = [(len(longest.value), longest)] if longest is not None else []
            parts += [(sizes[id(child)][1], child) for child in inner]
            text += sum(sizes[id(child)][1] for child in inner)
            if text > MAX_TEXT:
                size, biggest = max(parts, key=lambda part: part[0])
                raise _too_much_text(node, biggest, size)
            sizes[key] = (values, text)
            continue
        if key in sizes:
            continue  # an alias of a container already measured
        if key in open_nodes:
            raise YamlShapeError(_line(node), "an alias refers to the value that holds it")
        if depth > MAX_DEPTH:
            raise _too_deep(node)
        open_nodes.add(key)
        scalars, text, longest, inner = _children(node)
        stack.append((node, depth, inner, (scalars, text, longest)))
        stack.extend((child, depth + 1, None, (0, 0, None)) for child in inner)

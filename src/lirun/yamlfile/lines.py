"""A YAML file read with its line numbers, so every problem in it can name ``file:line``.

``read_yaml`` loads a file's top-level mapping; each mapping in it is a ``LineMap`` that
remembers where it and each of its keys start, and which keys it holds twice. Only a
regular file of at most MAX_FILE_BYTES is read (``inputfile``), and its nodes are checked
for depth and alias expansion (``shape``) before they become values. Flow, show, schedule
and profile files are all read here.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

from lirun.errors import UsageError
from lirun.inputfile import InputFileError, read_bounded
from lirun.yamlfile import gcpause
from lirun.yamlfile.shape import MAX_TEXT, YamlShapeError, check_shape

__all__ = ["MAX_FILE_BYTES", "LineMap", "YamlFileError", "read_yaml", "where"]

# A file is read whole before it is checked: only a regular file, and at most this much
# (the text its aliases may expand to is the same bound, shape.MAX_TEXT).
MAX_FILE_BYTES = MAX_TEXT


class YamlFileError(UsageError):
    """A YAML file cannot be read, is not YAML, or its top level is not a mapping; the
    message names the file (and line and column, for YAML syntax)."""


class LineMap(dict[Any, Any]):
    """A YAML mapping that remembers where it and each of its keys start (1-based lines),
    and the keys it holds twice (``duplicates``: key, line of the repeat; YAML keeps the
    last value, so a reader that cares can refuse them)."""

    line: int = 0
    key_lines: dict[Any, int]
    duplicates: list[tuple[Any, int]]


@functools.cache
def _line_loader() -> Any:
    """A SafeLoader whose mappings are LineMaps (built once, on first use). libyaml's
    parser when PyYAML has it: the pure-Python scanner takes seconds over a flow file of
    thousands of legs, and a file is read whole before anything is checked."""

    class LineLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
        def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
            """A scalar's tag: text at once when no implicit resolver could claim it
            (quoted, or a first character no number, bool or null starts with); the
            parser asks for every node, and a long file holds a hundred thousand."""
            if kind is yaml.ScalarNode and (
                not implicit[0] or (value and value[0] not in first_characters)
            ):
                return self.DEFAULT_SCALAR_TAG
            return super().resolve(kind, value, implicit)

    def construct_mapping(loader: Any, node: Any) -> LineMap:
        mapping = LineMap(loader.construct_mapping(node, deep=True))
        mapping.line = node.start_mark.line + 1
        mapping.key_lines = {}
        mapping.duplicates = []
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if key in mapping.key_lines:
                mapping.duplicates.append((key, line))
            mapping.key_lines.setdefault(key, line)
        return mapping

    resolvers = LineLoader.yaml_implicit_resolvers
    assert None not in resolvers
    assert not LineLoader.yaml_path_resolvers  # as in SafeLoader
    first_characters = frozenset(resolvers)
    LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return LineLoader


_STR_TAG = "tag:yaml.org,2002:str"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MAP_TAG = "tag:yaml.org,2002:map"


def _build(loader: Any, node: Any, made: dict[int, Any]) -> Any:
    """The value of a checked node (``shape``: at most 64 deep, so the recursion is
    bounded): what ``construct_document`` makes, without its per-node bookkeeping for the
    plain text, lists and mappings that are nearly all of a long flow file. An alias is
    the same object as its anchor (``made``); any other tag goes to the loader."""
    if node.tag == _STR_TAG and not isinstance(node.value, list):
        return node.value
    if id(node) in made:
        return made[id(node)]
    if node.tag == _SEQ_TAG:
        items: list[Any] = []
        made[id(node)] = items
        items.extend(_build(loader, child, made) for child in node.value)
        return items
    if node.tag != _MAP_TAG:
        return loader.construct_object(node, deep=True)  # numbers, null, dates, !!set...
    loader.flatten_mapping(node)  # merge keys (<<) first, as SafeLoader does
    mapping = LineMap()
    made[id(node)] = mapping
    mapping.line = node.start_mark.line + 1
    mapping.key_lines = {}
    mapping.duplicates = []
    for key_node, value_node in node.value:
        key = _build(loader, key_node, made)
        line = key_node.start_mark.line + 1
        try:
            if key in mapping.key_lines:
                mapping.duplicates.append((key, line))
        except TypeError:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                "found unhashable key",
                key_node.start_mark,
            ) from None
        mapping.key_lines.setdefault(key, line)
        mapping[key] = _build(loader, value_node, made)
    return mapping


def where(path: Path, node: object, key: object = None) -> str:
    """``path:line`` of ``key`` in ``node`` (or of ``node``) when known, else ``path``."""
    if isinstance(node, LineMap):
        line = node.key_lines.get(key, node.line) if key is not None else node.line
        if line:
            return f"{path}:{line}"
    return str(path)


def read_yaml(path: Path, *, expected: str = "artifacts:, defaults:, ...") -> dict[str, Any]:
    """The file's top-level mapping (an empty file is an empty mapping); mappings are
    LineMaps, so errors can name ``file:line``. ``expected``: the keys a top level holds,
    for the message when it is not a mapping (flow and show files read through here too)."""

    try:
        text = read_bounded(path, MAX_FILE_BYTES).decode("utf-8")
    except InputFileError as exc:
        raise YamlFileError(f"cannot read {path}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise YamlFileError(f"cannot read {path}: {exc}") from exc

    # A SafeLoader subclass: plain data only, as yaml.safe_load; the nodes are checked
    # for depth and alias expansion before they become values.
    loader = _line_loader()(text)
    try:
        with gcpause.paused():
            node = loader.get_single_node()
            if node is not None:
                check_shape(node)
            data = None if node is None else _build(loader, node, {})
    except yaml.YAMLError as exc:
        raise YamlFileError(_yaml_message(path, exc)) from None
    except YamlShapeError as exc:
        raise YamlFileError(f"{path}:{exc.line}: {exc}") from None
    finally:
        loader.dispose()
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise YamlFileError(
            f"{path}: the top level must be a mapping ({expected}), got {type(data).__name__}"
        )
    return data


def _yaml_message(path: Path, exc: Exception) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is None:
        return f"{path}: invalid YAML: {problem}"
    return f"{path}:{mark.line + 1}:{mark.column + 1}: invalid YAML: {problem}"

"""The JSON Schemas of every ``--json`` output (docs/json.md), shipped with the package.

Each output names its shape and version in a ``"schema"`` key (``"lirun.run_result/1"``);
the file ``<name>.json`` here is the schema of ``lirun.<name>/<version>``, its version in
its ``title``. ``li schema`` lists and prints them; the tests validate every command's
output against them. Reading a schema needs no ``jsonschema``: validating one does.
"""

from __future__ import annotations

import json
import os
from typing import Any

from lirun.errors import NotFoundError

__all__ = ["SchemaNotFoundError", "load_schema", "schema_names"]

_HERE = os.path.dirname(os.path.abspath(__file__))


class SchemaNotFoundError(NotFoundError):
    """No shipped schema has that name; ``li schema`` lists the names there are."""


def _files() -> dict[str, str]:
    """``lirun.<name>/<version>`` → file, for every schema shipped here."""
    found: dict[str, str] = {}
    for entry in sorted(os.listdir(_HERE)):
        if entry.endswith(".json"):
            with open(os.path.join(_HERE, entry), encoding="utf-8") as file:
                found[str(json.load(file)["title"])] = entry
    return found


def schema_names() -> list[str]:
    """Every shipped shape, ``lirun.<name>/<version>``, sorted."""
    return sorted(_files())


def _canonical(name: str) -> tuple[str, str]:
    """``status_row``, ``lirun.status_row`` and ``lirun.status_row/1`` all name one file."""
    base, _, version = name.removeprefix("lirun.").partition("/")
    return base, version


def load_schema(name: str) -> dict[str, Any]:
    """The schema ``name`` names (with or without ``lirun.`` and ``/version``)."""
    base, version = _canonical(name)
    files = _files()
    for full, entry in files.items():
        full_base, _, full_version = full.removeprefix("lirun.").partition("/")
        if full_base == base and version in ("", full_version):
            with open(os.path.join(_HERE, entry), encoding="utf-8") as file:
                loaded: dict[str, Any] = json.load(file)
                return loaded
    raise SchemaNotFoundError(
        f"no schema {name!r}; li schema lists them ({len(files)}: e.g. lirun.run_result/1)"
    )

"""The pieces the dashboard API's JSON Schemas are built from (``api_schemas``,
``api_detail_schemas``): scalar types, references, objects that allow keys they do not
list, and components derived from the schemas shipped for the ``--json`` outputs."""

from __future__ import annotations

import copy
from typing import Any

from lirun.schemas import load_schema

__all__ = [
    "BOOL",
    "INT",
    "NUM",
    "NUM_OR_NULL",
    "OBJ",
    "OBJ_OR_NULL",
    "STR",
    "STR_OR_NULL",
    "Schema",
    "array",
    "extended",
    "obj",
    "ref",
    "shipped",
    "shipped_property",
]

Schema = dict[str, Any]

STR: Schema = {"type": "string"}
STR_OR_NULL: Schema = {"type": ["string", "null"]}
NUM: Schema = {"type": "number"}
NUM_OR_NULL: Schema = {"type": ["number", "null"]}
INT: Schema = {"type": "integer"}
BOOL: Schema = {"type": "boolean"}
OBJ: Schema = {"type": "object"}
OBJ_OR_NULL: Schema = {"type": ["object", "null"]}


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


def obj(required: dict[str, Schema], optional: dict[str, Schema] | None = None) -> Schema:
    """An object with these keys always present (``required``) and these sometimes."""
    return {
        "type": "object",
        "required": sorted(required),
        "properties": {**required, **(optional or {})},
        "additionalProperties": True,
    }


def extended(
    base: str,
    adds: dict[str, Schema],
    description: str,
    sometimes: dict[str, Schema] | None = None,
) -> Schema:
    """Component ``base`` with the keys a view adds to each of its rows (``sometimes``:
    those it adds to some)."""
    return {"description": description, "allOf": [ref(base), obj(adds, sometimes)]}


def shipped(
    name: str,
    *,
    replace: dict[str, Schema] | None = None,
    rename: dict[str, str] | None = None,
) -> Schema:
    """The shipped schema ``lirun.<name>`` without its ``"schema"`` key (the API's answers
    carry none), its ``$schema`` and ``x-`` annotations dropped (the OpenAPI document
    names its dialect once). ``replace``: properties the API types otherwise; ``rename``:
    keys the API names otherwise (``--json`` name → the API's)."""
    loaded = copy.deepcopy(load_schema(name))
    for old, new in (rename or {}).items():
        loaded["properties"][new] = loaded["properties"].pop(old)
        loaded["required"] = [new if k == old else k for k in loaded["required"]]
    title = loaded.pop("title")
    for key in [k for k in loaded if k == "$schema" or k.startswith("x-")]:
        del loaded[key]
    loaded["properties"].pop("schema", None)
    loaded["required"] = [k for k in loaded["required"] if k != "schema"]
    loaded["properties"].update(replace or {})
    loaded["description"] = f"{loaded.get('description', '')} ({title} without its schema key)"
    return loaded


def shipped_property(name: str, key: str) -> Schema:
    """A property's schema inside the shipped schema ``name`` (its items for an array)."""
    found: Schema = copy.deepcopy(load_schema(name)["properties"][key])
    return found

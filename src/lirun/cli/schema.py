"""``li schema [NAME]``: the JSON Schemas of the ``--json`` outputs (docs/json.md)."""

from __future__ import annotations

import json
import sys
from typing import Any

from lirun.cli.common import make_parser
from lirun.schemas import load_schema, schema_names
from lirun.settings import Settings

EXIT_CODES = """\
  0  printed
  2  usage error; no schema has that name"""

DESCRIPTION = """\
Every --json output names its shape and version ("schema": "lirun.run_result/1"). With
no NAME, list the shapes: name, the commands that print it, what it is. With NAME
(run_result, lirun.run_result or lirun.run_result/1), print that JSON Schema (draft
2020-12). A change to a shape that could break a reader bumps its version."""


def build_parser() -> Any:
    parser = make_parser("li schema", DESCRIPTION, EXIT_CODES)
    parser.add_argument("name", metavar="NAME", nargs="?", help="a shape, e.g. run_result")
    return parser


def main(argv: list[str], settings: Settings) -> int:
    args = build_parser().parse_args(argv)
    if args.name:
        sys.stdout.write(json.dumps(load_schema(args.name), indent=2) + "\n")
        return 0
    shapes = [load_schema(name) for name in schema_names()]
    width = max(len(str(s["title"])) for s in shapes)
    for shape in shapes:
        sys.stdout.write(f"{str(shape['title']).ljust(width)}  {shape['x-lirun-output']}\n")
    return 0

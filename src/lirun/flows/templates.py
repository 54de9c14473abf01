"""Leg prompts and arguments as templates, rendered in a sandbox.

A template sees ``vars`` (the flow's variables), ``legs`` (the outputs of the legs it
depends on, directly or transitively: ``legs.plan.reply``, ``legs.plan.artifacts.plan``;
a fan-out leg's outputs are a list in item order) and, in a fan-out leg, ``item``.
Jinja2's ``SandboxedEnvironment`` keeps a template from reaching Python internals;
``StrictUndefined`` makes a missing name an error instead of an empty string.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

__all__ = ["TemplateError", "referenced_legs", "render"]


class TemplateError(ValueError):
    """A template that cannot be parsed or rendered; the message says where and why."""


@functools.cache
def _environment() -> Any:
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    return SandboxedEnvironment(
        undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True
    )


def _parse(text: str) -> Any:
    import jinja2

    try:
        return _environment().parse(text)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(
            f"template syntax error on its line {exc.lineno}: {exc.message}"
        ) from None


def referenced_legs(text: str) -> set[str]:
    """The leg ids ``text`` reads through ``legs.<id>`` or ``legs['<id>']``."""
    from jinja2 import nodes

    found: set[str] = set()
    for node in _parse(text).find_all((nodes.Getattr, nodes.Getitem)):
        target = node.node
        if isinstance(target, nodes.Name) and target.name == "legs":
            if isinstance(node, nodes.Getattr):
                found.add(node.attr)
            elif isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
                found.add(node.arg.value)
    return found


def render(text: str, context: Mapping[str, Any]) -> str:
    """``text`` rendered over ``context``; TemplateError for a syntax error, a missing
    name or an operation the sandbox refuses."""
    import jinja2

    try:
        return str(_environment().from_string(text).render(**context))
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(
            f"template syntax error on its line {exc.lineno}: {exc.message}"
        ) from None
    except (jinja2.UndefinedError, jinja2.exceptions.SecurityError) as exc:
        raise TemplateError(str(exc)) from None

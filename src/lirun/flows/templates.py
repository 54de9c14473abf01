"""Leg prompts and arguments as templates, rendered in a sandbox.

A template sees ``vars`` (the flow's variables), ``legs`` (the outputs of the legs it
depends on, directly or transitively: ``legs.plan.reply``, ``legs.plan.artifacts.plan``;
a fan-out leg's outputs are a list in item order) and, in a fan-out leg, ``item``.
Jinja2's ``SandboxedEnvironment`` keeps a template from reaching Python internals;
``StrictUndefined`` makes a missing name an error instead of an empty string.

``references`` reads what a template uses without rendering it, so a flow file is
checked whole before anything starts: a leg that is not an ancestor, an undeclared
variable, ``item`` outside a fan-out leg, a private attribute.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CONTEXT_NAMES",
    "TemplateError",
    "TemplateRefs",
    "referenced_legs",
    "references",
    "render",
]

# The names a template's context holds; any other free name is an error before start.
CONTEXT_NAMES = frozenset({"vars", "legs", "item"})


class TemplateError(ValueError):
    """A template that cannot be parsed or rendered; the message says where and why."""


@dataclass(frozen=True, slots=True)
class TemplateRefs:
    """What one template reads. ``legs`` / ``vars``: ids and names read as ``legs.ID`` or
    ``legs['ID']`` (likewise ``vars``); ``names``: free top-level names; ``dynamic_legs``:
    ``legs`` read any other way (``legs[x]``, ``legs`` itself), which cannot be checked
    before the flow runs; ``private``: attributes starting with ``_`` (refused)."""

    legs: frozenset[str]
    vars: frozenset[str]
    names: frozenset[str]
    dynamic_legs: bool
    private: frozenset[str]


@functools.cache
def _environment() -> Any:
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    return SandboxedEnvironment(
        undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True
    )


def _syntax_error(exc: Any) -> TemplateError:
    return TemplateError(f"template syntax error on its line {exc.lineno}: {exc.message}")


def _parse(text: str) -> Any:
    import jinja2

    try:
        return _environment().parse(text)
    except jinja2.TemplateSyntaxError as exc:
        raise _syntax_error(exc) from None


def _constant_key(node: Any) -> str | None:
    """``x.key`` or ``x['key']`` → ``key``; any other access → None."""
    from jinja2 import nodes

    if isinstance(node, nodes.Getattr):
        return str(node.attr)
    if isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
        return node.arg.value
    return None


def references(text: str) -> TemplateRefs:
    """What ``text`` reads; TemplateError for a syntax error."""
    import jinja2
    from jinja2 import meta, nodes

    ast = _parse(text)
    read: dict[str, set[str]] = {"legs": set(), "vars": set()}
    resolved: set[int] = set()  # the ``legs`` Name nodes read through a constant key
    private: set[str] = set()
    for node in ast.find_all((nodes.Getattr, nodes.Getitem)):
        key = _constant_key(node)
        if key is not None and key.startswith("_"):
            private.add(key)
        target = node.node
        if isinstance(target, nodes.Name) and target.name in read and key is not None:
            read[target.name].add(key)
            resolved.add(id(target))
    dynamic = any(
        n.name == "legs" and n.ctx == "load" and id(n) not in resolved
        for n in ast.find_all(nodes.Name)
    )
    _check_filters_and_tests(ast)
    try:
        names = meta.find_undeclared_variables(ast)
    except jinja2.TemplateSyntaxError as exc:  # what Jinja2 finds only as it compiles
        raise _syntax_error(exc) from None
    return TemplateRefs(
        legs=frozenset(read["legs"]),
        vars=frozenset(read["vars"]),
        names=frozenset(names),
        dynamic_legs=dynamic,
        private=frozenset(private),
    )


def _check_filters_and_tests(ast: Any) -> None:
    """An unknown filter or test is a TemplateError now (Jinja2 would find a test only
    when the template runs, after the legs before it)."""
    from jinja2 import nodes

    env = _environment()
    for node in ast.find_all((nodes.Filter, nodes.Test)):
        known, what = (
            (env.filters, "filter") if isinstance(node, nodes.Filter) else (env.tests, "test")
        )
        if node.name not in known:
            raise TemplateError(
                f"template error on its line {node.lineno}: no {what} named {node.name!r}"
            )


def referenced_legs(text: str) -> set[str]:
    """The leg ids ``text`` reads through ``legs.<id>`` or ``legs['<id>']``."""
    return set(references(text).legs)


def render(text: str, context: Mapping[str, Any]) -> str:
    """``text`` rendered over ``context``; TemplateError for a syntax error, a missing
    name or an operation the sandbox refuses."""
    import jinja2

    try:
        return str(_environment().from_string(text).render(**context))
    except jinja2.TemplateSyntaxError as exc:
        raise _syntax_error(exc) from None
    except (jinja2.UndefinedError, jinja2.exceptions.SecurityError) as exc:
        raise TemplateError(str(exc)) from None
    except Exception as exc:
        # A filter or operation on the wrong kind of value (``{{ vars.n + 'x' }}``), a
        # test Jinja2 only looks up when it runs, runaway recursion: the template's own
        # fault, so its leg fails, never the flow's engine.
        raise TemplateError(f"{type(exc).__name__}: {exc}") from None

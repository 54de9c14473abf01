"""Leg prompts and arguments as templates, rendered in a sandbox.

A template sees ``vars`` (the flow's variables), ``legs`` (the outputs of the legs it
depends on, directly or transitively: ``legs.plan.reply``, ``legs.plan.artifacts.plan``;
a fan-out leg's outputs are a list in item order) and, in a fan-out leg, ``item``.
Jinja2's ``SandboxedEnvironment`` keeps a template from reaching Python internals;
``StrictUndefined`` makes a missing name an error instead of an empty string.

``references`` reads what a template uses without rendering it, so a flow file is
checked whole before anything starts: a leg that is not an ancestor, an undeclared
variable, ``item`` outside a fan-out leg, a private attribute, a template nested or
chained too deep to parse (``template_limits``). ``render`` is bounded in time and
output, each operation that could build far more than its inputs is measured before it
builds (``template_sizes``), and it ends early, with ``RenderStopped``, when its
``should_stop`` says so.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jinja2
from jinja2 import StrictUndefined, meta, nodes
from jinja2.compiler import CodeGenerator
from jinja2.sandbox import SandboxedEnvironment

from lirun.flows.template_limits import (
    MAX_CHAIN,
    MAX_OUTPUT_CHARS,
    RENDER_SECONDS,
    Guard,
    RenderInterrupted,
    ShapeError,
    Sink,
    check_shape,
)
from lirun.flows.template_sizes import (
    BOUNDED_FILTERS,
    TooLarge,
    bounded_binop,
    bounded_method,
    concat,
    text_size,
)

__all__ = [
    "CONTEXT_NAMES",
    "RenderStopped",
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


class RenderStopped(Exception):
    """A render ended early because its ``should_stop`` said so (a signal came)."""


_TOO_DEEP = "template error: nested too deeply for the template engine; flatten it"


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


class _BoundedGenerator(CodeGenerator):
    """Compiles ``a ~ b`` to ``template_sizes.concat``, which measures before it joins
    (autoescape is off, so Jinja2 would always use its plain join there)."""

    def visit_Concat(self, node: nodes.Concat, frame: Any) -> None:
        self.write("environment.bounded_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


def _finalize(value: Any) -> Any:
    """A value printed whole: a list or mapping is measured before ``str()`` makes its
    text (a list of one long text 100,000 times is short as a list)."""
    if isinstance(value, str | int | float) or value is None:
        return value  # its text is as long as it is (numbers: at most 10,000 digits)
    size = text_size(value)
    if size > MAX_OUTPUT_CHARS:
        raise TooLarge("printing this value", size)
    return value


@functools.cache
def _environment() -> Any:
    class BoundedEnvironment(SandboxedEnvironment):
        """The sandbox, with every operation that can build far more than it is given
        measured first (``template_sizes``)."""

        code_generator_class = _BoundedGenerator
        intercepted_binops = frozenset({"*", "**", "+", "%"})
        bounded_concat = staticmethod(concat)

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            return bounded_binop(operator, left, right)

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
            args = bounded_method(__obj, args, kwargs)
            return super().call(__context, __obj, *args, **kwargs)

        def wrap_str_format(self, value: Any) -> Any:
            wrapped = super().wrap_str_format(value)
            if wrapped is None:
                return None

            def measured(*args: Any, **kwargs: Any) -> Any:
                bounded_method(value, args, kwargs)
                return wrapped(*args, **kwargs)

            return measured

    env = BoundedEnvironment(
        undefined=StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        finalize=_finalize,
    )
    env.filters.update(BOUNDED_FILTERS)
    return env


@functools.lru_cache(maxsize=256)
def _compiled(text: str) -> Any:
    """``text`` checked and compiled once: a fan-out renders one template per item."""
    check_shape(_environment(), text)
    return _environment().from_string(text)


def _syntax_error(exc: Any) -> TemplateError:
    return TemplateError(f"template syntax error on its line {exc.lineno}: {exc.message}")


def _parse(text: str) -> Any:
    try:
        check_shape(_environment(), text)
        return _environment().parse(text)
    except jinja2.TemplateSyntaxError as exc:
        raise _syntax_error(exc) from None
    except ShapeError as exc:
        raise TemplateError(str(exc)) from None
    except RecursionError:
        raise TemplateError(_TOO_DEEP) from None


def _constant_key(node: Any) -> str | None:
    """``x.key`` or ``x['key']`` → ``key``; any other access → None."""

    if isinstance(node, nodes.Getattr):
        return str(node.attr)
    if isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
        return node.arg.value
    return None


_NO_REFS = TemplateRefs(frozenset(), frozenset(), frozenset(), False, frozenset())
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_STEP = rf"\.{_NAME}|\[\s*'[^'\\\n]*'\s*\]|\[\s*\"[^\"\\\n]*\"\s*\]"
# ``{{ legs.plan.reply }}``, ``{{ vars['x'] }}``, ``{{ item }}``: most tags of most flow
# files, read without Jinja2's parser and compiler (a thousandfold faster on a long flow).
_SIMPLE_TAG = re.compile(rf"{{{{-?\s*({_NAME})((?:\s*(?:{_STEP}))*)\s*-?}}}}")
_JINJA_WORDS = frozenset(
    {"true", "false", "none", "True", "False", "None", "and", "or", "not", "in", "is", "if"}
    | {"else", "for", "endfor", "endif", "set", "block", "loop"}
)
_STEP_KEY = re.compile(rf"\.({_NAME})|\[\s*'([^']*)'\s*\]|\[\s*\"([^\"]*)\"\s*\]")


def _simple_references(text: str) -> TemplateRefs | None:
    """The references of a template whose every tag is a name with constant keys, or
    None when it holds anything else (it is then parsed)."""
    if "{" not in text:
        return _NO_REFS
    tags = list(_SIMPLE_TAG.finditer(text))
    rest = _SIMPLE_TAG.sub("", text)
    if "{{" in rest or "{%" in rest or "{#" in rest:
        return None
    read: dict[str, set[str]] = {"legs": set(), "vars": set()}
    names: set[str] = set()
    private: set[str] = set()
    dynamic = False
    for tag in tags:
        name = tag.group(1)
        keys = [next(k for k in m.groups() if k is not None) for m in _STEP_KEY.finditer(tag[2])]
        if len(keys) > MAX_CHAIN:
            return None  # the parser's path refuses it with its line
        names.add(name)
        private.update(k for k in keys if k.startswith("_"))
        if name in read and keys:
            read[name].add(keys[0])
        dynamic = dynamic or (name == "legs" and not keys)
    if names & (_JINJA_WORDS | set(_environment().globals)):
        return None  # a constant (true), a keyword or a global (range): let Jinja2 decide
    return TemplateRefs(
        legs=frozenset(read["legs"]),
        vars=frozenset(read["vars"]),
        names=frozenset(names),
        dynamic_legs=dynamic,
        private=frozenset(private),
    )


@functools.lru_cache(maxsize=1024)
def references(text: str) -> TemplateRefs:
    """What ``text`` reads; TemplateError for a syntax error or a template too deep."""
    simple = _simple_references(text)
    if simple is not None:
        return simple
    ast = _parse(text)
    try:
        return _references(ast)
    except RecursionError:  # find_all walks the tree recursively
        raise TemplateError(_TOO_DEEP) from None


def _references(ast: Any) -> TemplateRefs:
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


def render(
    text: str,
    context: Mapping[str, Any],
    *,
    should_stop: Callable[[], bool] | None = None,
    seconds: float = RENDER_SECONDS,
    limit: int = MAX_OUTPUT_CHARS,
) -> str:
    """``text`` rendered over ``context``; TemplateError for a syntax error, a missing
    name, an operation the sandbox refuses, a template too deep, a render longer than
    ``seconds`` or an output over ``limit`` characters; RenderStopped as soon as
    ``should_stop()`` is true (looked at throughout the render)."""

    sink = Sink(limit)
    try:
        compiled = _compiled(text)
        with Guard(should_stop, seconds):
            for piece in compiled.generate(**context):
                sink.add(piece)
        return sink.text()
    except RenderInterrupted as exc:
        if exc.reason == "stopped":
            raise RenderStopped("rendering stopped: a signal came") from None
        if exc.reason == "time":
            raise TemplateError(
                f"template error: rendering took longer than {seconds:g}s; "
                "a template must not loop that long"
            ) from None
        raise TemplateError(
            f"template error: its output passed {limit:,} characters; "
            "a template must not write that much"
        ) from None
    except (ShapeError, TooLarge) as exc:
        raise TemplateError(str(exc)) from None
    except RecursionError:  # a macro that calls itself, or nesting the shape check let by
        raise TemplateError(
            "template error: RecursionError: it recurses or nests too deeply"
        ) from None
    except jinja2.TemplateSyntaxError as exc:
        raise _syntax_error(exc) from None
    except (jinja2.UndefinedError, jinja2.exceptions.SecurityError) as exc:
        raise TemplateError(str(exc)) from None
    except Exception as exc:
        # A filter or operation on the wrong kind of value (``{{ vars.n + 'x' }}``), a
        # test Jinja2 only looks up when it runs, a value too large to build: the
        # template's own fault, so its leg fails, never the flow's engine.
        raise TemplateError(f"{type(exc).__name__}: {exc}") from None

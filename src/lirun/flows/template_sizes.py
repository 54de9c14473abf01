"""What a template may build, measured before it is built.

The output of a render is bounded (``template_limits.Sink``, MAX_OUTPUT_CHARS), but only
piece by piece, after each piece exists: ``'x'|center(1000000000)`` allocated a gigabyte
(and ``str()`` of it another) before the bound saw it, ``range(99999)|join(sep)`` with a
long separator ran out of memory. So every operation that can make text or a list much
larger than its inputs projects the size of its result first and refuses past
MAX_OUTPUT_CHARS with ``TooLarge``: the filters ``center``, ``indent``, ``replace``,
``format``, ``join``, ``wordwrap`` and ``batch``; the operators ``*``, ``+``, ``%`` and
``~``; the string methods that pad, replace, join or format; a list's ``extend``; and a
list or mapping printed whole (``text_size``: about the length of its text, counted no
further than the bound).
"""

from __future__ import annotations

import re
import string
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from jinja2 import filters, pass_environment, pass_eval_context

from lirun.flows.template_limits import MAX_OUTPUT_CHARS

__all__ = ["BOUNDED_FILTERS", "TooLarge", "bounded_binop", "bounded_method", "text_size"]

LIMIT = MAX_OUTPUT_CHARS


class TooLarge(ValueError):
    """An operation whose result would pass the bound; the message says which, how large,
    and the template's line when the render is inside one."""

    def __init__(self, what: str, size: int) -> None:
        line = _template_line()
        where = f"on its line {line}: " if line else ""
        super().__init__(
            f"template error {where}{what} would make about {size:,} characters, over the "
            f"{LIMIT:,}-character bound of a template"
        )


def _template_line() -> int | None:
    """The template line being rendered: Jinja2 keeps the compiled template in its
    module's globals and maps the Python line back to the template's."""
    frame = sys._getframe(2)
    while frame is not None:
        template = frame.f_globals.get("__jinja_template__")
        if template is not None:
            return int(template.get_corresponding_lineno(frame.f_lineno))
        frame = frame.f_back  # type: ignore[assignment]
    return None


def text_size(value: Any, budget: int = LIMIT) -> int:
    """About ``len(str(value))``, counted no further than just past ``budget``: a list
    of the same long text 100,000 times costs two steps, not 100,000."""
    total = 0
    stack = [value]
    while stack and total <= budget:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item) + 2  # its quotes, inside a list
        elif isinstance(item, bytes | bytearray):
            total += 4 * len(item) + 3  # \xNN each, at worst
        elif isinstance(item, Mapping):
            total += 2 + 4 * len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            total += 2 + 2 * len(item)
            stack.extend(item)
        elif item is None or isinstance(item, int | float):
            total += len(repr(item))  # short: ``**`` keeps numbers to 10,000 digits
        else:
            total += 24  # an object of Jinja2's (a namespace, a cycler): its name
    return total


def _check(what: str, size: int) -> None:
    if size > LIMIT:
        raise TooLarge(what, size)


def _width(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# --- filters -----------------------------------------------------------------------------------


def center(value: Any, width: int = 80) -> str:
    text = str(value)
    _check(f"center({width})", max(len(text), _width(width)))
    return filters.do_center(text, width)


def indent(s: Any, width: int | str = 4, first: bool = False, blank: bool = False) -> str:
    text = str(s)
    pad = len(width) if isinstance(width, str) else _width(width)
    _check(f"indent({width!r:.40})", len(text) + (text.count("\n") + 1) * pad)
    return filters.do_indent(text, width, first, blank)


def _replaced_size(text: str, old: str, new: str, count: int | None) -> int:
    times = text.count(old) if old else len(text) + 1
    if count is not None and count >= 0:
        times = min(times, count)
    return len(text) + times * (len(new) - len(old))


@pass_eval_context
def replace(eval_ctx: Any, s: Any, old: Any, new: Any, count: int | None = None) -> str:
    text, old_text, new_text = str(s), str(old), str(new)
    _check("replace", _replaced_size(text, old_text, new_text, count))
    return filters.do_replace(eval_ctx, s, old, new, count)


def _percent_size(template: str, args: Any) -> int:
    """About the length of ``template % args``: its text, each conversion as long as
    the longest argument, plus every width and precision it asks for."""
    values = list(args.values()) if isinstance(args, Mapping) else args
    values = values if isinstance(values, tuple | list) else [values]
    longest = max((text_size(v) for v in values), default=0)
    size = len(template)
    for match in _PERCENT.finditer(template):
        size += longest
        for number in match.groups():
            if number == "*":
                size += max((_width(v) for v in values), default=0)
            elif number:
                size += int(number) if len(number) < 12 else LIMIT + 1
    return size


_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?")


def percent(template: str, args: Any) -> str:
    """``template % args``, bounded."""
    _check("% formatting", _percent_size(template, args))
    return template % args


def format_filter(value: Any, *args: Any, **kwargs: Any) -> str:
    if args and kwargs:
        return filters.do_format(value, *args, **kwargs)  # Jinja2's own error
    return percent(str(value), kwargs or args)


@pass_eval_context
def join(eval_ctx: Any, value: Iterable[Any], d: Any = "", attribute: Any = None) -> str:
    items = list(value)
    if attribute is not None:
        items = list(map(filters.make_attrgetter(eval_ctx.environment, attribute), items))
    size = len(str(d)) * max(len(items) - 1, 0)
    for item in items:
        size += len(item) if isinstance(item, str) else text_size(item)
        _check("join", size)
    return filters.do_join(eval_ctx, items, d)


@pass_environment
def wordwrap(
    environment: Any,
    s: Any,
    width: int = 79,
    break_long_words: bool = True,
    wrapstring: str | None = None,
    break_on_hyphens: bool = True,
) -> str:
    text = str(s)
    joint = len(wrapstring) if wrapstring is not None else len(environment.newline_sequence)
    lines = len(text) // max(_width(width), 1) + text.count("\n") + 1
    _check("wordwrap", len(text) + lines * joint)
    return filters.do_wordwrap(
        environment, s, width, break_long_words, wrapstring, break_on_hyphens
    )


def batch(value: Iterable[Any], linecount: int, fill_with: Any = None) -> Any:
    _check(f"batch({linecount})", _width(linecount))
    return filters.do_batch(value, linecount, fill_with)


BOUNDED_FILTERS: dict[str, Callable[..., Any]] = {
    "center": center,
    "indent": indent,
    "replace": replace,
    "format": format_filter,
    "join": join,
    "wordwrap": wordwrap,
    "batch": batch,
}


# --- operators and methods ---------------------------------------------------------------------


def bounded_binop(operator: str, left: Any, right: Any) -> Any:
    """``left`` ``operator`` ``right`` for ``*``, ``**``, ``+`` and ``%``, refused when
    the result would be text or a sequence past the bound, or a number of more than
    10,000 digits; the sandbox routes these operators here."""
    if operator == "*":
        for seq, count in ((left, right), (right, left)):
            if isinstance(seq, str | bytes | list | tuple) and isinstance(count, int):
                each = len(seq) if isinstance(seq, str | bytes) else text_size(seq)
                _check(f"repeating a value {count} times", each * max(count, 0))
        return left * right
    if operator == "+":
        if isinstance(left, str | bytes | list | tuple):
            _check("+", text_size(left) + text_size(right))
        return left + right
    if operator == "%":
        return percent(left, right) if isinstance(left, str) else left % right
    if operator == "**":
        whole = isinstance(left, int) and isinstance(right, int) and abs(left) > 1
        if whole and right * abs(left).bit_length() > 33_000:  # ~10,000 decimal digits
            raise ValueError(f"{left} ** {right} is too large a number for a template")
        return left**right
    raise ValueError(f"operator {operator!r} is not bounded here")


def concat(parts: Iterable[Any]) -> str:
    """``a ~ b ~ ...``, bounded (Jinja2's own is ``"".join(map(str, parts))``)."""
    values = list(parts)
    _check("~", sum(len(v) if isinstance(v, str) else text_size(v) for v in values))
    return "".join(map(str, values))


def _format_size(template: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> int:
    values = [*args, *kwargs.values()]
    longest = max((text_size(v) for v in values), default=0)
    size = len(template)
    for _, field, spec, _ in string.Formatter().parse(template):
        if field is None:
            continue
        size += longest
        if spec and "{" in spec:  # a width given by an argument
            size += max((_width(v) for v in values), default=0)
        size += sum(int(n) if len(n) < 12 else LIMIT + 1 for n in re.findall(r"\d+", spec or ""))
    return size


def _padded(method: str, text: str, args: tuple[Any, ...]) -> int | None:
    if method in ("center", "ljust", "rjust", "zfill") and args:
        return max(len(text), _width(args[0]))
    if method == "expandtabs":
        return len(text) + text.count("\t") * _width(args[0] if args else 8)
    return None


def bounded_method(obj: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[Any, ...]:
    """The arguments to call ``obj`` (a bound method) with: ``args``, or for ``str.join``
    its items as a list (measured, so a generator is not used up); TooLarge when the call
    would build text or a list past the bound."""
    owner, method = getattr(obj, "__self__", None), getattr(obj, "__name__", "")
    if isinstance(owner, str):
        padded = _padded(method, owner, args)
        if padded is not None:
            _check(f"{method}()", padded)
        elif method == "replace" and len(args) >= 2:
            count = args[2] if len(args) > 2 else kwargs.get("count")
            _check("replace()", _replaced_size(owner, str(args[0]), str(args[1]), count))
        elif method == "join" and len(args) == 1:
            items = list(args[0])
            _check("join()", len(owner) * max(len(items) - 1, 0) + text_size(items))
            return (items,)
        elif method in ("format", "format_map"):
            values = kwargs if method == "format" else (args[0] if args else {})
            positional = args if method == "format" else ()
            mapping = values if isinstance(values, Mapping) else {}
            _check(f"{method}()", _format_size(owner, positional, mapping))
    elif isinstance(owner, list) and method == "extend" and args:
        _check("extend()", text_size(owner) + text_size(args[0]))
    return args

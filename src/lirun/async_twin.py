"""The async face of a synchronous core: one typed wrapper, so each signature is declared once.

The public API is async (``StateDB``, ``setup_persist``, ``teardown_persist``); the work
is synchronous (``Store``, ``setup_persist_sync``…) and is what the CLI calls. Each async
twin runs its sync call with ``asyncio.to_thread`` (the loop's default executor), so a
busy lock or a slow server never blocks the event loop, and keeps the call's signature
(ParamSpec) and docstring.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine

from lirun.hints import Any, Concatenate, ParamSpec, Protocol, TypeVar

P = ParamSpec("P")
T = TypeVar("T")
Core = TypeVar("Core")
Core_co = TypeVar("Core_co", covariant=True)
R = TypeVar("R", bound="AsDict")

__all__ = [
    "AsDict",
    "HasCore",
    "async_dict_row",
    "async_dict_rows",
    "async_method",
    "async_twin",
    "to_thread",
]


async def to_thread(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` in a worker thread: the one hop every async twin takes."""
    # Imported here: `import lirun` is on `li wait`'s start-up path, which never awaits.
    import asyncio

    return await asyncio.to_thread(fn, *args, **kwargs)


def _twin_doc(name: str, doc: str | None) -> str:
    return f"Async ``{name}`` (never blocks the event loop).\n\n{doc or ''}".rstrip()


def async_twin(fn: Callable[P, T], name: str) -> Callable[P, Coroutine[Any, Any, T]]:
    """``name``: an ``async def`` with ``fn``'s signature that runs ``fn`` in a worker thread."""

    @functools.wraps(fn)
    async def twin(*args: P.args, **kwargs: P.kwargs) -> T:
        return await to_thread(fn, *args, **kwargs)

    twin.__doc__ = _twin_doc(fn.__qualname__, fn.__doc__)
    twin.__name__ = twin.__qualname__ = name
    return twin


class AsDict(Protocol):
    """A typed row that gives itself as a plain dict."""

    def as_dict(self) -> dict[str, Any]: ...


class HasCore(Protocol[Core_co]):
    """An async facade: ``sync`` is (opening it on first use) the synchronous core."""

    @property
    def sync(self) -> Core_co: ...


def _owner(part: str | None) -> Callable[[HasCore[Any]], Any]:
    """What a facade's method is called on: the core, or its repository ``part``."""
    if part is None:
        return lambda facade: facade.sync
    return lambda facade: getattr(facade.sync, part)


def async_method(
    method: Callable[Concatenate[Core, P], T], part: str | None = None
) -> Callable[Concatenate[HasCore[Any], P], Coroutine[Any, Any, T]]:
    """The async method of a facade, from a method of the sync core, or of the core's
    repository ``part`` (``async_method(Teams.resolve, "teams")``).

    ``StateDB.update_status = async_method(Store.update_status)``: the parameters are
    declared once, on the core, and mypy sees them on the facade too. The core is opened
    (if it is not yet) in the same worker thread as the call.
    """
    owner = _owner(part)

    @functools.wraps(method)
    async def call(self: HasCore[Any], /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await to_thread(lambda: method(owner(self), *args, **kwargs))

    call.__doc__ = _twin_doc(method.__qualname__, method.__doc__)
    return call


def async_dict_rows(
    method: Callable[Concatenate[Core, P], list[R]], part: str | None = None
) -> Callable[Concatenate[HasCore[Any], P], Coroutine[Any, Any, list[dict[str, Any]]]]:
    """As ``async_method``, for a core method that returns typed rows: the async face
    gives each as the plain dict its ``as_dict()`` makes, so the public contract stays
    dicts while the core's rows are typed."""
    return _dict_twin(
        method, part, lambda rows: [row.as_dict() for row in rows], "list[dict[str, Any]]"
    )


def async_dict_of(
    method: Callable[Concatenate[Core, P], R], part: str | None = None
) -> Callable[Concatenate[HasCore[Any], P], Coroutine[Any, Any, dict[str, Any]]]:
    """As ``async_dict_rows``, for a core method that always returns one typed row (a
    ``create_*`` returns the row it wrote)."""
    return _dict_twin(method, part, lambda row: row.as_dict(), "dict[str, Any]")


def async_dict_row(
    method: Callable[Concatenate[Core, P], R | None], part: str | None = None
) -> Callable[Concatenate[HasCore[Any], P], Coroutine[Any, Any, dict[str, Any] | None]]:
    """As ``async_dict_rows``, for a core method that returns one typed row or None."""
    return _dict_twin(
        method, part, lambda row: None if row is None else row.as_dict(), "dict[str, Any] | None"
    )


def _dict_twin(
    method: Callable[..., Any], part: str | None, convert: Callable[[Any], Any], returns: str
) -> Callable[..., Any]:
    owner = _owner(part)

    async def call(self: HasCore[Any], /, *args: Any, **kwargs: Any) -> Any:
        return convert(await to_thread(lambda: method(owner(self), *args, **kwargs)))

    call.__name__, call.__qualname__ = method.__name__, method.__qualname__
    call.__doc__ = _twin_doc(method.__qualname__, method.__doc__) + _DICT_ROWS
    call.__wrapped__ = _DictRowsSignature(method, returns)  # type: ignore[attr-defined]
    return call


_DICT_ROWS = "\n\nEach row is a plain dict (the row's ``as_dict()``)."


class _DictRowsSignature:
    """Shows ``inspect`` (``help``) the core method's parameters returning dicts.

    Built on demand: importing ``inspect`` at start-up would cost ``li wait`` milliseconds.
    """

    def __init__(self, method: Callable[..., Any], returns: str) -> None:
        self._method = method
        self._returns = returns

    @property
    def __signature__(self) -> Any:
        import inspect

        return inspect.signature(self._method).replace(return_annotation=self._returns)

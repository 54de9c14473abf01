"""Typing names for annotations, without importing ``typing`` at run time.

``typing`` pulls in ``re`` and ``enum``: several milliseconds that `li wait` pays on
every start (bench/bench_startup.py holds the budget). Type checkers see the real names;
at run time annotations are strings (``from __future__ import annotations``), so stand-ins
do: ``Any`` is ``object``, ``Protocol`` a plain base class, and ``NamedTuple`` builds a
``collections.namedtuple`` (the same runtime type ``typing.NamedTuple`` makes).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO as IO
    from typing import Any as Any
    from typing import ClassVar as ClassVar
    from typing import Concatenate as Concatenate
    from typing import Literal as Literal
    from typing import NamedTuple as NamedTuple
    from typing import NotRequired as NotRequired
    from typing import ParamSpec as ParamSpec
    from typing import Protocol as Protocol
    from typing import TypedDict as TypedDict
    from typing import TypeVar as TypeVar
else:
    import collections

    Any = object

    class Protocol:
        """Run-time stand-in: protocols here are only read by the type checker."""

        __slots__ = ()

        def __class_getitem__(cls, item: object) -> type:
            return cls

    class _Subscriptable:
        def __class_getitem__(cls, item: object) -> object:
            return object

    Literal = _Subscriptable

    def TypeVar(name: str, *constraints: object, **options: object) -> object:
        return object

    ParamSpec = TypeVar
    Concatenate = _Subscriptable

    _NOT_COPIED = frozenset({"__annotations__", "__module__", "__qualname__", "__dict__"})

    class _NamedTupleMeta(type):
        def __new__(mcs, name: str, bases: tuple[type, ...], ns: dict[str, object]) -> type:
            if not bases:
                return super().__new__(mcs, name, bases, ns)
            fields = list(ns.get("__annotations__", {}))
            missing = [f for f in fields if f not in ns]
            defaults = [ns[f] for f in fields if f in ns]
            if missing and fields.index(missing[-1]) > len(missing) - 1:
                raise TypeError(f"{name}: a field without a default follows one with a default")
            cls = collections.namedtuple(
                name, fields, defaults=defaults or None, module=ns.get("__module__")
            )
            for key, value in ns.items():
                if key not in _NOT_COPIED and key not in fields:
                    setattr(cls, key, value)
            return cls

    class NamedTuple(metaclass=_NamedTupleMeta):
        """Run-time stand-in for ``typing.NamedTuple`` (class syntax only)."""

    IO = ClassVar = NotRequired = _Subscriptable

    class _TypedDictMeta(type):
        def __new__(
            mcs, name: str, bases: tuple[type, ...], ns: dict[str, object], **options: object
        ) -> type:
            return super().__new__(mcs, name, bases, ns)  # ``total=`` is for the checker

        def __call__(cls, *args: object, **kwargs: object) -> dict[object, object]:
            return dict(*args, **kwargs)  # type: ignore[arg-type]

    class TypedDict(metaclass=_TypedDictMeta):
        """Run-time stand-in for ``typing.TypedDict`` (class syntax only): calling a
        subclass makes a plain ``dict``, as ``typing``'s does."""


__all__ = [
    "IO",
    "Any",
    "ClassVar",
    "Literal",
    "NamedTuple",
    "NotRequired",
    "Protocol",
    "TypeVar",
    "TypedDict",
]

"""The base of the store's rows (see ``lirun.store.rows``): a row class names its columns
once, as the annotated fields of a ``TypedRow`` subclass, and gets from them its immutable
shape, ``from_row`` and ``as_dict``.

``_TypedRowMeta`` makes each subclass a ``collections.namedtuple`` of its fields with
``TypedRow`` among its bases, as ``hints.NamedTuple`` makes one, because ``li wait``
imports the rows at start-up, where ``typing`` and ``dataclasses`` are not. Type checkers
read a subclass as a frozen dataclass (``dataclass_transform``); the namedtuple methods
the store and its callers use (``_fields``, ``_make``, ``_replace``, ``_asdict``) are
declared for them here. (``connector.Row`` is the other thing: a query's raw mapping.)
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping

from lirun.hints import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar, Self, dataclass_transform
else:

    def dataclass_transform(**options: object) -> object:
        """Run-time stand-in for ``typing.dataclass_transform``: only checkers read it."""
        return lambda cls: cls


__all__ = ["TypedRow"]

# Names of the class body that are the namespace's own, not the row's (as hints.NamedTuple).
_NOT_COPIED = frozenset({"__annotations__", "__dict__", "__weakref__"})


class _TypedRowMeta(type):
    """Makes each ``TypedRow`` subclass a namedtuple of its annotated fields (defaults allowed
    on the last ones), keeping the class body's methods and docstring."""

    def __new__(mcs, name: str, bases: tuple[type, ...], ns: dict[str, Any]) -> _TypedRowMeta:
        if not any(isinstance(base, _TypedRowMeta) for base in bases):
            return super().__new__(mcs, name, bases, ns)  # TypedRow itself
        fields = list(ns.get("__annotations__", {}))
        defaults = [ns[f] for f in fields if f in ns]
        if any(f in ns for f in fields[: len(fields) - len(defaults)]):
            raise TypeError(f"{name}: a field without a default follows one with a default")
        module = ns.get("__module__")
        # The fields are known only at run time (checkers read the class body instead).
        shape = collections.namedtuple(name, fields, defaults=defaults, module=module)  # type: ignore[misc]
        body = {k: v for k, v in ns.items() if k not in _NOT_COPIED and k not in fields}
        body["__slots__"] = ()  # no instance dict: as immutable and small as a tuple
        return super().__new__(mcs, name, (shape, *bases), body)


@dataclass_transform(frozen_default=True)
class TypedRow(metaclass=_TypedRowMeta):
    """One row the store returns, built from the mapping its query returns: callers above
    the store read attributes (``worker.heartbeat_at``), never a row dict's keys."""

    __slots__ = ()

    if TYPE_CHECKING:
        _fields: ClassVar[tuple[str, ...]]
        _field_defaults: ClassVar[dict[str, Any]]

        @classmethod
        def _make(cls, values: Iterable[Any]) -> Self: ...

        def _replace(self, **changes: Any) -> Self: ...

        def _asdict(self) -> dict[str, Any]: ...

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Self:
        """The row of one query row (decoded by ``records.decode_row`` where the table
        has JSON columns): each field its column's value, as it comes; other columns are
        ignored, a missing one is a ``KeyError``."""
        return cls._make([row[name] for name in cls._fields])

    def as_dict(self) -> dict[str, Any]:
        """The row as a plain dict, as the JSON outputs and ``StateDB`` give it."""
        return self._asdict()

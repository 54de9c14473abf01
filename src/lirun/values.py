"""Value classes for the start-up path: ``dataclass`` without generating code at import.

``dataclasses`` writes each class's ``__init__``, ``__repr__``, ``__eq__`` … as source and
compiles it with ``exec`` when the class is defined: about half a millisecond per class,
plus ``inspect`` and ``ast`` to import. `li run` defines some thirty such classes before
its child starts, which was a fifth of its start-up budget (bench/bench_startup.py).

Type checkers see the real ``dataclasses`` (``TYPE_CHECKING``), so every use is checked
as a dataclass. At run time ``dataclass`` builds the same methods from closures over the
field list. It supports the part of ``dataclasses`` this package uses, and refuses the
rest loudly: keyword ``frozen``, ``slots``, ``eq`` (default), defaults and
``field(default_factory=...)``, ``__post_init__``, ``ClassVar`` annotations, inheritance
from another value class; ``replace``, ``fields``, ``asdict`` and ``is_dataclass``.
tests/test_values.py holds it to ``dataclasses``' behaviour for those.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from dataclasses import FrozenInstanceError as FrozenInstanceError
    from dataclasses import asdict as asdict
    from dataclasses import dataclass as dataclass
    from dataclasses import field as field
    from dataclasses import fields as fields
    from dataclasses import is_dataclass as is_dataclass
    from dataclasses import replace as replace
else:
    _MISSING = object()
    _FIELDS = "__value_fields__"
    _SUPPORTED = frozenset({"frozen", "slots", "eq"})

    class FrozenInstanceError(AttributeError):
        """Assignment to a field of a frozen value (as ``dataclasses`` raises it)."""

    class Field:
        __slots__ = ("default", "default_factory", "name")

        def __init__(self, default=_MISSING, default_factory=_MISSING):
            self.name = ""
            self.default = default
            self.default_factory = default_factory

        def __repr__(self):
            return f"Field(name={self.name!r})"

    def field(*, default=_MISSING, default_factory=_MISSING):
        if default is not _MISSING and default_factory is not _MISSING:
            raise ValueError("cannot specify both default and default_factory")
        return Field(default, default_factory)

    def _own_fields(cls):
        found = []
        # Not inspect.get_annotations: importing inspect is what this module avoids.
        for name, annotation in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063
            text = annotation if isinstance(annotation, str) else repr(annotation)
            if text.startswith(("ClassVar", "typing.ClassVar")):
                continue
            value = cls.__dict__.get(name, _MISSING)
            spec = value if isinstance(value, Field) else Field(default=value)
            spec.name = name
            found.append(spec)
        return found

    def _all_fields(cls):
        merged = {}
        for base in reversed(cls.__mro__[1:]):
            for spec in base.__dict__.get(_FIELDS, ()):
                merged[spec.name] = spec
        for spec in _own_fields(cls):
            merged[spec.name] = spec
        specs = tuple(merged.values())
        seen_default = False
        for spec in specs:
            has_default = spec.default is not _MISSING or spec.default_factory is not _MISSING
            if seen_default and not has_default:
                raise TypeError(f"non-default argument {spec.name!r} follows default argument")
            seen_default = seen_default or has_default
        return specs

    def _make_init(cls_name, specs, frozen):
        names = tuple(spec.name for spec in specs)
        count = len(names)
        setter = object.__setattr__

        def __init__(self, *args, **kwargs):
            if len(args) > count:
                raise TypeError(
                    f"{cls_name}.__init__() takes {count + 1} positional arguments "
                    f"but {len(args) + 1} were given"
                )
            for name, value in zip(names, args, strict=False):
                if name in kwargs:
                    raise TypeError(
                        f"{cls_name}.__init__() got multiple values for argument {name!r}"
                    )
                kwargs[name] = value
            for spec in specs:
                name = spec.name
                if name in kwargs:
                    value = kwargs.pop(name)
                elif spec.default_factory is not _MISSING:
                    value = spec.default_factory()
                elif spec.default is not _MISSING:
                    value = spec.default
                else:
                    raise TypeError(
                        f"{cls_name}.__init__() missing 1 required positional argument: {name!r}"
                    )
                setter(self, name, value)
            if kwargs:
                raise TypeError(
                    f"{cls_name}.__init__() got an unexpected keyword argument "
                    f"{next(iter(kwargs))!r}"
                )
            post_init = getattr(self, "__post_init__", None)
            if post_init is not None:
                post_init()

        return __init__

    def _values(self):
        return tuple(getattr(self, spec.name) for spec in getattr(self, _FIELDS))

    def _repr(self):
        inner = ", ".join(f"{s.name}={getattr(self, s.name)!r}" for s in getattr(self, _FIELDS))
        return f"{type(self).__qualname__}({inner})"

    def _eq(self, other):
        if other.__class__ is self.__class__:
            return _values(self) == _values(other)
        return NotImplemented

    def _hash(self):
        return hash(_values(self))

    def _frozen_setattr(self, name, value):
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def _frozen_delattr(self, name):
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def _methods(cls, specs, frozen, eq):
        methods = {
            _FIELDS: specs,
            "__init__": _make_init(cls.__name__, specs, frozen),
            "__match_args__": tuple(spec.name for spec in specs),
        }
        methods["__init__"].__qualname__ = f"{cls.__qualname__}.__init__"
        if "__repr__" not in cls.__dict__:
            methods["__repr__"] = _repr
        if eq:
            if "__eq__" not in cls.__dict__:
                methods["__eq__"] = _eq
            if frozen:
                methods["__hash__"] = _hash
            elif cls.__dict__.get("__hash__") is None:
                methods["__hash__"] = None  # mutable and comparable: unhashable
        if frozen:
            methods["__setattr__"] = _frozen_setattr
            methods["__delattr__"] = _frozen_delattr
        return methods

    def _process(cls, frozen, slots, eq):
        specs = _all_fields(cls)
        own = [spec.name for spec in _own_fields(cls)]
        methods = _methods(cls, specs, frozen, eq)
        if not slots:
            for name in own:  # a factory field keeps no class attribute, a default does
                if isinstance(cls.__dict__.get(name), Field):
                    spec = next(s for s in specs if s.name == name)
                    if spec.default is _MISSING:
                        delattr(cls, name)
                    else:
                        setattr(cls, name, spec.default)
            for key, value in methods.items():
                setattr(cls, key, value)
            return cls
        ns = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__")}
        for name in own:  # a slot and a class attribute cannot share a name
            ns.pop(name, None)
        inherited = {s.name for b in cls.__mro__[1:] for s in b.__dict__.get(_FIELDS, ())}
        ns["__slots__"] = tuple(name for name in own if name not in inherited)
        ns.update(methods)
        new = type(cls)(cls.__name__, cls.__bases__, ns)
        new.__qualname__ = cls.__qualname__
        return new

    def dataclass(cls=None, /, **options):
        unknown = set(options) - _SUPPORTED
        if unknown:
            raise TypeError(f"lirun.values.dataclass does not support {sorted(unknown)}")

        def wrap(target):
            return _process(
                target,
                frozen=options.get("frozen", False),
                slots=options.get("slots", False),
                eq=options.get("eq", True),
            )

        return wrap if cls is None else wrap(cls)

    def is_dataclass(obj):
        return hasattr(obj if isinstance(obj, type) else type(obj), _FIELDS)

    def fields(obj):
        try:
            return getattr(obj, _FIELDS)
        except AttributeError:
            raise TypeError("must be called with a value class type or instance") from None

    def replace(obj, /, **changes):
        for spec in fields(obj):
            changes.setdefault(spec.name, getattr(obj, spec.name))
        return type(obj)(**changes)

    def _as_plain(value):
        if is_dataclass(value) and not isinstance(value, type):
            return {s.name: _as_plain(getattr(value, s.name)) for s in fields(value)}
        if isinstance(value, tuple) and hasattr(value, "_fields"):
            return type(value)(*[_as_plain(v) for v in value])
        if isinstance(value, list | tuple):
            return type(value)(_as_plain(v) for v in value)
        if isinstance(value, dict):
            return type(value)((_as_plain(k), _as_plain(v)) for k, v in value.items())
        return value

    def asdict(obj):
        if not is_dataclass(obj) or isinstance(obj, type):
            raise TypeError("asdict() should be called on value class instances")
        return _as_plain(obj)

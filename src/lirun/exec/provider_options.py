"""The provider's own options: one validated structure for the CLI, profiles and playbooks.

In headless mode these decide whether an agent can work at all (a permission mode, tool
lists, a sandbox, an approval policy). Each provider declares its keys and their kinds
(``Provider.options``) and turns them into arguments (``Provider.option_args``); this
module checks the values by kind and knows no provider. ``provider_args`` carries the
rest verbatim. Flags a provider says lirun owns (``Provider.owned_flags``: a second
output format, a non-streaming print mode) are refused before anything starts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from lirun.errors import UsageError
from lirun.providers.base import OptionKind, OptionValue
from lirun.providers.registry import get_provider, option_kinds

__all__ = ["ProviderOptions", "check_provider_args", "option_keys"]


def option_keys() -> frozenset[str]:
    """Every key a profile, playbook, leg or play may set as a provider option: each
    provider's own keys (``Provider.options``) and ``provider_args``."""
    return frozenset(option_kinds()) | {"provider_args"}


def _fail(where: str, message: str) -> UsageError:
    return UsageError(f"{where}: {message}" if where else message)


def _text_list(value: Any, key: str, where: str) -> tuple[str, ...]:
    """A list of non-empty strings; a single string is a list of one."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(
        isinstance(item, str) and item for item in items
    ):
        raise _fail(where, f"{key} must be a list of non-empty strings, got {value!r}")
    return tuple(items)


def _config_value(value: Any, key: str, where: str) -> str:
    # Codex parses VALUE as TOML and falls back to a literal string, as its own -c does.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    if isinstance(value, list):
        return json.dumps(value)
    raise _fail(where, f"config.{key} must be text, a number, a boolean or a list")


def _config(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    """``{key: value}`` or ``["key=value", ...]`` → ordered pairs for ``-c key=value``."""
    if isinstance(value, Mapping):
        pairs = [(str(k), _config_value(v, str(k), where)) for k, v in value.items()]
    elif isinstance(value, list | tuple):
        pairs = []
        for item in value:
            key, sep, val = str(item).partition("=")
            if not isinstance(item, str) or not sep or not key.strip():
                raise _fail(where, f"config entries must look like key=value, got {item!r}")
            pairs.append((key.strip(), val))
    else:
        raise _fail(where, f"config must be a mapping or a list of key=value, got {value!r}")
    for key, _ in pairs:
        if not key.strip():
            raise _fail(where, "config keys must be non-empty")
    return tuple(pairs)


def check_provider_args(provider: str, args: Sequence[str], where: str = "") -> None:
    """Refuse the options that would break supervision; UsageError (exit 2) naming why."""
    forbidden = get_provider(provider).owned_flags
    for arg in args:
        name = arg.split("=", 1)[0] if arg.startswith("--") else arg
        if name in forbidden:
            raise _fail(
                where,
                f"{provider} option {arg!r} cannot be passed: {forbidden[name]}; remove it "
                f"(lirun supervises through that stream)",
            )


def _value(kind: OptionKind, value: Any, key: str, where: str) -> OptionValue:
    """One option's value checked by its kind (``lirun.providers.base.OptionKind``)."""
    if kind == "texts":
        return _text_list(value, key, where)
    if kind == "text":
        if not isinstance(value, str) or not value.strip():
            raise _fail(where, f"{key} must be non-empty text, got {value!r}")
        return value
    if kind == "count":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _fail(where, f"{key} must be a positive whole number, got {value!r}")
        return value
    return _config(value, where)


@dataclass(frozen=True, slots=True)
class ProviderOptions:
    """Provider options as validated values; empty by default (the provider's own defaults).

    ``values``: ``(key, value)`` pairs of the named options in the order given, each value
    checked by the kind its provider declares; ``provider_args``: verbatim arguments.
    """

    values: tuple[tuple[str, OptionValue], ...] = ()
    provider_args: tuple[str, ...] = ()

    @classmethod
    def of(cls, provider_args: tuple[str, ...] = (), **values: Any) -> ProviderOptions:
        """``ProviderOptions.of(max_turns=3)``: named values, checked as from a mapping."""
        made = cls.from_mapping(values)
        return replace(made, provider_args=tuple(provider_args))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None, *, where: str = "") -> ProviderOptions:
        """Options from a profile, playbook or leg mapping; keys that are no provider's
        option are ignored here (the caller checks its own key set), bad values are a
        UsageError."""
        if not data:
            return cls()
        kinds = option_kinds()
        values: list[tuple[str, OptionValue]] = []
        args: tuple[str, ...] = ()
        for key, value in data.items():
            if value is None:
                continue
            if key == "provider_args":
                args = _text_list(value, key, where)
            elif key in kinds:
                values.append((key, _value(kinds[key], value, key, where)))
        return cls(tuple(values), args)

    def get(self, key: str) -> OptionValue | None:
        return dict(self.values).get(key)

    def merged(self, over: ProviderOptions) -> ProviderOptions:
        """``over``'s set values win; ``provider_args`` accumulate (``self`` first)."""
        mine = dict(self.values)
        mine.update(over.values)
        return ProviderOptions(tuple(mine.items()), (*self.provider_args, *over.provider_args))

    def set_keys(self) -> list[str]:
        keys = [key for key, _ in self.values]
        return [*keys, "provider_args"] if self.provider_args else keys

    def to_record(self) -> dict[str, Any] | None:
        """The JSON recorded on the execution row (``provider_options_json``); None if empty."""
        record: dict[str, Any] = {}
        for key, value in self.values:
            if option_kinds().get(key) == "settings" and isinstance(value, tuple):
                record[key] = {str(pair[0]): pair[1] for pair in value if isinstance(pair, tuple)}
            elif isinstance(value, tuple):
                record[key] = list(value)
            else:
                record[key] = value
        if self.provider_args:
            record["provider_args"] = list(self.provider_args)
        return record or None

    def check_for(self, provider: str) -> None:
        """The named keys must belong to ``provider``; ``provider_args`` must keep supervision."""
        own = get_provider(provider).options
        foreign = [key for key, _ in self.values if key not in own]
        if foreign:
            known = ", ".join(sorted(own)) or "none"
            raise UsageError(
                f"{', '.join(foreign)} {'is' if len(foreign) == 1 else 'are'} not {provider} "
                f"option(s); {provider} takes {known}, and provider_args for anything else"
            )
        check_provider_args(provider, self.provider_args)

    def to_args(self, provider: str) -> list[str]:
        """The provider's command-line options for these values (``check_for`` first)."""
        self.check_for(provider)
        return get_provider(provider).option_args(dict(self.values), self.provider_args)

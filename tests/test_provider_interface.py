"""The provider interface (``lirun.providers.base``) as every built-in provider keeps it,
and the registry's rules for what it admits (docs/providers.md, "Writing a provider")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import pytest

from lirun.errors import UsageError
from lirun.exec.provider_options import ProviderOptions, option_keys
from lirun.exec.stream import StreamParser
from lirun.exec.version_window import version_key
from lirun.providers import registry
from lirun.providers.base import Capabilities, OptionKind, Provider
from lirun.providers.registry import BUILTIN, get_provider, option_kinds, provider_names

KINDS = {"text", "texts", "count", "settings"}


@pytest.mark.parametrize("cls", BUILTIN, ids=lambda cls: cls.name)
def test_each_builtin_keeps_the_interface(cls: type[Provider]) -> None:
    provider = get_provider(cls.name)
    assert isinstance(provider, cls)
    parser = provider.new_parser()
    assert isinstance(parser, StreamParser)
    assert parser.provider == provider.name  # the rows and the parser say the same name
    assert provider.env_var == f"LIRUN_{provider.name.upper()}_BIN"
    low, high = provider.tested_versions
    low_key, high_key = version_key(low), version_key(high)
    assert low_key is not None
    assert high_key is not None
    assert low_key <= high_key
    assert set(provider.options.values()) <= KINDS
    assert all(flag.startswith("-") for flag in provider.owned_flags)
    argv = provider.command("/x/exe", model="m")
    assert argv[0] == "/x/exe"
    assert "m" in argv
    # No owned flag can come back through provider_args.
    for flag in provider.owned_flags:
        with pytest.raises(UsageError, match="cannot be passed"):
            ProviderOptions(provider_args=(flag,)).check_for(provider.name)
    assert provider.package.startswith("@") or provider.package
    assert isinstance(provider.capabilities, Capabilities)


def test_the_registry_lists_the_builtins_first() -> None:
    assert provider_names()[: len(BUILTIN)] == tuple(cls.name for cls in BUILTIN)
    assert set(option_kinds()) | {"provider_args"} == option_keys()


def test_a_version_outside_the_window_is_noticed() -> None:
    provider = get_provider("claude")
    low, high = provider.tested_versions
    assert provider.untested_version(low) is None
    assert provider.untested_version(high) is None
    assert provider.untested_version(None) is None
    key = version_key(high)
    assert key is not None
    newer = ".".join(str(part + 1) for part in key[0])
    notice = provider.untested_version(newer)
    assert notice is not None
    assert (notice["kind"], notice["provider"], notice["version"]) == (
        "provider_version_untested",
        "claude",
        newer,
    )
    assert notice["tested"] == f"{low}..{high}"
    assert provider.untested_version("0.0.1") is not None


class _Minimal(Provider):
    name = "minimal"
    package = "minimal-cli"
    tested_versions = ("1.0", "1.0")
    options: ClassVar[dict[str, OptionKind]] = {"max_turns": "text"}  # a count elsewhere

    def command(
        self,
        executable: str,
        *,
        model: str | None = None,
        resume: str | None = None,
        extra_args: Sequence[str] = (),
    ) -> list[str]:
        return [executable, *extra_args]

    def new_parser(self) -> StreamParser:
        return get_provider("claude").new_parser()


def test_the_registry_refuses_a_clash() -> None:
    """A third party cannot take a built-in's name, nor give a shared option another kind."""
    reg = registry._Registry()
    for cls in BUILTIN:
        assert registry._add(reg, cls()) is None
    assert "is a text, another provider's is a count" in (registry._add(reg, _Minimal()) or "")
    clash = type("Clash", (_Minimal,), {"name": BUILTIN[0].name, "options": {}})
    assert "is taken" in (registry._add(reg, clash()) or "")
    upper = type("Upper", (_Minimal,), {"name": "Minimal", "options": {}})
    assert "must be lowercase" in (registry._add(reg, upper()) or "")
    fine = type("Fine", (_Minimal,), {"options": {}})
    assert registry._add(reg, fine()) is None
    assert fine().option_args({}, ["--x"]) == ["--x"]  # the default: provider_args alone
    assert fine().environment({"HOME": "/h"}) == {}  # the default: nothing added


def test_an_unknown_provider_names_the_known_ones() -> None:
    with pytest.raises(UsageError, match="known providers: claude, codex"):
        get_provider("nosuch")

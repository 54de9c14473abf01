"""Which agent CLIs lirun knows: the built-in providers, then those installed distributions
add through the entry point group ``lirun.providers`` (docs/providers.md, "Writing a
provider"), and how to find a provider's executable.

The registry is read once per process, on the first question. A third-party entry point
that cannot be loaded, or loads something that is not a provider, is left out with one
warning naming its distribution and what is wrong; asking for that provider by name says
the same as a UsageError. It never stops an unrelated command.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from shutil import which

from lirun.errors import UsageError
from lirun.logs import get_logger
from lirun.provider_errors import ProviderNotFoundError
from lirun.providers.base import OptionKind, Provider
from lirun.providers.claude import ClaudeProvider
from lirun.providers.codex import CodexProvider
from lirun.providers.copilot import CopilotProvider
from lirun.providers.gemini import GeminiProvider
from lirun.providers.opencode import OpencodeProvider
from lirun.providers.pi import PiProvider
from lirun.settings import Settings

__all__ = [
    "BUILTIN",
    "ENTRY_POINT_GROUP",
    "find_provider_executable",
    "get_provider",
    "option_kinds",
    "parse_provider_spec",
    "provider_names",
    "providers",
]

ENTRY_POINT_GROUP = "lirun.providers"
BUILTIN: tuple[type[Provider], ...] = (
    ClaudeProvider,
    CodexProvider,
    GeminiProvider,
    PiProvider,
    CopilotProvider,
    OpencodeProvider,
)

_log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class _Registry:
    by_name: dict[str, Provider] = field(default_factory=dict)
    kinds: dict[str, OptionKind] = field(default_factory=dict)
    # Entry points left out, by the name they were registered under: what is wrong.
    broken: dict[str, str] = field(default_factory=dict)


def _entry_points() -> list[EntryPoint]:
    return sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)


def _origin(ep: EntryPoint) -> str:
    dist = ep.dist
    name = f"{dist.name} {dist.version}" if dist is not None else "an unknown distribution"
    return f"entry point {ep.name!r} ({ep.value}) of {name}"


def _loaded(ep: EntryPoint) -> Provider:
    """The provider an entry point names: a Provider subclass (or an instance of one)."""
    try:
        target = ep.load()
    except Exception as exc:  # a third party's import error must not stop lirun
        raise ValueError(f"cannot be imported: {type(exc).__name__}: {exc}") from exc
    if isinstance(target, type) and issubclass(target, Provider):
        try:
            target = target()
        except Exception as exc:  # an abstract method left out, a failing __init__
            raise ValueError(f"cannot be made: {type(exc).__name__}: {exc}") from exc
    if not isinstance(target, Provider):
        raise ValueError(f"names {target!r}, not a lirun.providers.base.Provider subclass")
    if getattr(target, "name", None) != ep.name:
        raise ValueError(
            f"makes a provider named {getattr(target, 'name', None)!r}; the entry point "
            f"name must be the provider's name"
        )
    return target


def _add(registry: _Registry, provider: Provider) -> str | None:
    """Adds ``provider``; what keeps it out (a name or an option already taken), or None."""
    name = provider.name
    if not name or name != name.strip().lower() or "/" in name:
        return f"its name {name!r} must be lowercase text without '/' or spaces"
    if name in registry.by_name:
        return f"the name {name!r} is taken by another provider"
    for key, kind in provider.options.items():
        if registry.kinds.get(key, kind) != kind:
            return f"its option {key!r} is a {kind}, another provider's is a {registry.kinds[key]}"
    registry.by_name[name] = provider
    for key, kind in provider.options.items():
        registry.kinds[key] = kind
    return None


@cache
def _registry() -> _Registry:
    registry = _Registry()
    for cls in BUILTIN:
        _add(registry, cls())
    for ep in _entry_points():
        try:
            problem = _add(registry, _loaded(ep))
        except ValueError as exc:
            problem = str(exc)
        if problem is not None:
            said = f"{_origin(ep)} {problem}"
            registry.broken.setdefault(ep.name, said)
            _log.warning(
                "provider left out: %s; fix or uninstall that distribution",
                said,
                extra={"event": "provider.entry_point_broken"},
            )
    return registry


def providers() -> tuple[Provider, ...]:
    """Every provider lirun can run, built-ins first."""
    return tuple(_registry().by_name.values())


def provider_names() -> tuple[str, ...]:
    """Their names, built-ins first (the order help texts list them in)."""
    return tuple(_registry().by_name)


def option_kinds() -> Mapping[str, OptionKind]:
    """Every provider's option keys with their kind (a key means the same to all that take it)."""
    return _registry().kinds


def get_provider(name: str) -> Provider:
    """The provider ``name``; a UsageError naming the known ones (or why it is broken)."""
    registry = _registry()
    key = name.strip().lower()
    provider = registry.by_name.get(key)
    if provider is not None:
        return provider
    if key in registry.broken:
        raise UsageError(f"provider {key!r} is installed but broken: {registry.broken[key]}")
    known = ", ".join(registry.by_name)
    raise UsageError(f"unknown provider {name!r}; known providers: {known}")


def parse_provider_spec(text: str) -> tuple[str, str | None]:
    """``"NAME/some-model"`` → ``("NAME", "some-model")``; no model → None.

    Only the first ``/`` splits, so a model id may itself contain slashes.
    """
    name, sep, model = text.strip().partition("/")
    provider = get_provider(name)
    if sep and not model.strip():
        raise UsageError(f"provider spec {text!r} has an empty model; use {provider.name}/MODEL")
    return provider.name, (model.strip() or None)


def find_provider_executable(name: str, override: str | None, settings: Settings) -> str:
    """The path of the provider's CLI: ``override`` (a flag) > ``settings.provider_bin``
    (``$LIRUN_<NAME>_BIN``, as the caller's settings read it) > PATH.

    Raises ProviderNotFoundError (exit code 2) saying how to fix it when nothing usable exists.
    """
    provider = get_provider(name)
    if override:
        return _checked_executable(provider, override, "--bin")
    if env_value := settings.provider_bin(provider.name):
        return _checked_executable(provider, env_value, f"${provider.env_var}")
    exe = provider.executable_name
    found = which(exe)
    if found is None:
        raise ProviderNotFoundError(
            f"{exe} executable not found on PATH; {provider.install_hint}, or set "
            f"{provider.env_var}=/path/to/{exe}, or pass --bin /path/to/{exe}"
        )
    return found


def _checked_executable(provider: Provider, candidate: str, source: str) -> str:
    # A bare name is looked up on PATH, a path is taken as given.
    path = os.path.expanduser(candidate)
    if os.sep not in path:
        path = which(path) or path
    name = provider.name
    if not os.path.isfile(path):
        raise ProviderNotFoundError(
            f"{name} executable {candidate!r} (from {source}) does not exist; "
            f"fix the path or unset it to use {provider.executable_name} from PATH"
        )
    if not os.access(path, os.X_OK):
        raise ProviderNotFoundError(
            f"{name} executable {candidate!r} (from {source}) is not executable; "
            f"run chmod +x on it or point {provider.env_var} at the real {name}"
        )
    return os.path.abspath(path)

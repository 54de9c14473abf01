"""The provider's own options: one validated structure for the CLI, profiles and playbooks.

In headless mode these decide whether an agent can work at all (Claude Code's permission
mode and tool lists, Codex's sandbox and approval policy). Common ones have named keys;
``provider_args`` carries the rest verbatim. Options that would break supervision (a
second output format, a non-streaming print mode) are refused before anything starts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from lirun.errors import UsageError

__all__ = [
    "CLAUDE_KEYS",
    "CODEX_KEYS",
    "OPTION_KEYS",
    "ProviderOptions",
    "check_provider_args",
]

CLAUDE_KEYS = frozenset(
    {
        "permission_mode",
        "allowed_tools",
        "disallowed_tools",
        "max_turns",
        "append_system_prompt",
        "mcp_config",
    }
)
CODEX_KEYS = frozenset({"sandbox", "approval_policy", "config"})
OPTION_KEYS = CLAUDE_KEYS | CODEX_KEYS | {"provider_args"}

# Flags lirun sets itself: the stream it parses depends on them (docs/providers.md).
_FORBIDDEN: dict[str, dict[str, str]] = {
    "claude": {
        "-p": "lirun runs claude -p itself",
        "--print": "lirun runs claude -p itself",
        "--output-format": "lirun reads --output-format stream-json",
        "--input-format": "lirun passes the prompt as text on stdin",
    },
    "codex": {
        "--json": "lirun runs codex exec --json itself",
        "--experimental-json": "lirun runs codex exec --json itself",
    },
    "pi": {"--mode": "lirun runs pi --mode json itself"},
    "gemini": {
        "-o": "lirun reads -o stream-json",
        "--output-format": "lirun reads -o stream-json",
        "-p": "lirun passes the prompt on stdin",
        "--prompt": "lirun passes the prompt on stdin",
        "-i": "lirun runs gemini headless",
        "--prompt-interactive": "lirun runs gemini headless",
    },
}
_LISTS = ("allowed_tools", "disallowed_tools", "mcp_config", "provider_args")
_TEXTS = ("permission_mode", "append_system_prompt", "sandbox", "approval_policy")


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
    forbidden = _FORBIDDEN.get(provider, {})
    for arg in args:
        name = arg.split("=", 1)[0] if arg.startswith("--") else arg
        if name in forbidden:
            raise _fail(
                where,
                f"{provider} option {arg!r} cannot be passed: {forbidden[name]}; remove it "
                f"(lirun supervises through that stream)",
            )


@dataclass(frozen=True, slots=True)
class ProviderOptions:
    """Provider options as validated values; empty by default (the provider's own defaults)."""

    permission_mode: str | None = None
    allowed_tools: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = ()
    max_turns: int | None = None
    append_system_prompt: str | None = None
    mcp_config: tuple[str, ...] = ()
    sandbox: str | None = None
    approval_policy: str | None = None
    config: tuple[tuple[str, str], ...] = ()
    provider_args: tuple[str, ...] = ()

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None, *, where: str = "") -> ProviderOptions:
        """Options from a profile, playbook or leg mapping; keys outside OPTION_KEYS are
        ignored here (the caller checks its own key set), bad values are a UsageError."""
        if not data:
            return cls()
        values: dict[str, Any] = {}
        for key in OPTION_KEYS & set(data):
            value = data[key]
            if value is None:
                continue
            if key in _LISTS:
                values[key] = _text_list(value, key, where)
            elif key in _TEXTS:
                if not isinstance(value, str) or not value.strip():
                    raise _fail(where, f"{key} must be non-empty text, got {value!r}")
                values[key] = value
            elif key == "max_turns":
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise _fail(where, f"max_turns must be a positive whole number, got {value!r}")
                values[key] = value
            else:
                values[key] = _config(value, where)
        return cls(**values)

    def merged(self, over: ProviderOptions) -> ProviderOptions:
        """``over``'s set values win; ``provider_args`` accumulate (``self`` first)."""
        changes: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(over, f.name)
            if f.name == "provider_args":
                changes[f.name] = (*self.provider_args, *value)
            elif value not in (None, ()):
                changes[f.name] = value
        return replace(self, **changes)

    def set_keys(self) -> list[str]:
        return [f.name for f in fields(self) if getattr(self, f.name) not in (None, ())]

    def to_record(self) -> dict[str, Any] | None:
        """The JSON recorded on the execution row (``provider_options_json``); None if empty."""
        record: dict[str, Any] = {}
        for key in self.set_keys():
            value = getattr(self, key)
            if key == "config":
                record[key] = {k: v for k, v in value}
            elif isinstance(value, tuple):
                record[key] = list(value)
            else:
                record[key] = value
        return record or None

    def check_for(self, provider: str) -> None:
        """The named keys must belong to ``provider``; ``provider_args`` must keep supervision."""
        own = {"claude": CLAUDE_KEYS, "codex": CODEX_KEYS}.get(provider, frozenset())
        foreign = [k for k in self.set_keys() if k != "provider_args" and k not in own]
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
        # provider_args after the named options, so the command line's own flags win over a
        # profile's; Claude's variadic options stay last (nothing positional follows them).
        args: list[str] = []
        if provider == "claude":
            if self.permission_mode:
                args += ["--permission-mode", self.permission_mode]
            if self.max_turns is not None:
                args += ["--max-turns", str(self.max_turns)]
            if self.append_system_prompt:
                # = form: a text that starts with a dash must not read as an option
                args.append(f"--append-system-prompt={self.append_system_prompt}")
            args += self.provider_args
            for flag, values in (
                ("--allowedTools", self.allowed_tools),
                ("--disallowedTools", self.disallowed_tools),
                ("--mcp-config", self.mcp_config),
            ):
                if values:
                    args += [flag, *values]
            return args
        if provider == "codex":
            if self.sandbox:
                args += ["--sandbox", self.sandbox]
            if self.approval_policy:
                args += ["-c", f"approval_policy={self.approval_policy}"]
            for key, value in self.config:
                args += ["-c", f"{key}={value}"]
        return [*args, *self.provider_args]

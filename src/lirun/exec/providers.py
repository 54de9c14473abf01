"""The provider registry: which agent CLIs lirun knows, how to find and run them.

A supervisor needs only this module: pick a spec with :func:`parse_provider_spec`, find the
executable, build the command, feed stdout lines to ``spec.new_parser()`` and ``finish``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from shutil import which
from typing import Protocol

from lirun.errors import UsageError
from lirun.exec.claude import ClaudeStreamParser, build_claude_command
from lirun.exec.codex import CodexStreamParser, build_codex_command
from lirun.exec.pi import PiStreamParser, build_pi_command
from lirun.exec.gemini import GeminiStreamParser, build_gemini_command
from lirun.exec.stream import Event, Message, StreamParser, events_to_messages
from lirun.exec.verdict import StreamVerdict
from lirun.provider_errors import (
    ProviderError,
    ProviderNonRetryableError,
    ProviderNotFoundError,
    ProviderRetryableError,
)
from lirun.settings import Settings

__all__ = [
    "PROVIDERS",
    "ClaudeStreamParser",
    "CodexStreamParser",
    "CommandBuilder",
    "Event",
    "GeminiStreamParser",
    "Message",
    "PiStreamParser",
    "ProviderError",
    "ProviderNonRetryableError",
    "ProviderNotFoundError",
    "ProviderRetryableError",
    "ProviderSpec",
    "StreamParser",
    "StreamVerdict",
    "build_claude_command",
    "build_codex_command",
    "build_pi_command",
    "build_gemini_command",
    "events_to_messages",
    "find_provider_executable",
    "get_provider",
    "parse_provider_spec",
]


class CommandBuilder(Protocol):
    def __call__(
        self,
        executable: str,
        *,
        model: str | None = None,
        resume: str | None = None,
        extra_args: Sequence[str] = (),
    ) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class ProviderSpec:
    """One agent CLI: its name, where to find it, how to run it and read its stream."""

    name: str
    env_var: str
    install_hint: str
    build_command: CommandBuilder
    parser_factory: Callable[[], StreamParser]
    # True when the stream itself names the CLI version (Claude's init); else --version.
    version_in_stream: bool = False
    # The oldest and newest CLI versions the contract suite passed on (docs/providers.md);
    # a run made with another version gets a notice in its evidence (version_window).
    tested_versions: tuple[str, str] | None = None

    def new_parser(self) -> StreamParser:
        return self.parser_factory()


PROVIDERS: dict[str, ProviderSpec] = {
    "claude": ProviderSpec(
        name="claude",
        env_var="LIRUN_CLAUDE_BIN",
        install_hint="install Claude Code (npm install -g @anthropic-ai/claude-code)",
        build_command=build_claude_command,
        parser_factory=ClaudeStreamParser,
        version_in_stream=True,
        tested_versions=("2.1.197", "2.1.332"),
    ),
    "codex": ProviderSpec(
        name="codex",
        env_var="LIRUN_CODEX_BIN",
        install_hint="install Codex (npm install -g @openai/codex)",
        build_command=build_codex_command,
        parser_factory=CodexStreamParser,
        tested_versions=("0.171.0", "0.171.0"),
    ),
    "pi": ProviderSpec(
        name="pi",
        env_var="LIRUN_PI_BIN",
        install_hint="install pi (npm install -g @mariozechner/pi-coding-agent)",
        build_command=build_pi_command,
        parser_factory=PiStreamParser,
    ),
    "gemini": ProviderSpec(
        name="gemini",
        env_var="LIRUN_GEMINI_BIN",
        install_hint="install Gemini CLI (npm install -g @google/gemini-cli)",
        build_command=build_gemini_command,
        parser_factory=GeminiStreamParser,
    ),
}


def get_provider(name: str) -> ProviderSpec:
    """The spec for ``name``; UsageError naming the known providers otherwise."""
    spec = PROVIDERS.get(name.strip().lower())
    if spec is None:
        known = ", ".join(sorted(PROVIDERS))
        raise UsageError(f"unknown provider {name!r}; known providers: {known}")
    return spec


def parse_provider_spec(text: str) -> tuple[str, str | None]:
    """``"claude/claude-sonnet-4-5"`` → ``("claude", "claude-sonnet-4-5")``; no model → None.

    Only the first ``/`` splits, so a model id may itself contain slashes.
    """
    name, sep, model = text.strip().partition("/")
    spec = get_provider(name)
    if sep and not model.strip():
        raise UsageError(f"provider spec {text!r} has an empty model; use {spec.name}/MODEL")
    return spec.name, (model.strip() or None)


def find_provider_executable(
    name: str, override: str | None = None, settings: Settings | None = None
) -> str:
    """The path of the provider's CLI: ``override`` (a flag) > ``$LIRUN_<NAME>_BIN`` > PATH.

    Raises ProviderNotFoundError (exit code 2) saying how to fix it when nothing usable exists.
    """
    spec = get_provider(name)
    if override:
        return _checked_executable(spec, override, "--bin")
    if env_value := (settings or Settings.from_env()).provider_bin(spec.name):
        return _checked_executable(spec, env_value, f"${spec.env_var}")
    found = which(spec.name)
    if found is None:
        raise ProviderNotFoundError(
            f"{spec.name} executable not found on PATH; {spec.install_hint}, or set "
            f"{spec.env_var}=/path/to/{spec.name}, or pass --bin /path/to/{spec.name}"
        )
    return found


def _checked_executable(spec: ProviderSpec, candidate: str, source: str) -> str:
    # A bare name is looked up on PATH, a path is taken as given.
    path = os.path.expanduser(candidate)
    if os.sep not in path:
        path = which(path) or path
    if not os.path.isfile(path):
        raise ProviderNotFoundError(
            f"{spec.name} executable {candidate!r} (from {source}) does not exist; "
            f"fix the path or unset it to use {spec.name} from PATH"
        )
    if not os.access(path, os.X_OK):
        raise ProviderNotFoundError(
            f"{spec.name} executable {candidate!r} (from {source}) is not executable; "
            f"run chmod +x on it or point {spec.env_var} at the real {spec.name}"
        )
    return os.path.abspath(path)

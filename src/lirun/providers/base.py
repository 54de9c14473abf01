"""The one interface an agent CLI implements to be run by lirun (docs/providers.md).

A provider is one module: a subclass of :class:`Provider` whose class attributes say what
the CLI is (its name, its npm package, the versions it was tested with, its capabilities,
its own options and the flags lirun owns) and whose methods say how to run it headless
(the command line, extra environment, the stream parser, version detection). Everything
else in lirun reaches a provider only through this interface and the registry
(``providers.registry``), so adding a provider touches no other module.

What the stream says (usage, cost, model, the engine session id, how a failure is
classified) is the parser's: a ``lirun.exec.stream.StreamParser`` subclass, one per run.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from lirun.exec.version_window import version_notice
from lirun.settings import provider_bin_env

if TYPE_CHECKING:
    from lirun.exec.stream import StreamParser

__all__ = [
    "Capabilities",
    "OptionKind",
    "OptionValue",
    "Provider",
    "version_number",
]

# How a provider option's value is written in a profile, playbook, leg or play, and so
# how it is checked (``exec.provider_options``): ``text`` one non-empty string, ``texts``
# a list of them (a single string is a list of one), ``count`` a whole number >= 1,
# ``settings`` a mapping or a list of ``key=value`` (ordered ``(key, value)`` pairs).
OptionKind = Literal["text", "texts", "count", "settings"]
OptionValue = str | int | tuple[str, ...] | tuple[tuple[str, str], ...]

_VERSION = re.compile(r"\d+\.\d+[0-9A-Za-z.+-]*")


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What the CLI can do, asked by lirun instead of naming the provider.

    ``resume``: it continues an earlier conversation (``--resume BRANCH``, a retried or
    continued leg). ``session_id``: its stream names its engine session. ``reports_cost``:
    its stream carries a cost in USD (a schedule's ``--budget-usd`` sees its runs only
    then). ``approval_modes``: the tool approval modes it offers (shown by
    ``li agent --help``). ``stop_process_group``: it waits on children of its own, so
    stopping it must signal its whole process group, never its pid alone.
    """

    resume: bool = False
    session_id: bool = False
    reports_cost: bool = False
    approval_modes: tuple[str, ...] = ()
    stop_process_group: bool = True


class Provider(ABC):
    """One agent CLI. Subclass it, set the class attributes, implement the two abstract
    methods; override the others only where the CLI differs from the defaults.

    The prompt never appears in :meth:`command`: lirun writes it on the child's stdin (an
    anonymous file, then end-of-file), so it stays out of ``ps``; a CLI that reads the
    prompt from stdin is the only kind lirun runs.
    """

    name: ClassVar[str]  # lowercase; `li agent NAME[/MODEL]`, the row's provider column
    package: ClassVar[str]  # the npm package that installs it (the install hint)
    tested_versions: ClassVar[tuple[str, str]]  # (lowest, highest) version tested
    capabilities: ClassVar[Capabilities] = Capabilities()
    # Its own options: the keys a profile, playbook, leg or play may set, and their kind
    # (how they become arguments: :meth:`option_args`).
    options: ClassVar[Mapping[str, OptionKind]] = {}
    # Flags lirun sets itself (the stream it parses depends on them), refused in
    # provider_args: flag -> why. ``--flag=value`` is refused as ``--flag``.
    owned_flags: ClassVar[Mapping[str, str]] = {}
    # True when the stream itself names the CLI version (its parser sets ``cli_version``);
    # else ``EXE *version_args`` is asked once per binary and read by :meth:`parse_version`.
    version_in_stream: ClassVar[bool] = False
    version_args: ClassVar[tuple[str, ...]] = ("--version",)

    @property
    def executable_name(self) -> str:
        """The name looked up on PATH (the provider's name unless the CLI's differs)."""
        return self.name

    @property
    def env_var(self) -> str:
        """``LIRUN_<NAME>_BIN``: the variable naming its executable, derived from the name."""
        return provider_bin_env(self.name)

    @property
    def install_hint(self) -> str:
        return f"install it with npm install -g {self.package}"

    @abstractmethod
    def command(
        self,
        executable: str,
        *,
        model: str | None = None,
        resume: str | None = None,
        extra_args: Sequence[str] = (),
    ) -> list[str]:
        """The argv of a headless run that streams JSON lines on stdout and reads its
        prompt from stdin. ``resume``: the engine session to continue (only when
        ``capabilities.resume``). ``extra_args``: the option arguments, already checked."""

    @abstractmethod
    def new_parser(self) -> StreamParser:
        """A fresh parser for one run's stdout."""

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """Variables to add to the child's environment ``base`` for a headless run (the
        user's own configuration is always passed through; this only adds). None by
        default."""
        return {}

    def option_args(
        self, values: Mapping[str, OptionValue], provider_args: Sequence[str]
    ) -> list[str]:
        """The arguments for the checked option ``values`` (keys from :attr:`options`)
        and the verbatim ``provider_args``. A provider that declares options overrides it;
        the default passes ``provider_args`` on alone."""
        return list(provider_args)

    def untested_version(self, version: str | None) -> dict[str, Any] | None:
        """Evidence for a run made with a version outside :attr:`tested_versions` (the
        record may be less true there: new wordings, new events), else None
        (``exec/version_window.py`` decides)."""
        return version_notice(self.name, version, self.tested_versions)

    def parse_version(self, output: str) -> str | None:
        """The version in the output of ``EXE *version_args`` (the first version number
        on its first line), else that line cut short; None when it printed nothing."""
        return version_number(output)


def version_number(output: str) -> str | None:
    """``some-cli 0.171.0`` → ``0.171.0``; the first line when no version number shows."""
    line = next((ln.strip() for ln in output.splitlines() if ln.strip()), "")
    match = _VERSION.search(line)
    if match:
        return match.group(0)
    return line[:80] or None

"""Agent profiles and playbooks: YAML files that declare defaults and artifact contracts.

A profile lives at ``<home>/profiles/<name>.yaml`` (or ``.yml``) and declares what an
agent usually produces (``artifacts:``) and how it usually runs (``defaults:``). A
playbook lives at ``<home>/playbooks/<name>.yaml`` and declares what one kind of job
produces, optionally with its own ``defaults:`` and a ``prompt``.

Contract resolution (design.md D3) overlays by artifact id, most specific last: profile
entries, then playbook entries, then ``--artifact`` entries from the command line.
Command-line entries are resolved as playbook-level declarations (their ``source`` is
``playbook``): they specialize one job just as a playbook does. Within one file ids must
be unique; a repeated id there is a mistake, not an overlay.

Reading and checking the files is ``exec.profile_files`` (it loads PyYAML); this module
is what a loaded profile is and how declarations combine, so ``li run`` without a profile
or playbook reads no YAML.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lirun.errors import UsageError
from lirun.record.artifacts import (
    ArtifactContract,
    ArtifactContractError,
    ExpectedArtifact,
    check_artifact_path,
    resolve_artifact_contract,
)

__all__ = [
    "DEFAULT_KEYS",
    "Playbook",
    "Profile",
    "ProfileError",
    "check_provider_default",
    "merged_defaults",
    "parse_artifact_option",
    "resolve_contract_for",
]

# The closed set of run defaults a profile or playbook may set, with the type each takes,
DEFAULT_KEYS: dict[str, str] = {
    "provider": "text",
    "model": "text",
    "cwd": "text",
    "save": "text",
    "timeout": "seconds",
    "idle_timeout": "seconds",
    "stall_timeout": "seconds_or_off",
    "grace": "seconds",
    # Completed needs a change or a produced artifact (a command's exit 0 is not enough).
    "require_change": "flag",
    # beside the provider's own options (``exec.provider_options.option_keys()``, asked when
    # a file is read: the providers installed decide them), checked as one structure.
}
_ARTIFACT_OPTION = re.compile(r"^([A-Za-z0-9_-]+)=(.+?)(\?)?$")


class ProfileError(UsageError):
    """A profile or playbook is missing or malformed.

    The message names the file (and line, for YAML syntax) and the broken rule; fix the
    file or pick another name (``ls $LIRUN_HOME/profiles``).
    """


@dataclass(frozen=True, slots=True)
class Profile:
    """One agent profile. ``artifacts`` is None when the file declares none."""

    name: str
    path: Path
    description: str = ""
    artifacts: list[dict[str, Any]] | None = None
    defaults: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Playbook:
    """One playbook. ``prompt`` is None when the file has none."""

    name: str
    path: Path
    description: str = ""
    artifacts: list[dict[str, Any]] | None = None
    defaults: dict[str, Any] = field(default_factory=dict)
    prompt: str | None = None


# --- contracts --------------------------------------------------------------------------------


def parse_artifact_option(text: str) -> ExpectedArtifact:
    """``--artifact ID=PATH`` (required) or ``ID=PATH?`` (optional) as a contract entry."""
    match = _ARTIFACT_OPTION.match(text)
    if not match:
        raise UsageError(
            f"--artifact {text!r}: expected ID=PATH or ID=PATH? (optional), where ID uses "
            "A-Z a-z 0-9 _ -, e.g. --artifact report=out/report.md"
        )
    ident, path, optional = match.groups()
    try:
        check_artifact_path(path, f"--artifact {ident}")
    except ArtifactContractError as exc:
        raise UsageError(str(exc)) from exc
    return {"id": ident, "path": path, "required": optional is None}


def resolve_contract_for(
    profile: Profile | None,
    playbook: Playbook | None,
    extra_entries: Iterable[Mapping[str, Any]] = (),
) -> ArtifactContract | None:
    """The validated contract to snapshot on the execution row, or None if nothing declares one.

    Profile entries are the agent defaults; playbook entries and then ``extra_entries``
    (``--artifact``) overlay them by id, the last declaration winning.
    """
    extras = [dict(e) for e in extra_entries]
    defaults = profile.artifacts if profile else None
    specific = playbook.artifacts if playbook else None
    if extras:
        specific = [*(specific or []), *extras]
    try:
        return resolve_artifact_contract(
            playbook_artifacts=specific, agent_defaults=defaults, strict=True
        )
    except ArtifactContractError as exc:
        where = [str(x.path) for x in (profile, playbook) if x is not None]
        origin = " + ".join([*where, "--artifact"] if extras else where) or "--artifact"
        raise ProfileError(f"artifact contract from {origin}: {exc}") from exc


def merged_defaults(profile: Profile | None, playbook: Playbook | None) -> dict[str, Any]:
    """Run defaults, the playbook's overriding the profile's (command-line flags win over both)."""
    return {**(profile.defaults if profile else {}), **(playbook.defaults if playbook else {})}


def check_provider_default(defaults: Mapping[str, Any], provider: str) -> None:
    """Refuse a run whose provider is not the one its profile or playbook names
    (``defaults: provider:``): the file's model and options were written for that one,
    and a model of one CLI handed to another fails only once the agent has started."""
    wanted = defaults.get("provider")
    if wanted is not None and wanted != provider:
        raise ProfileError(
            f"the profile or playbook is for provider {wanted!r} (defaults: provider), "
            f"this run's is {provider!r}; run it with {wanted}[/MODEL], or remove "
            f"provider: from its defaults to use it with any provider"
        )

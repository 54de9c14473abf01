"""Reading profile and playbook files: ``<home>/profiles/<name>.yaml`` and
``<home>/playbooks/<name>.yaml``, checked strictly before anything starts.

Declarations are strict where a typo would change their meaning: an unknown key at the
top level, in ``defaults:`` or inside an artifact entry (``requird: false``) is refused
with ``file:line``. Mappings are loaded with their line numbers
(``yamlfile.lines.LineMap``) for that. What a loaded profile *is* and how profiles,
playbooks and ``--artifact`` entries combine lives in ``exec.profiles``, which loads no
YAML: ``li run`` without ``--profile`` or ``--playbook`` never imports this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lirun.errors import UsageError, ValidationError
from lirun.exec.profiles import DEFAULT_KEYS, Playbook, Profile, ProfileError
from lirun.exec.provider_options import ProviderOptions, option_keys
from lirun.paths import lirun_home
from lirun.providers.registry import get_provider
from lirun.record.artifact_checks import (
    SchemaFileError,
    check_problems,
    load_json_schema,
    resolve_schema_path,
)
from lirun.record.artifacts import (
    ArtifactContractError,
    unknown_entry_fields,
    unknown_field_message,
    validate_artifact_contract,
)
from lirun.record.rundir import safe_component
from lirun.yamlfile.lines import YamlFileError, read_yaml, where
from lirun.yamlfile.problems import did_you_mean, file_seconds

__all__ = ["check_artifacts", "check_defaults", "find_file", "load_playbook", "load_profile"]

_PROFILE_KEYS = frozenset({"description", "artifacts", "defaults"})
_PLAYBOOK_KEYS = frozenset({"description", "artifacts", "defaults", "prompt"})
_SUFFIXES = (".yaml", ".yml")


# --- finding and reading ----------------------------------------------------------------------


def find_file(kind: str, name: str) -> Path:
    """``<home>/<kind>s/<name>.yaml|.yml``; ProfileError saying where it looked."""
    try:
        safe_component(name, f"{kind} name")
    except ValidationError as exc:
        raise ProfileError(str(exc)) from None
    folder = lirun_home() / f"{kind}s"
    found = [folder / f"{name}{suffix}" for suffix in _SUFFIXES]
    existing = [p for p in found if p.is_file()]
    if len(existing) > 1:
        raise ProfileError(
            f"{kind} {name!r} is defined twice ({existing[0]} and {existing[1]}); remove one"
        )
    if not existing:
        raise ProfileError(
            f"no {kind} named {name!r}: looked for {found[0]} and {found[1]}; "
            f"create one of them or check the name"
        )
    return existing[0]


# --- checking the shape -----------------------------------------------------------------------


def _check_keys(path: Path, data: Mapping[str, Any], allowed: frozenset[str], kind: str) -> None:
    unknown = [k for k in data if k not in allowed]
    if unknown:
        raise ProfileError(
            f"{where(path, data, unknown[0])}: unknown {kind} key "
            f"{', '.join(repr(str(k)) for k in unknown)}{did_you_mean(unknown[0], allowed)} "
            f"(allowed: {', '.join(sorted(allowed))})"
        )


def _text(path: Path, data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ProfileError(f"{path}: {key} must be text, got {type(value).__name__}")
    return value


def check_defaults(path: Path, raw: object) -> dict[str, Any]:
    """The ``defaults:`` mapping, checked against the closed set ``DEFAULT_KEYS``."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ProfileError(f"{path}: defaults must be a mapping, got {type(raw).__name__}")
    allowed = {**DEFAULT_KEYS, **dict.fromkeys(option_keys(), "provider_option")}
    unknown = [k for k in raw if k not in allowed]
    if unknown:
        raise ProfileError(
            f"{where(path, raw, unknown[0])}: defaults: unknown key "
            f"{', '.join(repr(str(k)) for k in unknown)}{did_you_mean(unknown[0], allowed)} "
            f"(allowed: {', '.join(sorted(allowed))})"
        )
    try:
        ProviderOptions.from_mapping(raw, where=f"{path}: defaults")
    except UsageError as exc:
        raise ProfileError(str(exc)) from None
    checked = dict(raw)
    for key, value in raw.items():
        kind = allowed[key]
        if kind == "text" and not (isinstance(value, str) and value):
            raise ProfileError(f"{path}: defaults.{key} must be non-empty text, got {value!r}")
        if kind == "flag" and not isinstance(value, bool):
            raise ProfileError(f"{path}: defaults.{key} must be true or false, got {value!r}")
        if kind in ("seconds", "seconds_or_off"):
            checked[key] = _seconds(path, key, value, zero=kind == "seconds_or_off")
    if "provider" in raw:
        checked["provider"] = _provider(path, raw)
    return checked


def _provider(path: Path, raw: Mapping[str, Any]) -> str:
    """``defaults.provider``: a provider the registry knows, by its registered name."""
    try:
        return get_provider(raw["provider"]).name
    except UsageError as exc:
        raise ProfileError(f"{where(path, raw, 'provider')}: defaults.provider: {exc}") from None


def _seconds(path: Path, key: str, value: object, *, zero: bool) -> float:
    """A duration default (``timeout: 600`` or ``timeout: 10m``) as seconds."""
    try:
        return file_seconds(value, f"{path}: defaults.{key}", zero=zero)
    except UsageError as exc:
        raise ProfileError(str(exc)) from None


def check_artifacts(path: Path, raw: object) -> list[dict[str, Any]] | None:
    """The ``artifacts:`` entries (a list, or a mapping with ``expected:``), validated
    strictly: an unknown field in an entry is refused, naming its ``file:line``."""
    if raw is None:
        return None
    if isinstance(raw, dict) and set(raw) == {"expected"}:
        raw = raw["expected"]
    if not isinstance(raw, list):
        raise ProfileError(
            f"{path}: artifacts must be a list of entries or a mapping with an 'expected' "
            f"list, got {raw!r}"
        )
    raw = list(raw)  # checks are resolved in place of the file's own entries
    for index, entry in enumerate(raw):
        unknown = unknown_entry_fields(entry) if isinstance(entry, Mapping) else []
        if unknown:
            label = f"artifact entry {index}"
            if isinstance(entry.get("id"), str):
                label += f" (id={entry['id']!r})"
            message = unknown_field_message(label, unknown[0])
            raise ProfileError(f"{where(path, entry, unknown[0])}: artifacts: {message}")
        if isinstance(entry, Mapping) and "checks" in entry:
            raw[index] = {**entry, "checks": file_checks(path, entry)}
        try:
            # A growing prefix: the first failure is this entry's (a duplicate id included).
            validate_artifact_contract({"expected": raw[: index + 1]}, strict=True)
        except ArtifactContractError as exc:
            raise ProfileError(f"{where(path, entry)}: artifacts: {exc}") from exc
    return [dict(entry) for entry in raw]


def file_checks(path: Path, entry: Mapping[str, Any]) -> dict[str, Any]:
    """An entry's ``checks:`` checked where it is written: each problem, an unknown check
    name first among them, names its ``file:line``; ``json_schema`` is read relative to
    the file's directory, checked now, and kept as an absolute path."""
    checks = entry["checks"]
    label = f"artifact {entry.get('id')!r}" if isinstance(entry.get("id"), str) else "artifact"
    problems = check_problems(checks)
    if problems:
        key, message = problems[0]
        node, at = (checks, key) if key is not None else (entry, "checks")
        raise ProfileError(f"{where(path, node, at)}: artifacts: {label}: {message}")
    resolved = dict(checks)
    if "json_schema" in resolved:
        resolved["json_schema"] = resolve_schema_path(resolved["json_schema"], path.parent)
        try:
            load_json_schema(resolved["json_schema"])
        except SchemaFileError as exc:
            at = where(path, checks, "json_schema")
            raise ProfileError(f"{at}: artifacts: {label}: checks.json_schema: {exc}") from None
    return resolved


# --- loading ----------------------------------------------------------------------------------


def _load(
    kind: str, name: str, keys: frozenset[str]
) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """The file, its data, and the fields profiles and playbooks share, all checked."""
    path = find_file(kind, name)
    try:
        data = read_yaml(path)
    except YamlFileError as exc:
        raise ProfileError(str(exc)) from None
    _check_keys(path, data, keys, kind)
    common = {
        "name": name,
        "path": path,
        "description": _text(path, data, "description") or "",
        "artifacts": check_artifacts(path, data.get("artifacts")),
        "defaults": check_defaults(path, data.get("defaults")),
    }
    return path, data, common


def load_profile(name: str) -> Profile:
    """Read and check ``<home>/profiles/<name>.yaml``; ProfileError (exit 2) if unusable."""
    _, _, common = _load("profile", name, _PROFILE_KEYS)
    return Profile(**common)


def load_playbook(name: str) -> Playbook:
    """Read and check ``<home>/playbooks/<name>.yaml``; ProfileError (exit 2) if unusable."""
    path, data, common = _load("playbook", name, _PLAYBOOK_KEYS)
    return Playbook(**common, prompt=_text(path, data, "prompt"))

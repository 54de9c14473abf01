"""Artifact contracts: validate, resolve (profile + playbook) and verify (design.md D3).

The artifact root is the trust boundary: declared paths are relative and safe, and
verification never looks at anything outside the root, even through symlinks.
"""

from __future__ import annotations

import difflib
import os
import re
import stat
import time
from collections.abc import Mapping
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Literal, NotRequired, TypedDict

from lirun.errors import ValidationError
from lirun.record.artifact_checks import (
    CheckFailure,
    SchemaFileError,
    check_problems,
    load_json_schema,
    run_checks,
)
from lirun.record.artifact_dir import Unresolvable, lstat_or_none, root_aliases, walk_inside

__all__ = [
    "ARTIFACT_PROBLEMS",
    "KNOWN_ENTRY_FIELDS",
    "ArtifactContract",
    "ArtifactContractError",
    "ArtifactPathError",
    "ExpectedArtifact",
    "InvalidArtifact",
    "MissingArtifact",
    "ProducedArtifact",
    "VerificationResult",
    "check_artifact_path",
    "contract_warnings",
    "describe_problem",
    "resolve_artifact_contract",
    "resolve_inside",
    "unknown_entry_fields",
    "validate_artifact_contract",
    "verify_artifact_contract",
]


class ExpectedArtifact(TypedDict, total=False):
    id: str
    path: str
    required: bool
    description: str
    source: str
    checks: dict[str, Any]


class MissingArtifact(ExpectedArtifact, total=False):
    """An expected entry that verification did not count as produced, and why.

    ``problem`` is one of ``ARTIFACT_PROBLEMS`` (beyond the ADR, which only says
    "missing"): a file that exists but is empty is not reported as absent.
    """

    problem: str


class ProducedArtifact(TypedDict):
    id: str
    path: str
    size: int
    present: bool


class InvalidArtifact(TypedDict):
    """A produced file that failed a content check (artifact_checks): each failed
    ``check`` with what was ``found``."""

    id: str
    path: str
    size: int
    required: bool
    failures: list[dict[str, str]]


class ArtifactContract(TypedDict):
    expected: list[ExpectedArtifact]


class VerificationResult(TypedDict):
    status: Literal["passed", "failed", "warning", "skipped"]
    checked_at: float
    missing_required: list[MissingArtifact]
    missing_optional: list[MissingArtifact]
    produced: list[ProducedArtifact]
    invalid: NotRequired[list[InvalidArtifact]]


class ArtifactContractError(ValidationError):
    """An artifact contract is malformed; the message names the entry and the broken rule."""


class ArtifactPathError(ArtifactContractError):
    """An artifact path is unsafe (absolute, ``..``, glob, NUL) or escapes the artifact root.

    Declare the path relative to the artifact root, e.g. ``reports/summary.md``.
    """


KNOWN_ENTRY_FIELDS = frozenset({"id", "path", "required", "description", "source", "checks"})
_ID_PATTERN = re.compile(r"[A-Za-z0-9_-]+")
_GLOB_CHARS = frozenset("*?[]{}")
_OPTIONAL_TYPES: tuple[tuple[str, type], ...] = (
    ("required", bool),
    ("description", str),
    ("source", str),
)

# Why a declared artifact did not count as produced (a MissingArtifact's ``problem``).
ARTIFACT_PROBLEMS: dict[str, str] = {
    "missing": "does not exist",
    "empty": "is an empty file",
    "directory": "is a directory, not a file",
    "not_a_file": "is not a regular file (a FIFO, socket or device)",
    "broken_symlink": "is a symlink to nothing",
    "outside_root": "is a symlink leading outside the artifact root",
    "symlink_loop": "has too many levels of symbolic links",
}


# --- validation -------------------------------------------------------------------------------


def _label(index: int, entry: object) -> str:
    label = f"artifact contract entry {index}"
    if isinstance(entry, Mapping) and "id" in entry:
        label += f" (id={entry['id']!r}"
        source = entry.get("source")
        label += f", source={source!r})" if isinstance(source, str) else ")"
    return label


def check_artifact_path(path: object, where: str = "artifact path") -> str:
    """Return ``path`` if it is a safe relative artifact path, else raise ArtifactPathError."""
    if not isinstance(path, str) or not path.strip():
        raise ArtifactContractError(f"{where}: path must be a non-empty string, got {path!r}")
    problem = _path_problem(path)
    if problem:
        raise ArtifactPathError(f"{where}: path {path!r} {problem}")
    return path


def _path_problem(path: str) -> str | None:
    if "\x00" in path:
        return "contains a NUL character"
    if PurePosixPath(path).is_absolute() or PureWindowsPath(path).anchor:
        return "is absolute; declare it relative to the artifact root"
    if path.startswith("~"):
        return "starts with '~'; declare it relative to the artifact root"
    if "\\" in path:
        return "contains a backslash; separate directories with '/'"
    if _GLOB_CHARS.intersection(path):
        return "contains a glob character (one of * ? [ ] { }); name one file exactly"
    parts = path.split("/")
    if ".." in parts:
        return "contains a '..' segment; it must stay inside the artifact root"
    if all(part in ("", ".") for part in parts):
        return "names the artifact root itself, not a file inside it"
    try:
        os.fsencode(path)
    except UnicodeError:
        return "cannot be encoded as a file name on this system"
    return None


def _check_entry(index: int, entry: object, seen: set[str]) -> None:
    label = _label(index, entry)
    if not isinstance(entry, Mapping):
        raise ArtifactContractError(f"{label} must be a mapping, got {type(entry).__name__}")
    ident = entry.get("id")
    if not isinstance(ident, str) or not _ID_PATTERN.fullmatch(ident):
        raise ArtifactContractError(
            f"{label}: id must be a non-empty string of A-Z a-z 0-9 _ -, got {ident!r}"
        )
    if ident in seen:
        raise ArtifactContractError(f"{label}: duplicate id {ident!r}")
    seen.add(ident)
    for field, kind in _OPTIONAL_TYPES:
        if field in entry and not isinstance(entry[field], kind):
            raise ArtifactContractError(
                f"{label}: {field} must be a {kind.__name__}, got {entry[field]!r}"
            )
    check_artifact_path(entry.get("path"), label)


def _check_checks(index: int, entry: Mapping[str, Any]) -> None:
    """Strict only: a check that is misspelt or malformed would otherwise never run."""
    if "checks" in entry:
        problems = check_problems(entry["checks"])
        if problems:
            raise ArtifactContractError(f"{_label(index, entry)}: {problems[0][1]}")


def _expected_list(contract: object) -> list[Any]:
    if not isinstance(contract, Mapping):
        raise ArtifactContractError(
            f"artifact contract must be a mapping with an 'expected' list, "
            f"got {type(contract).__name__}"
        )
    expected = contract.get("expected")
    if not isinstance(expected, list):
        raise ArtifactContractError(
            f"artifact contract 'expected' must be a list, got {type(expected).__name__}"
        )
    return expected


def unknown_entry_fields(entry: Mapping[str, Any]) -> list[str]:
    """The keys of one contract entry that v1 does not know, in the entry's order."""
    return [str(key) for key in entry if key not in KNOWN_ENTRY_FIELDS]


def unknown_field_message(label: str, field: str) -> str:
    """``<label>: unknown field 'requird' (did you mean 'required'?); allowed: ...``."""

    close = difflib.get_close_matches(field, sorted(KNOWN_ENTRY_FIELDS), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return (
        f"{label}: unknown field {field!r}{hint}; allowed: {', '.join(sorted(KNOWN_ENTRY_FIELDS))}"
    )


def validate_artifact_contract(contract: Mapping[str, Any] | None, *, strict: bool = False) -> None:
    """Raise ArtifactContractError / ArtifactPathError unless ``contract`` is None or valid.

    Unknown fields inside an entry: with ``strict=False`` (the default, the ADR's rule)
    they are allowed here and ``contract_warnings`` reports them; with ``strict=True``
    they are refused, because a typo such as ``requird: false`` silently changes what the
    contract means. Declarations are checked strictly where they are read (profiles,
    playbooks, ``--artifact``) before anything starts; a contract already snapshotted on
    a row is verified leniently, so a finished run is never lost to the stricter rule.
    """
    if contract is None:
        return
    seen: set[str] = set()
    for index, entry in enumerate(_expected_list(contract)):
        _check_entry(index, entry, seen)
        if strict and isinstance(entry, Mapping):
            unknown = unknown_entry_fields(entry)
            if unknown:
                raise ArtifactContractError(unknown_field_message(_label(index, entry), unknown[0]))
            _check_checks(index, entry)


def contract_warnings(contract: Mapping[str, Any] | None) -> list[str]:
    """Human-readable notes on fields v1 does not recognize. Never raises."""
    if not isinstance(contract, Mapping):
        return []
    notes = [
        f"artifact contract: unknown top-level field {key!r} is ignored"
        for key in contract
        if key != "expected"
    ]
    expected = contract.get("expected")
    for index, entry in enumerate(expected if isinstance(expected, list) else []):
        if isinstance(entry, Mapping):
            notes.extend(
                f"{_label(index, entry)}: unknown field {key!r} is ignored"
                for key in entry
                if key not in KNOWN_ENTRY_FIELDS
            )
    return notes


# --- resolution -------------------------------------------------------------------------------


def _entries(declared: object, source: str) -> list[Any]:
    if declared is None:
        return []
    if isinstance(declared, list | tuple):
        return list(declared)
    if isinstance(declared, Mapping) and "expected" in declared:
        expected = declared["expected"]
        if isinstance(expected, list | tuple):
            return list(expected)
    raise ArtifactContractError(
        f"{source} artifacts must be a list of entries or a mapping with an 'expected' list, "
        f"got {declared!r}"
    )


def resolve_artifact_contract(
    *,
    playbook_artifacts: Mapping[str, Any] | list[Any] | None,
    agent_defaults: Mapping[str, Any] | list[Any] | None,
    strict: bool = False,
) -> ArtifactContract | None:
    """Overlay playbook entries on agent-profile defaults by id, then validate
    (``strict`` as in ``validate_artifact_contract``).

    A later entry with the same id replaces the earlier one but keeps its position.
    """
    if playbook_artifacts is None and agent_defaults is None:
        return None
    merged: dict[str, ExpectedArtifact] = {}
    for source, declared in (("agent_profile", agent_defaults), ("playbook", playbook_artifacts)):
        for index, raw in enumerate(_entries(declared, source)):
            if not isinstance(raw, Mapping) or not isinstance(raw.get("id"), str):
                raise ArtifactContractError(
                    f"{source} artifact entry {index} must be a mapping with a string id, "
                    f"got {raw!r}"
                )
            merged[raw["id"]] = _materialize(raw, source)
    contract: ArtifactContract = {"expected": list(merged.values())}
    validate_artifact_contract(contract, strict=strict)
    for entry in contract["expected"]:
        _load_schema_of(entry)
    return contract


def _load_schema_of(entry: ExpectedArtifact) -> None:
    """The ``json_schema`` file is read and checked now, before any work starts; a
    relative path is made absolute (against the current directory) so teardown finds it."""
    checks = entry.get("checks")
    path = checks.get("json_schema") if isinstance(checks, Mapping) else None
    if not isinstance(path, str):
        return
    absolute = os.path.abspath(os.path.expanduser(path))
    try:
        load_json_schema(absolute)
    except SchemaFileError as exc:
        raise ArtifactContractError(
            f"artifact {entry.get('id')!r}: checks.json_schema: {exc}"
        ) from None
    entry["checks"] = {**checks, "json_schema": absolute}  # type: ignore[dict-item]


def _materialize(raw: Mapping[str, Any], source: str) -> ExpectedArtifact:
    entry: dict[str, Any] = {
        **raw,
        "required": raw.get("required", True),
        "description": raw.get("description", ""),
        "source": source,
    }
    return entry  # type: ignore[return-value]


def resolve_inside(root: str | os.PathLike[str], rel: str) -> Path:
    """The physical path of ``rel`` under ``root``; ArtifactPathError if it would escape.

    The path need not exist. Symlinks inside the root are followed while they stay inside.
    """
    check_artifact_path(rel)
    real_root = Path(root).expanduser().resolve()
    try:
        return walk_inside(real_root, rel, root_aliases(root, real_root))[0]
    except Unresolvable as exc:
        raise ArtifactPathError(f"artifact path {rel!r} {exc}") from None


# --- verification -----------------------------------------------------------------------------


def _inspect(
    root: Path | None, rel: str, aliases: tuple[tuple[str, ...], ...]
) -> tuple[int | None, str | None]:
    """(size, None) for a non-empty regular file inside the root, else (None, problem)."""
    if root is None:
        return None, "missing"  # no artifact root: nothing was produced in it
    try:
        _, st = walk_inside(root, rel, aliases)
    except Unresolvable as exc:
        return None, "symlink_loop" if "levels" in str(exc) else "outside_root"
    except OSError:
        return None, "missing"
    if st is None:
        # Nothing there; a symlink whose target is absent is reported as such (every
        # component on the way was resolved inside the root by _walk).
        link = lstat_or_none(root / rel)
        return None, "broken_symlink" if link and stat.S_ISLNK(link.st_mode) else "missing"
    if stat.S_ISDIR(st.st_mode):
        return None, "directory"
    if not stat.S_ISREG(st.st_mode):
        return None, "not_a_file"
    if st.st_size <= 0:
        return None, "empty"
    return st.st_size, None


def describe_problem(problem: object) -> str:
    """A short phrase for a MissingArtifact's ``problem`` (``missing`` when unknown)."""
    return ARTIFACT_PROBLEMS.get(str(problem), ARTIFACT_PROBLEMS["missing"])


def _usable_root(artifacts_root: str | os.PathLike[str] | None) -> Path | None:
    if artifacts_root is None or os.fspath(artifacts_root) == "":
        return None
    try:
        root = Path(artifacts_root).expanduser().resolve(strict=True)
    except (OSError, RuntimeError, ValueError):
        return None
    return root if root.is_dir() else None


def verify_artifact_contract(
    contract: Mapping[str, Any] | None,
    *,
    artifacts_root: str | os.PathLike[str] | None,
) -> VerificationResult | None:
    """Check each expected path is a non-empty regular file inside the root.

    ``None`` without a contract. Anything else is not produced and lands in
    ``missing_required`` / ``missing_optional`` (the ADR's keys) with a ``problem``
    saying what is there instead: ``missing``, ``empty``, ``directory``, ``not_a_file``,
    ``broken_symlink``, ``outside_root`` or ``symlink_loop`` (``ARTIFACT_PROBLEMS``); with
    no usable artifact root every entry is ``missing``. Nothing outside the root is ever stat'ed.
    A file that is there but fails one of its entry's ``checks`` (artifact_checks) lands
    in ``invalid`` instead, with each failed check and what was found.
    """
    if contract is None:
        return None
    validate_artifact_contract(contract)
    root = _usable_root(artifacts_root)
    aliases = root_aliases(artifacts_root, root) if root is not None and artifacts_root else ()
    missing_required: list[MissingArtifact] = []
    missing_optional: list[MissingArtifact] = []
    produced: list[ProducedArtifact] = []
    invalid: list[InvalidArtifact] = []
    for entry in contract["expected"]:
        size, problem = _inspect(root, entry["path"], aliases)
        if size is not None and root is not None:
            failures = _content_failures(root, entry, size, aliases)
            if failures:
                invalid.append(_invalid(entry, size, failures))
            else:
                produced.append(
                    {"id": entry["id"], "path": entry["path"], "size": size, "present": True}
                )
            continue
        missing: MissingArtifact = {**entry, "problem": problem or "missing"}
        if entry.get("required", True):
            missing_required.append(missing)
        else:
            missing_optional.append(missing)
    invalid_required = any(item["required"] for item in invalid)
    status: Literal["passed", "failed", "warning"] = (
        "failed"
        if missing_required or invalid_required
        else "warning"
        if missing_optional or invalid
        else "passed"
    )
    result: VerificationResult = {
        "status": status,
        "checked_at": time.time(),
        "missing_required": missing_required,
        "missing_optional": missing_optional,
        "produced": produced,
    }
    if invalid:
        result["invalid"] = invalid
    return result


def _content_failures(
    root: Path, entry: ExpectedArtifact, size: int, aliases: tuple[tuple[str, ...], ...]
) -> list[CheckFailure]:
    """The entry's ``checks`` the file fails. A snapshot is verified leniently, so a
    malformed check fails as ``checks`` instead of stopping the teardown."""
    checks = entry.get("checks")
    if not checks:
        return []
    problems = check_problems(checks)
    if problems:
        return [CheckFailure("checks", message) for _, message in problems]
    try:
        path = walk_inside(root, entry["path"], aliases)[0]
    except Unresolvable as exc:  # changed since _inspect looked
        return [CheckFailure("checks", f"the file {exc}")]
    return run_checks(path, size, checks)


def _invalid(entry: ExpectedArtifact, size: int, failures: list[CheckFailure]) -> InvalidArtifact:
    return {
        "id": entry["id"],
        "path": entry["path"],
        "size": size,
        "required": bool(entry.get("required", True)),
        "failures": [{"check": f.check, "found": f.found} for f in failures],
    }

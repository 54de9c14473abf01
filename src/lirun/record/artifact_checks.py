"""Content checks on a declared artifact, beyond "a non-empty regular file" (docs/outcome.md).

An entry's ``checks:`` mapping names what the file must contain: ``min_bytes``,
``max_bytes``, ``sha256``, ``matches`` (a regular expression searched in the text),
``json: true``, ``json_schema: PATH`` (validated with the ``jsonschema`` library, the
``checks`` extra) and ``lines: {min, max}``. ``check_problems`` is the pure shape check
(unknown names and wrong values, each with the key it belongs to, so a file can name
the line); ``load_json_schema`` reads and checks a schema file when the contract is
resolved, before the work starts; ``run_checks`` reads a produced file once the work is
done and says, per failed check, what it found.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lirun.inputfile import InputFileError, read_bounded

__all__ = [
    "CHECK_NAMES",
    "MAX_CONTENT_BYTES",
    "MAX_SCHEMA_BYTES",
    "CheckFailure",
    "SchemaFileError",
    "check_problems",
    "load_json_schema",
    "resolve_schema_path",
    "run_checks",
]

CHECK_NAMES = frozenset(
    {"min_bytes", "max_bytes", "sha256", "matches", "json", "json_schema", "lines"}
)
_LINES_KEYS = frozenset({"min", "max"})
_SHA256 = re.compile(r"[0-9a-f]{64}")
# Checks that need the whole text in memory read at most this much; a larger file fails
# them, saying so (sha256, lines and the byte bounds stream and have no cap).
MAX_CONTENT_BYTES = 64 * 1024 * 1024
_CHUNK = 1024 * 1024
# A JSON Schema is read whole, at contract time and again by each teardown that checks.
MAX_SCHEMA_BYTES = 4 * 1024 * 1024
_CONTENT_CHECKS = ("matches", "json", "json_schema")


@dataclass(frozen=True, slots=True)
class CheckFailure:
    """One check a produced file did not pass: which, and what was found instead."""

    check: str
    found: str


class SchemaFileError(ValueError):
    """A ``json_schema:`` file cannot be used: unreadable, not JSON, not a valid schema,
    or the ``jsonschema`` library is not installed (``pip install 'lirun[checks]'``)."""


# --- shape (pure) ---------------------------------------------------------------------------


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _value_problem(name: str, value: object) -> str | None:
    if name in ("min_bytes", "max_bytes"):
        return None if _count(value) else f"must be a whole number of bytes >= 0, got {value!r}"
    if name == "sha256":
        digits = isinstance(value, str) and _SHA256.fullmatch(value.lower()) is not None
        return None if digits else f"must be 64 hexadecimal digits, got {value!r}"
    if name == "matches":
        if not isinstance(value, str) or not value:
            return f"must be a non-empty regular expression, got {value!r}"
        try:
            re.compile(value)
        except re.error as exc:
            return f"is not a valid regular expression ({exc})"
        return None
    if name == "json":
        return None if value is True else f"must be true (leave it out to skip), got {value!r}"
    if name == "json_schema":
        named = isinstance(value, str) and bool(value.strip())
        return None if named else f"must be the path of a JSON Schema file, got {value!r}"
    return _lines_problem(value)


def _lines_problem(value: object) -> str | None:
    if not isinstance(value, Mapping) or not value:
        return f"must be a mapping with min and/or max, got {value!r}"
    for key in value:
        if key not in _LINES_KEYS:
            return f"has unknown key {key!r} (allowed: max, min)"
        if not _count(value[key]):
            return f"{key} must be a whole number >= 0, got {value[key]!r}"
    low, high = value.get("min"), value.get("max")
    if low is not None and high is not None and low > high:
        return f"min {low} is more than max {high}"
    return None


def check_problems(checks: object) -> list[tuple[str | None, str]]:
    """Every problem with a ``checks:`` mapping as ``(key, message)``; ``key`` is the
    check the problem is at (None: the mapping itself), so a file can name its line."""
    if not isinstance(checks, Mapping):
        return [(None, f"checks must be a mapping of check names, got {checks!r}")]
    found: list[tuple[str | None, str]] = []
    for name, value in checks.items():
        if name not in CHECK_NAMES:
            close = difflib.get_close_matches(str(name), sorted(CHECK_NAMES), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            allowed = ", ".join(sorted(CHECK_NAMES))
            found.append((str(name), f"unknown check {name!r}{hint}; allowed: {allowed}"))
            continue
        problem = _value_problem(name, value)
        if problem:
            found.append((name, f"checks.{name} {problem}"))
    low, high = checks.get("min_bytes"), checks.get("max_bytes")
    if _count(low) and _count(high) and low > high:  # type: ignore[operator]
        found.append(("max_bytes", f"checks.min_bytes {low} is more than max_bytes {high}"))
    return found


# --- the schema file (resolution time) --------------------------------------------------------


def resolve_schema_path(value: str, base: str | os.PathLike[str]) -> str:
    """``value`` made absolute against ``base`` (the declaring file's directory, or the
    directory ``li`` was started in for ``--artifact-check``)."""
    return os.path.abspath(os.path.join(os.fspath(base), os.path.expanduser(value)))


def load_json_schema(path: str) -> dict[str, Any] | bool:
    """The schema in ``path``, checked against its metaschema; SchemaFileError if not usable
    (also when it is not a regular file, or is over MAX_SCHEMA_BYTES: ``/dev/zero`` would
    be read until memory ran out, a FIFO would wait forever for a writer)."""
    try:
        import jsonschema
    except ImportError:
        raise SchemaFileError(
            "json_schema needs the jsonschema library: pip install 'lirun[checks]'"
        ) from None
    try:
        schema = json.loads(read_bounded(path, MAX_SCHEMA_BYTES).decode("utf-8"))
    except InputFileError as exc:
        raise SchemaFileError(f"cannot read the schema {path}: {exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise SchemaFileError(f"the schema {path} is not JSON: {exc}") from None
    if not isinstance(schema, dict | bool):
        raise SchemaFileError(f"the schema {path} is not a JSON object")
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise SchemaFileError(
            f"the schema {path} is not a valid JSON Schema: {exc.message}"
        ) from None
    return schema


# --- running the checks (teardown time) -------------------------------------------------------


def _stream(path: Path, checks: Mapping[str, Any]) -> tuple[str, int]:
    """(sha256 hex, line count) in one pass over the file."""
    digest = hashlib.sha256()
    newlines, last = 0, b""
    with open(path, "rb") as file:
        while chunk := file.read(_CHUNK):
            digest.update(chunk)
            newlines += chunk.count(b"\n")
            last = chunk[-1:]
    lines = newlines + (1 if last not in (b"", b"\n") else 0)
    return digest.hexdigest(), lines


def _size_failures(size: int, checks: Mapping[str, Any]) -> list[CheckFailure]:
    found = []
    low, high = checks.get("min_bytes"), checks.get("max_bytes")
    if low is not None and size < low:
        found.append(CheckFailure("min_bytes", f"{size} bytes, fewer than min_bytes {low}"))
    if high is not None and size > high:
        found.append(CheckFailure("max_bytes", f"{size} bytes, more than max_bytes {high}"))
    return found


def _stream_failures(path: Path, checks: Mapping[str, Any]) -> list[CheckFailure]:
    if "sha256" not in checks and "lines" not in checks:
        return []
    digest, lines = _stream(path, checks)
    found = []
    expected = checks.get("sha256")
    if isinstance(expected, str) and digest != expected.lower():
        found.append(CheckFailure("sha256", f"sha256 {digest}, expected {expected.lower()}"))
    bounds = checks.get("lines")
    if isinstance(bounds, Mapping):
        low, high = bounds.get("min"), bounds.get("max")
        if low is not None and lines < low:
            found.append(CheckFailure("lines", f"{lines} lines, fewer than lines.min {low}"))
        if high is not None and lines > high:
            found.append(CheckFailure("lines", f"{lines} lines, more than lines.max {high}"))
    return found


def _schema_failure(document: object, schema_path: str) -> CheckFailure | None:
    try:
        schema = load_json_schema(schema_path)
    except SchemaFileError as exc:
        return CheckFailure("json_schema", str(exc))
    import jsonschema  # the checks extra; load_json_schema above said if it is missing

    validator = jsonschema.validators.validator_for(schema)(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is None:
        return None
    return CheckFailure("json_schema", f"{error.json_path}: {error.message}")


def _content_failures(path: Path, size: int, checks: Mapping[str, Any]) -> list[CheckFailure]:
    wanted = [name for name in _CONTENT_CHECKS if name in checks]
    if not wanted:
        return []
    if size > MAX_CONTENT_BYTES:
        big = f"{size} bytes; content checks read at most {MAX_CONTENT_BYTES} bytes"
        return [CheckFailure(name, big) for name in wanted]
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [
            CheckFailure(name, f"not UTF-8 text ({exc.reason} at byte {exc.start})")
            for name in wanted
        ]
    found: list[CheckFailure] = []
    pattern = checks.get("matches")
    if isinstance(pattern, str) and re.search(pattern, text, re.MULTILINE) is None:
        found.append(CheckFailure("matches", f"no match for {pattern!r}"))
    if "json" in checks or "json_schema" in checks:
        try:
            document = json.loads(text)
        except ValueError as exc:
            failed = [CheckFailure(name, f"not JSON: {exc}") for name in ("json", "json_schema")]
            return [*found, *(f for f in failed if f.check in checks)]
        schema_path = checks.get("json_schema")
        if isinstance(schema_path, str):
            failure = _schema_failure(document, schema_path)
            found.extend([failure] if failure else [])
    return found


def run_checks(path: Path, size: int, checks: Mapping[str, Any]) -> list[CheckFailure]:
    """Every check of ``checks`` that the regular file ``path`` (``size`` bytes) fails,
    in the order size, digest and lines, then content. A file that cannot be read fails
    every check with the reason."""
    try:
        return [
            *_size_failures(size, checks),
            *_stream_failures(path, checks),
            *_content_failures(path, size, checks),
        ]
    except OSError as exc:
        return [
            CheckFailure(str(name), f"cannot read the file: {exc.strerror or exc}")
            for name in checks
        ]

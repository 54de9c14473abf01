"""``--artifact-check ID.CHECK=VALUE``: content checks on an ``--artifact`` from the command line.

One option per check, so a regular expression or a path never has to be quoted inside
another syntax: ``--artifact report=out/r.json --artifact-check report.json_schema=r.schema.json
--artifact-check 'report.matches=^# Summary' --artifact-check report.lines=1..200``.
``json`` takes no value (``report.json``); ``lines`` takes ``MIN..MAX`` with either side
left out; a relative ``json_schema`` is read from the directory ``li`` was started in
(a schedule's action: its base directory) and checked now, before anything starts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lirun.errors import UsageError
from lirun.record.artifact_checks import (
    CHECK_NAMES,
    SchemaFileError,
    check_problems,
    load_json_schema,
    resolve_schema_path,
)

__all__ = ["attach_artifact_checks", "parse_artifact_check"]

_COUNTS = frozenset({"min_bytes", "max_bytes"})
_EXAMPLE = "e.g. --artifact-check report.min_bytes=100"


def _count(option: str, value: str) -> int:
    if not value.isdigit():
        raise UsageError(f"{option}: expected a whole number >= 0, got {value!r}")
    return int(value)


def _lines(option: str, value: str) -> dict[str, int]:
    low, sep, high = value.partition("..")
    if not sep or not (low or high):
        raise UsageError(f"{option}: expected MIN..MAX (either may be left out), got {value!r}")
    bounds = {"min": low, "max": high}
    return {key: _count(option, text) for key, text in bounds.items() if text}


def _value(option: str, name: str, value: str | None, base: str) -> Any:
    if name == "json":
        if value not in (None, "true"):
            raise UsageError(f"{option}: json takes no value (give ID.json), got {value!r}")
        return True
    if value is None or value == "":
        raise UsageError(f"{option}: {name} needs a value ({_EXAMPLE})")
    if name in _COUNTS:
        return _count(option, value)
    if name == "lines":
        return _lines(option, value)
    if name == "json_schema":
        return resolve_schema_path(value, base)
    return value


def parse_artifact_check(text: str, base: str) -> tuple[str, str, Any]:
    """``ID.CHECK=VALUE`` (``ID.json`` alone) as ``(id, check, value)``; UsageError (exit 2)."""
    option = f"--artifact-check {text!r}"
    target, eq, value = text.partition("=")
    ident, dot, name = target.partition(".")
    if not (ident and dot and name):
        raise UsageError(f"{option}: expected ID.CHECK=VALUE ({_EXAMPLE})")
    if name not in CHECK_NAMES:
        problem = check_problems({name: None})[0][1]
        raise UsageError(f"{option}: {problem}")
    return ident, name, _value(option, name, value if eq else None, base)


def _grouped(texts: Iterable[str], base: str) -> dict[str, dict[str, Any]]:
    grouped: dict[str, dict[str, Any]] = {}
    for text in texts:
        ident, name, value = parse_artifact_check(text, base)
        checks = grouped.setdefault(ident, {})
        if name in checks:
            raise UsageError(f"--artifact-check {ident}.{name} is given twice; give it once")
        checks[name] = value
    return grouped


def _checked(ident: str, checks: dict[str, Any]) -> dict[str, Any]:
    problems = check_problems(checks)
    if problems:
        raise UsageError(f"--artifact-check {ident}: {problems[0][1]}")
    schema = checks.get("json_schema")
    if isinstance(schema, str):
        try:
            load_json_schema(schema)
        except SchemaFileError as exc:
            raise UsageError(f"--artifact-check {ident}.json_schema: {exc}") from None
    return checks


def attach_artifact_checks(
    entries: Sequence[Mapping[str, Any]], texts: Iterable[str], base: str
) -> list[dict[str, Any]]:
    """``entries`` (from ``--artifact``) with the checks ``texts`` give each; a check on
    an id no ``--artifact`` declares is refused rather than dropped."""
    grouped = _grouped(texts, base)
    declared = {str(entry["id"]) for entry in entries}
    for ident in grouped:
        if ident not in declared:
            raise UsageError(
                f"--artifact-check {ident}.…: no --artifact {ident}=PATH is given; declare "
                "the artifact on the same command line"
            )
    return [
        {**entry, "checks": _checked(str(entry["id"]), grouped[str(entry["id"])])}
        if str(entry["id"]) in grouped
        else dict(entry)
        for entry in entries
    ]

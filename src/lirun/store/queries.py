"""Load the named queries of one dialect (``sql/common/``, written once for both, and
``sql/<dialect>/``, what differs) and its migrations, and check what fills the identifier
slots of the few templates among them."""

from __future__ import annotations

import os
from functools import cache, lru_cache

from lirun.hints import TYPE_CHECKING
from lirun.lifecycle import POLICIES

if TYPE_CHECKING:
    from collections.abc import Mapping

# Plain strings and os.path, not re, pathlib or importlib.resources: every `li` command
# loads queries on start-up, and those imports alone cost more than the reading.
DIALECTS = ("sqlite", "postgres")
COMMON = "common"  # the queries every dialect runs as they are
_NAME_FIRST = frozenset("abcdefghijklmnopqrstuvwxyz_")
_NAME_REST = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


class QueryFilesError(RuntimeError):
    """The packaged SQL files disagree (a name defined twice, or in one dialect only): a
    bug in lirun or a damaged install, never the user's doing. Reinstall or report it."""


def _sql_dir(name: str) -> str:
    """``sql/<name>``: a dialect, or ``common``."""
    return os.path.join(os.path.dirname(os.path.realpath(__file__)), "sql", name)


def _header_name(line: str) -> str | None:
    """``X`` of a ``-- name: X`` line (``[a-z_][a-z0-9_]*``), else None."""
    if not line.startswith("--"):
        return None
    rest = line[2:].lstrip()
    if not rest.startswith("name:"):
        return None
    name = rest[len("name:") :].strip()
    ok = name and name[0] in _NAME_FIRST and all(c in _NAME_REST for c in name)
    return name if ok and " " not in rest[len("name:") :].strip() else None


def _migration_name(filename: str) -> tuple[int, str] | None:
    """``(version, name)`` of ``NNNN_name.sql`` (name ``[a-z0-9_]+``), else None."""
    stem = filename.removesuffix(".sql")
    digits, sep, name = stem.partition("_")
    if stem == filename or not sep or len(digits) != 4 or not digits.isascii():
        return None
    if not digits.isdigit() or not name or not all(c in _NAME_REST for c in name):
        return None
    return int(digits), name


def parse_queries(text: str) -> dict[str, str]:
    """Split a queries file on ``-- name: X`` headers; full-line comments are dropped."""
    queries: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        header = _header_name(line.strip())
        if header is not None:
            current = queries.setdefault(header, [])
        elif current is not None and not line.lstrip().startswith("--"):
            current.append(line)
    return {name: "\n".join(body).strip() for name, body in queries.items()}


@lru_cache(maxsize=512)
def to_pyformat(sql: str) -> str:
    """``:name`` → ``%(name)s`` for psycopg (a literal ``%`` is doubled first)."""
    import re  # PostgreSQL only

    return re.sub(r"(?<![:\w]):([A-Za-z_][A-Za-z0-9_]*)", r"%(\1)s", sql.replace("%", "%%"))


_TABLES = frozenset(p.table for p in POLICIES.values())


# The slots of the templates in queries.sql, and how each item of their ``, ``-joined list
# is built: ``name`` (columns), ``:name`` (values), ``name = :name`` (assignments) or
# ``name = :x_name`` (extra_set).
def _is_name(text: str) -> bool:
    return bool(text) and text[0] in _NAME_FIRST and all(c in _NAME_REST for c in text)


def _assigned(item: str, prefix: str) -> bool:
    name, sep, value = item.partition(" = :")
    return bool(sep) and _is_name(name) and value == prefix + name


_SLOT_ITEM = {
    "columns": _is_name,
    "values": lambda item: item.startswith(":") and _is_name(item[1:]),
    "assignments": lambda item: _assigned(item, ""),
    "extra_set": lambda item: _assigned(item, "x_"),
}


def check_slots(slots: Mapping[str, str]) -> Mapping[str, str]:
    """Why ``str.format`` on SQL is safe here: a slot holds a table of the closed
    registry (``lifecycle.POLICIES``) or a list of plain column names that
    ``records.closed_fields`` has already checked against the closed sets of the entity
    type; never a value, never caller text. Anything else is a bug, refused here."""
    for slot, text in slots.items():
        if slot == "table":
            ok = text in _TABLES
        else:
            items = text.removeprefix(", ").split(", ") if text else []
            ok = slot in _SLOT_ITEM and all(_SLOT_ITEM[slot](i) for i in items)
        if not ok:
            raise ValueError(f"SQL slot {slot}={text!r} is not a known identifier list")
    return slots


def _read_queries(directory: str) -> dict[str, str]:
    """Every named query of ``directory/*.sql`` (one file per concern)."""
    queries: dict[str, str] = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(".sql"):
            with open(os.path.join(directory, name), encoding="utf-8") as file:
                found = parse_queries(file.read())
            duplicated = found.keys() & queries.keys()
            if duplicated:
                raise QueryFilesError(f"query names defined twice: {sorted(duplicated)}")
            queries.update(found)
    return queries


def _query_names(directory: str) -> set[str]:
    """The query names of ``directory/*.sql``, from the header lines alone."""
    names = set()
    for name in os.listdir(directory):
        if name.endswith(".sql"):
            with open(os.path.join(directory, name), encoding="utf-8") as file:
                for line in file:
                    if "name:" in line and (header := _header_name(line.strip())):
                        names.add(header)
    return names


def check_dialect_names(common: set[str], dialects: Mapping[str, set[str]]) -> None:
    """Each name is either in ``common`` or in every dialect, never in both: a dialect
    that lacks a query would fail only when that query runs."""
    for dialect, names in dialects.items():
        if both := names & common:
            raise QueryFilesError(f"in {COMMON}/ and in {dialect}/: {sorted(both)}")
    every = set().union(*dialects.values())
    for dialect, names in dialects.items():
        if missing := every - names:
            raise QueryFilesError(
                f"{dialect}/ lacks queries other dialects define: {sorted(missing)}"
            )


@cache
def load_queries(dialect: str) -> dict[str, str]:
    """Every named query of ``dialect``: ``sql/common/*.sql`` and ``sql/<dialect>/*.sql``.
    The other dialects' names are read too (headers only), so a query one of them lacks
    fails every start, not the one run that needs it."""
    common = _read_queries(_sql_dir(COMMON))
    own = _read_queries(_sql_dir(dialect))
    names = {d: set(own) if d == dialect else _query_names(_sql_dir(d)) for d in DIALECTS}
    check_dialect_names(set(common), names)
    return common | own


@cache
def load_migrations(dialect: str) -> tuple[tuple[int, str, str], ...]:
    """``(version, name, sql)`` for every ``NNNN_name.sql`` file, in version order."""
    found = []
    directory = os.path.join(_sql_dir(dialect), "migrations")
    for filename in os.listdir(directory):
        parsed = _migration_name(filename)
        if parsed is not None:
            with open(os.path.join(directory, filename), encoding="utf-8") as file:
                found.append((*parsed, file.read()))
    return tuple(sorted(found))


@cache
def latest_version(dialect: str) -> int:
    """The newest migration's version, from the file names alone (every open asks)."""
    directory = os.path.join(_sql_dir(dialect), "migrations")
    versions = [p[0] for p in map(_migration_name, os.listdir(directory)) if p is not None]
    return max(versions, default=0)

"""Load the named queries and the migrations of one dialect from ``sql/<dialect>/``, and
check what fills the identifier slots of the few templates among them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache, lru_cache
from pathlib import Path

from lirun.lifecycle import POLICIES

_HEADER = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$")
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_][A-Za-z0-9_]*)")

DIALECTS = ("sqlite", "postgres")


def _sql_dir(dialect: str) -> Path:
    # A plain path, not importlib.resources: that import alone costs `li wait` ~3 ms.
    return Path(__file__).resolve().parent / "sql" / dialect


def parse_queries(text: str) -> dict[str, str]:
    """Split a queries file on ``-- name: X`` headers; full-line comments are dropped."""
    queries: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        header = _HEADER.match(line.strip())
        if header:
            current = queries.setdefault(header.group(1), [])
        elif current is not None and not line.lstrip().startswith("--"):
            current.append(line)
    return {name: "\n".join(body).strip() for name, body in queries.items()}


@lru_cache(maxsize=512)
def to_pyformat(sql: str) -> str:
    """``:name`` → ``%(name)s`` for psycopg (a literal ``%`` is doubled first)."""
    return _PARAM.sub(r"%(\1)s", sql.replace("%", "%%"))


_TABLES = frozenset(p.table for p in POLICIES.values())
# The slots of the templates in queries.sql, and how each is built: ``, ``-joined
# ``name`` (columns), ``:name`` (values) or ``name = :name`` (assignments, extra_set).
_SLOT_ITEM = {
    "columns": re.compile(r"(?P<n>[a-z_][a-z0-9_]*)"),
    "values": re.compile(r":(?P<n>[a-z_][a-z0-9_]*)"),
    "assignments": re.compile(r"(?P<n>[a-z_][a-z0-9_]*) = :(?P=n)"),
    "extra_set": re.compile(r"(?P<n>[a-z_][a-z0-9_]*) = :x_(?P=n)"),
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
            ok = slot in _SLOT_ITEM and all(_SLOT_ITEM[slot].fullmatch(i) for i in items)
        if not ok:
            raise ValueError(f"SQL slot {slot}={text!r} is not a known identifier list")
    return slots


@cache
def load_queries(dialect: str) -> dict[str, str]:
    """Every named query of ``sql/<dialect>/*.sql`` (one file per concern)."""
    queries: dict[str, str] = {}
    for entry in sorted(_sql_dir(dialect).iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            found = parse_queries(entry.read_text(encoding="utf-8"))
            duplicated = set(found) & set(queries)
            if duplicated:
                raise RuntimeError(f"query names defined twice: {sorted(duplicated)}")
            queries.update(found)
    return queries


@cache
def load_migrations(dialect: str) -> tuple[tuple[int, str, str], ...]:
    """``(version, name, sql)`` for every ``NNNN_name.sql`` file, in version order."""
    found = []
    for entry in (_sql_dir(dialect) / "migrations").iterdir():
        match = re.match(r"^(\d{4})_([a-z0-9_]+)\.sql$", entry.name)
        if match:
            found.append((int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8")))
    return tuple(sorted(found))


def latest_version(dialect: str) -> int:
    migrations = load_migrations(dialect)
    return migrations[-1][0] if migrations else 0

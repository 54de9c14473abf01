"""Which record does each `li wait` argument name? (design.md D6, §4.4)

Exact readings come first, in the ADR's order (session, invocation, play, a branch's
latest execution, a run id's latest execution, schedule run), then a show (design.md §4.4:
success = completed), all in one query. An
input no exact reading matches may be a prefix of an id or its end (a run id's random
suffix, ``2b5dd3``): a unique match across the wait kinds resolves it, two or more make
it ambiguous (at most ``ID_CANDIDATES`` are listed, with the total count).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from lirun.hints import NamedTuple
from lirun.lifecycle import shown_kind
from lirun.store.base import ID_CANDIDATES
from lirun.store.core import Store
from lirun.store.rows import WaitExactRow

NOT_FOUND = "not_found"
AMBIGUOUS = "ambiguous"


class Target(NamedTuple):
    """One argument after resolution: a (kind, canonical id), or why there is none."""

    input: str
    kind: str | None = None
    id: str | None = None
    problem: str | None = None  # NOT_FOUND or AMBIGUOUS
    candidates: tuple[str, ...] = ()  # at most ID_CANDIDATES, newest first
    total: int = 0  # how many records the fragment matched in all


def split_ids(args: Iterable[str]) -> list[str]:
    """Space- or comma-separated ids, trimmed, deduplicated, in first-occurrence order."""
    seen: dict[str, None] = {}
    for arg in args:
        for piece in arg.replace(",", " ").split():
            seen.setdefault(piece, None)
    return list(seen)


def pick_exact(rows: Iterable[WaitExactRow]) -> dict[str, tuple[str, str]]:
    """Per input, the lowest tier's row, and within a tier the newest: (kind, id)."""
    best: dict[str, tuple[int, float, str, str]] = {}
    for row in rows:
        key = (int(row.tier), -float(row.created_at or 0.0), row.kind, row.id)
        current = best.get(row.input)
        if current is None or key < current:
            best[row.input] = key
    return {inp: (kind, id_) for inp, (_, _, kind, id_) in best.items()}


def _resolve_partial(store: Store, text: str) -> Target:
    rows = store.waits.match_ids(text, limit=ID_CANDIDATES)
    if not rows:
        return Target(text, problem=NOT_FOUND)
    total = int(rows[0].total)
    if total == 1:
        return Target(text, kind=rows[0].kind, id=rows[0].id, total=1)
    found = tuple(f"{shown_kind(r.kind)} {r.id}" for r in rows)
    return Target(text, problem=AMBIGUOUS, candidates=found, total=total)


def resolve_targets(store: Store, ids: Sequence[str]) -> list[Target]:
    """Resolve each input (already split) to a Target, in input order."""
    if not ids:
        return []
    exact = pick_exact(store.waits.resolve_exact(ids))
    targets = []
    for text in ids:
        hit = exact.get(text)
        if hit is not None:
            targets.append(Target(text, kind=hit[0], id=hit[1]))
        else:
            targets.append(_resolve_partial(store, text))
    return targets

"""The dashboard's reads, ``store.ui`` (``sql/<dialect>/ui.sql``, migration 0007).

Callers above the store name what they want (a page of runs, the history after a
sequence number, a show's plays), never a query or a dialect.
"""

from __future__ import annotations

import math
from collections.abc import Collection

from lirun.hints import Any, NamedTuple
from lirun.store.repository import Repository
from lirun.store.rows import (
    HistoryEventRow,
    LineagePlayRow,
    LineageScheduleRunRow,
    PlayRow,
    RecentScheduleRunRow,
    ResumedRunRow,
    RunLineage,
    RunPageRow,
)

# The kinds of execution the runs page lists, in the order of ``ui_runs_page``.
RUN_KINDS = ("run", "invocation", "play", "schedule_run")
MAX_PAGE = 200


class RunFilter(NamedTuple):
    """What the runs page asks for. ``None`` (or empty ``kinds``) means no filter;
    ``until`` is exclusive, ``since`` inclusive (epoch seconds); ``text`` is matched,
    case-insensitively and literally, inside the id, prompt, reason code and summary."""

    status: str | None = None
    kinds: Collection[str] = ()
    provider: str | None = None
    since: float | None = None
    until: float | None = None
    text: str | None = None


def _like(text: str) -> str:
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def page_params(
    flt: RunFilter, before: tuple[float, str] | None, limit: int, prompt_chars: int | None = None
) -> dict[str, Any]:
    """The parameters of ``ui_runs_page``: the cursor and ``until`` become one bound
    (the smaller of the two); ``prompt_chars`` of each prompt (None: whole); an unknown
    kind is a ValueError (a caller's bug)."""
    unknown = set(flt.kinds) - set(RUN_KINDS)
    if unknown:
        raise ValueError(f"not a run kind: {sorted(unknown)}")
    bound: tuple[float, str] = (math.inf, "")
    if before is not None:
        bound = min(bound, (float(before[0]), str(before[1])))
    if flt.until is not None:
        bound = min(bound, (float(flt.until), ""))
    # Infinity is not a value both drivers bind alike: a year-5000 timestamp is later
    # than any row.
    before_at = bound[0] if math.isfinite(bound[0]) else 1e11
    params: dict[str, Any] = {
        f"want_{kind}": int(not flt.kinds or kind in flt.kinds) for kind in RUN_KINDS
    }
    params.update(
        before_at=before_at,
        before_id=bound[1],
        since=flt.since,
        status=flt.status or None,
        provider=flt.provider or None,
        q=_like(flt.text) if flt.text else None,  # SQLite: a LIKE pattern
        needle=flt.text.lower() if flt.text else None,  # PostgreSQL: strpos
        limit=max(1, min(int(limit), MAX_PAGE)),
        prompt_chars=None if prompt_chars is None else max(1, int(prompt_chars)),
    )
    return params


class UIReads(Repository):
    """``store.ui``: the dashboard's reads."""

    def runs_page(
        self,
        flt: RunFilter | None = None,
        *,
        before: tuple[float, str] | None = None,
        limit: int = 50,
        prompt_chars: int | None = None,
    ) -> list[RunPageRow]:
        """Up to ``limit`` executions of every kind (``kind``, ``id``, status, reason,
        provider, model, prompt, ``label``, ``parent_id``, times, tokens, cost), newest
        first, strictly before the ``(created_at, id)`` cursor ``before``; each prompt
        cut to its first ``prompt_chars`` characters when given (whole otherwise)."""
        params = page_params(flt or RunFilter(), before, limit, prompt_chars)
        rows = self.connector.read(self.sql("ui_runs_page"), params)
        return [RunPageRow.from_row(r) for r in rows]

    def transitions_since(self, after: int, *, limit: int = 500) -> list[HistoryEventRow]:
        """History rows with a sequence number above ``after``, in order (``seq``,
        entity type and id, previous and new status, reason code, created_at, and
        ``parent_id``: a session's invocation or a play's show)."""
        rows = self.connector.read(
            self.sql("ui_transitions_since"), {"after": int(after), "limit": int(limit)}
        )
        return [HistoryEventRow.from_row(r) for r in rows]

    def last_transition_seq(self) -> int:
        """The highest sequence number of the history (0 when empty)."""
        return int(self.connector.read(self.sql("ui_last_seq"))[0]["seq"])

    def show_plays(self, show_id: str) -> list[PlayRow]:
        """Every play of a show, oldest first."""
        from lirun.store.records import decode_row

        rows = self.connector.read(self.sql("ui_show_plays"), {"show_id": show_id})
        return [PlayRow.from_row(decode_row(r)) for r in rows]

    def recent_schedule_runs(self, per_schedule: int = 20) -> list[RecentScheduleRunRow]:
        """The newest ``per_schedule`` runs of every schedule (by schedule, newest first)."""
        rows = self.connector.read(
            self.sql("ui_recent_schedule_runs"), {"per_schedule": int(per_schedule)}
        )
        return [RecentScheduleRunRow.from_row(r) for r in rows]

    def run_lineage(self, session_id: str, invocation_id: str | None) -> RunLineage:
        """What an execution is linked to besides its own columns: the executions that
        resumed it, the plays it backs, the schedule runs that made it or its invocation."""
        resumed_as = self.connector.read(self.sql("ui_resumed_as"), {"id": session_id})
        plays = self.connector.read(self.sql("ui_plays_of_session"), {"id": session_id})
        schedule_runs = self.connector.read(
            self.sql("ui_schedule_runs_of_run"),
            {"id": session_id, "invocation_id": invocation_id},
        )
        return RunLineage(
            resumed_as=[ResumedRunRow.from_row(r) for r in resumed_as],
            plays=[LineagePlayRow.from_row(r) for r in plays],
            schedule_runs=[LineageScheduleRunRow.from_row(r) for r in schedule_runs],
        )

"""How ``li flow list`` and ``li status --kind K`` draw their tables (rich, with headers)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from lirun.cli.render import (
    _text,
    display_reason,
    format_cost,
    format_span,
    format_tokens,
    render_rows_table,
    run_duration,
    screen,
    status_style,
    total_tokens,
)


def flow_name(row: Mapping[str, Any]) -> str:
    """A flow by its file's name (``fan.yaml``), not the path it was run from."""

    skill = str(row.get("skill") or "")
    return os.path.basename(skill) or "-"


def render_flows(rows: Sequence[Mapping[str, Any]], now: float) -> None:
    table = [
        [
            _text(row.get("id")),
            _text(flow_name(row)),
            _text(row.get("status"), status_style("invocation", row.get("status"))),
            _text(format_span(now - float(row.get("created_at") or now))),
            _text(format_span(run_duration({**row, "kind": "invocation"}, now))),
            _text(format_tokens(total_tokens(row))),
            _text(format_cost(row.get("cost_usd"))),
            _text(display_reason(row.get("status_reason_code"))),
        ]
        for row in rows
    ]
    headers = ("ID", "FLOW", "STATUS", "AGE", "DURATION", "TOKENS", "COST", "REASON")
    with screen() as out:
        render_rows_table(out, table, headers)


# What the WHAT column of `li status --kind K` says for each kind.
WHAT_HEADERS = {"invocation": "FLOW", "play": "PLAY", "schedule_run": "ACTION"}
PARENT_HEADERS = {"play": "SHOW", "schedule_run": "SCHEDULE"}


def render_kind_list(kind: str, rows: Sequence[Mapping[str, Any]], now: float) -> None:
    """``li status --kind K``: one table of invocations, plays or schedule runs."""

    parent = PARENT_HEADERS.get(kind)
    table = []
    for row in rows:
        label = flow_name({"skill": row.get("label")}) if kind == "invocation" else row.get("label")
        cells = [_text(row.get("id")), _text(label or "-")]
        if parent:
            cells.append(_text(row.get("schedule") or row.get("parent_id") or "-"))
        cells += [
            _text(row.get("status"), status_style(kind, row.get("status"))),
            _text(format_span(now - float(row.get("created_at") or now))),
            _text(format_span(run_duration(row, now))),
            _text(format_cost(row.get("cost_usd"))),
            _text(display_reason(row.get("status_reason_code"))),
        ]
        table.append(cells)
    headers = ["ID", WHAT_HEADERS.get(kind, "WHAT"), *([parent] if parent else [])]
    headers += ["STATUS", "AGE", "DURATION", "COST", "REASON"]
    with screen() as out:
        render_rows_table(out, table, headers)

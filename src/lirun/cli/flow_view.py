"""How a flow's legs are shown: the table (``li flow run`` on stderr, ``li status`` for a
flow invocation) and the closing line on stdout. Pure formatting of a report's dict form
(``FlowReport.to_dict()``), so both commands print the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.text import Text

from lirun.cli.render import format_cost, format_span, render_rows_table, screen, status_style
from lirun.flows.dag import graph_lines

__all__ = ["LEG_HEADERS", "final_line", "leg_rows", "stopped_lines", "table_lines"]

LEG_HEADERS = ("leg", "status", "reason", "duration", "cost", "session")


def leg_rows(legs: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """One row per leg (instances included): the columns of ``LEG_HEADERS``."""
    rows = []
    for leg in legs:
        status = str(leg.get("status") or "-")
        if leg.get("reused"):
            status += " (reused)"
        attempts = leg.get("attempts") or 1
        if attempts > 1:
            status += f" ({attempts} attempts)"
        name = str(leg.get("id") or "-")
        if leg.get("item") is not None:  # a fan-out instance: which item it ran for
            item = " ".join(str(leg["item"]).split())
            name += f" ({item if len(item) <= 40 else item[:39] + '…'})"
        rows.append(
            [
                name,
                status,
                str(leg.get("reason_code") or "-"),
                format_span(leg.get("duration_s")),
                format_cost(leg.get("cost_usd")),
                str(leg.get("session_id") or "-"),
            ]
        )
    return rows


def table_lines(legs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The legs as an aligned plain-text table, header first."""
    rows = [list(LEG_HEADERS), *leg_rows(legs)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(LEG_HEADERS))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


_STOPPED_BY = {
    "run.cancelled.dependency": "not run (a dependency failed)",
    "run.cancelled.fail_fast": "not run (fail_fast)",
}


def stopped_lines(legs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The legs a failure kept from running, one line per why (a failed dependency,
    fail_fast)."""
    lines = []
    for reason, label in _STOPPED_BY.items():
        ids = [
            str(leg.get("id"))
            for leg in legs
            if leg.get("status") == "not_run" and leg.get("reason_code") == reason
        ]
        if ids:
            lines.append(f"{label}: {', '.join(ids)}")
    return lines


def final_line(report: Mapping[str, Any], exit_code: int) -> str:
    """The one stable line on stdout: id, status, reason, run directory, exit code."""
    return (
        f"{report.get('invocation_id')}\tstatus={report.get('status')}"
        f"\treason={report.get('reason_code') or 'unknown'}"
        f"\trun_dir={report.get('run_dir') or '-'}\texit_code={exit_code}"
    )


def render_flow(flow: Mapping[str, Any]) -> None:
    """``li status`` for a flow invocation: the legs table and the graph, after the record."""

    legs = flow.get("legs") or []
    with screen() as out:
        out.print(Text(f"\nlegs ({len(legs)})", style="bold"))
        rows = []
        for leg, row in zip(legs, leg_rows(legs), strict=True):
            style = status_style("session", leg.get("status"))
            rows.append([Text(row[0]), Text(row[1], style=style), *(Text(c) for c in row[2:])])
        render_rows_table(out, rows, [h.upper() for h in LEG_HEADERS])
        for line in stopped_lines(legs):
            out.print(Text(line))
        out.print(Text("\ngraph", style="bold"))
        for line in graph_lines(flow):
            out.print(Text(f"  {line}"))

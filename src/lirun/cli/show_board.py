"""The show board (``li show status SHOW``, and what ``li show run`` prints at the end) and
the list of recent shows, drawn with rich.

Everything is drawn from the JSON form of a show report (``ShowReport.to_dict()``), the
same object ``--json`` prints, so the board never says anything the JSON does not. The
helpers above the drawing are pure and table-tested: which plays need a person, and the
commands that person runs next.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from lirun.cli.render import clip, format_span, render_rows_table, screen, status_style
from lirun.reasons import describe, display_reason
from lirun.shows.decide import play_needs_person, plays_needing_person
from lirun.store.rows import ShowListRow

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "needs_person",
    "next_steps",
    "play_rows",
    "render_board",
    "render_show_list",
    "show_row_json",
]

# Board order: what needs a person first, then work in flight, then what waits, then done.
STATUS_ORDER = (
    "escalated",
    "gate_failed",
    "redoing",
    "gated",
    "running_complete",
    "running",
    "prepared",
    "pending",
    "blocked",
    "aborted_after_finish",
    "merged",
)
# The reason a person records when they merged a play by hand (it fits ``merged``).
MERGED_BY_HAND_REASON = "play.merged.admin"


_VERDICTS = {"pass": "passed", "fail": "failed", "running": "running", None: "?"}


def _verdict(verdict: object) -> str:
    """The gate's verdict as the board says it (``pass`` → ``passed``)."""
    return _VERDICTS.get(verdict, str(verdict))  # type: ignore[call-overload]


def _short(sha: object) -> str:
    return str(sha)[:10] if sha else "-"


def _merged_as(play: Mapping[str, Any]) -> str:
    """The merge commit; "by hand" for a play a person merged (lirun made no commit)."""
    if play.get("merge_sha"):
        return _short(play["merge_sha"])
    return "by hand" if play.get("status") == "merged" else "-"


def _rank(status: object) -> int:
    return STATUS_ORDER.index(status) if status in STATUS_ORDER else len(STATUS_ORDER)


def needs_person(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The plays a person must look at: those in a status only a person ends (escalated,
    gate_failed) while the show is still active."""
    status = report.get("status")
    return [p for p in report.get("plays") or () if play_needs_person(p.get("status"), status)]


def _gates_text(play: Mapping[str, Any]) -> str:
    verdicts = [
        _VERDICTS.get(g.get("verdict"), str(g.get("verdict"))) for g in play.get("gates") or ()
    ]
    return ", ".join(verdicts) if verdicts else "-"


def play_rows(report: Mapping[str, Any]) -> list[list[str]]:
    """One row per play, by status (needs a person first, merged last): name, status,
    attempt, gate verdicts, merge commit, reason."""
    plays = sorted(report.get("plays") or (), key=lambda p: _rank(p.get("status")))
    rows = []
    for play in plays:
        attempt = f"{play.get('attempt') or 0}/{play.get('attempts') or '?'}"
        code = play.get("reason_code")
        reason = display_reason(code) if code else "-"
        summary = play.get("reason_summary") or describe(reason)
        rows.append(
            [
                str(play.get("name")),
                str(play.get("status")),
                attempt,
                _gates_text(play),
                _merged_as(play),
                f"{reason}: {clip(summary, 80)}" if summary else reason,
            ]
        )
    return rows


def next_steps(report: Mapping[str, Any]) -> list[str]:
    """What a person does next: the report's own sentences (``needs_person``: which play,
    why, the commands), then where each such play's last gate output is, and how to go
    on after an interruption."""
    show = str(report.get("show_id"))
    if report.get("status") in ("completed", "aborted"):
        return []
    lines = [str(line) for line in report.get("needs_person") or ()]
    plays = needs_person(report)
    if plays and not lines:  # an older report without sentences: say it plainly
        for play in plays:
            lines.append(
                f"play {play.get('name')} ({play.get('id')}) is {play.get('status')}: merge it "
                f"into {report.get('integration')} yourself, then `li override play "
                f"{play.get('id')} --to merged --reason {MERGED_BY_HAND_REASON} --actor YOU "
                f"--justification WHY` and `li show resume {show}`"
            )
    for play in plays:
        gates = [g for g in play.get("gates") or () if g.get("session_id")]
        if gates:
            last = gates[-1]["session_id"]
            lines.append(f"play {play.get('name')}: its last gate's output: li logs {last}")
    final_gate = report.get("final_gate") or {}
    if final_gate.get("session_id") and final_gate.get("verdict") not in (None, "pass"):
        which = (
            "the moved head's gate" if final_gate.get("role") == "head_gate" else "the final gate"
        )
        lines.append(f"{which}'s output: li logs {final_gate['session_id']}")
    if report.get("interrupted"):
        lines.append(
            f"li was stopped by {report['interrupted']}; `li show resume {show}` continues "
            "(plays that were running are redone)"
        )
    return lines


# --- drawing ----------------------------------------------------------------------------------


def _text(value: object, style: str = "") -> Text:
    return Text("" if value is None else str(value), style=style)


def _header_fields(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    reason = display_reason(report.get("reason_code"))
    summary = report.get("reason_summary") or describe(reason)
    head = report.get("integration_head")
    final_gate = report.get("final_gate") or {}
    head_gate = final_gate if final_gate.get("role") == "head_gate" else {}
    if head_gate:
        final_gate = {}  # the last gate on the head was a moved head's, not the final gate
    fields = [
        ("reason", f"{reason}: {summary}" if summary else reason),
        (
            "integration",
            f"{report.get('integration') or '-'}" + (f" at {_short(head)}" if head else ""),
        ),
        ("base", str(report.get("base") or "-")),
        (
            "final gate",
            _verdict(final_gate.get("verdict"))
            + (f" (session {final_gate['session_id']})" if final_gate.get("session_id") else "")
            if final_gate
            else ("not run yet" if report.get("has_final_gate", True) else "none"),
        ),
    ]
    if head_gate:
        fields.append(
            (
                "moved head",
                f"{_verdict(head_gate.get('verdict'))} on {_short(head_gate.get('commit'))}"
                f" (session {head_gate.get('session_id')})",
            )
        )
    if report.get("interrupted"):
        fields.append(("interrupted", str(report["interrupted"])))
    return fields


def _draw_board(out: Console, report: Mapping[str, Any]) -> None:
    status = report.get("status")
    title = _text(f"show {report.get('show_id')}  {report.get('topic')}  ", "bold")
    title.append(_text(status, status_style("show", status)))
    out.print(title)
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column()
    for label, value in _header_fields(report):
        grid.add_row(_text(label), _text(value))
    out.print(grid)
    out.print(_text("\nplays", "bold"))
    rows = [
        [_text(c, status_style("play", c) if i == 1 else "") for i, c in enumerate(row)]
        for row in play_rows(report)
    ]
    render_rows_table(out, rows, ("PLAY", "STATUS", "ATTEMPT", "GATES", "MERGED AS", "REASON"))
    sessions = _run_lines(report)
    if sessions:
        out.print(_text("\nsessions (li status ID shows one, li logs ID its output)", "bold"))
        for line in sessions:
            out.print(_text(f"  {line}"))
    steps = next_steps(report)
    if steps:
        out.print(_text("\nneeds a person", "bold red"))
        width = max(60, min(out.width, 110))
        for line in steps:
            wrapped = textwrap.fill(
                line,
                width=width,
                initial_indent="  ",
                subsequent_indent="    ",
                break_long_words=False,
                break_on_hyphens=False,
            )
            out.print(_text(wrapped))


def _run_lines(report: Mapping[str, Any]) -> list[str]:
    """Per play, its executions: the work sessions, then each gate run and its verdict."""
    lines = []
    for play in report.get("plays") or ():
        parts = []
        work = [str(sid) for sid in play.get("session_ids") or ()]
        if work:
            parts.append("work " + ", ".join(work))
        gates = [g for g in play.get("gates") or () if g.get("session_id")]
        if gates:
            parts.append(
                "gates "
                + ", ".join(f"{g['session_id']} {_verdict(g.get('verdict'))}" for g in gates)
            )
        if parts:
            lines.append(f"{play.get('name')}: " + "; ".join(parts))
    return lines


def render_board(report: Mapping[str, Any]) -> None:
    """One show's board on stdout."""
    with screen() as out:
        _draw_board(out, report)


def show_row_json(row: ShowListRow) -> dict[str, Any]:
    """A show of the list as ``--json`` prints it, with ``plays_need_you`` as the NEED
    YOU column (and ``/api/shows``) counts it."""
    return {**row.as_dict(), "plays_need_you": plays_needing_person(row.plays, row.status)}


def render_show_list(rows: Sequence[ShowListRow], now: float) -> None:
    """Recent shows, newest first: id, topic, status, plays merged of all, needing a person."""
    table_rows = []
    for row in rows:
        plays = row.plays
        total = sum(plays.values())
        person = plays_needing_person(plays, row.status)
        table_rows.append(
            [
                _text(row.id),
                _text(row.topic),
                _text(row.status, status_style("show", row.status)),
                _text(f"{plays.get('merged', 0)}/{total}"),
                _text(str(person) if person else "-", "bold red" if person else ""),
                _text(format_span(now - float(row.created_at or now))),
                _text(display_reason(row.status_reason_code)),
            ]
        )
    with screen() as out:
        render_rows_table(
            out, table_rows, ("ID", "TOPIC", "STATUS", "MERGED", "NEED YOU", "AGE", "REASON")
        )

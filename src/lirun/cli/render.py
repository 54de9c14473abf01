"""Human rendering for ``li status`` and friends, with rich.

rich is imported inside the functions that draw, so importing this module costs nothing;
the formatting helpers above them are pure and tested directly. Colour appears only on a
terminal and never with ``NO_COLOR`` set (rich decides both). Every value taken from the
database is drawn as plain ``Text``, so a summary containing ``[red]`` stays literal.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING

from lirun.cli.outcome_lines import evidence_lines, verification_lines
from lirun.hints import Any
from lirun.lifecycle import is_success, is_terminal
from lirun.reasons import describe, display_reason

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from lirun.store.rows import SessionRow

# Wide enough that piped output never folds an id; a terminal uses its own width.
PIPE_WIDTH = 200


# --- pure formatting --------------------------------------------------------------------------


def format_span(seconds: float | None) -> str:
    """``42s``, ``3m05s``, ``2h07m``, ``3d04h``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def format_time(ts: float | None, now: float) -> str:
    """Local wall-clock time and how long ago, e.g. ``2026-07-09 14:03:11 (5m02s ago)``."""
    if ts is None:
        return "-"
    stamp = datetime.fromtimestamp(float(ts)).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    return f"{stamp} ({format_span(now - float(ts))} ago)"


def run_duration(row: Mapping[str, Any], now: float) -> float | None:
    """Started → ended; a still-running row counts up to ``now``."""
    start = row.get("started_at") or row.get("created_at")
    if start is None:
        return None
    end = row.get("ended_at")
    if end is None:
        end = now if not is_terminal(_kind(row), row.get("status")) else row.get("updated_at")
    return None if end is None else float(end) - float(start)


def status_style(kind: str, status: str | None) -> str:
    """Green for success, yellow while in flight, red for failure, magenta for time-outs."""
    if status is None:
        return "dim"
    if is_success(kind, status):
        return "bold green"
    if not is_terminal(kind, status):
        return "yellow"
    if status == "timed_out":
        return "magenta"
    if status in ("completed_empty", "skipped"):
        return "dark_orange"
    return "bold red"


def reason_text(row: Mapping[str, Any]) -> str:
    """``code: meaning`` for a registered code, ``unknown`` otherwise."""
    code = display_reason(row.get("status_reason_code"))
    meaning = describe(code)
    return f"{code}: {meaning}" if meaning else code


def format_tokens(count: object) -> str:
    """``950``, ``25.1k``, ``3.4M``; ``-`` when the provider reported none."""
    if not isinstance(count, int) or isinstance(count, bool):
        return "-"
    if count < 1000:
        return str(count)
    if count < 1_000_000:
        return f"{count / 1000:.1f}k"
    return f"{count / 1_000_000:.1f}M"


def total_tokens(row: Mapping[str, Any]) -> int | None:
    """Input plus output tokens as reported (cache reads are part of the input)."""
    counts = [row.get(k) for k in ("input_tokens", "output_tokens")]
    known = [c for c in counts if isinstance(c, int) and not isinstance(c, bool)]
    return sum(known) if known else None


def format_cost(cost: object) -> str:
    """``$0.0123``; ``-`` when the provider reported no cost (never estimated)."""
    if not isinstance(cost, int | float) or isinstance(cost, bool):
        return "-"
    return f"${cost:.4f}" if cost < 1 else f"${cost:.2f}"


def tokens_text(row: Mapping[str, Any]) -> str:
    labels = (
        ("input_tokens", "in"),
        ("output_tokens", "out"),
        ("cache_read_tokens", "cache read"),
        ("cache_write_tokens", "cache write"),
    )
    return ", ".join(f"{label} {row[key]}" for key, label in labels if row.get(key) is not None)


def clip(text: object, limit: int = 300) -> str:
    """One line of at most ``limit`` characters (``li status --json`` has the whole text)."""
    line = " ".join(str(text or "").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def first_line(text: object) -> str:
    lines = str(text or "").splitlines()
    return lines[0] if lines else ""


def _kind(row: Mapping[str, Any]) -> str:
    return str(row.get("kind") or "run")


def record_fields(kind: str, row: Mapping[str, Any], now: float) -> list[tuple[str, str]]:
    """The label/value lines at the top of one record's view, in display order."""
    fields: list[tuple[str, str]] = [
        ("pruned", pruned_text(row, now)),
        ("reason", reason_text(row)),
        ("summary", row.get("status_reason_summary") or ""),
        ("evidence", work_text(row.get("work"))),
        ("created", format_time(row.get("created_at"), now)),
        ("started", format_time(row.get("started_at"), now) if row.get("started_at") else ""),
        ("ended", format_time(row.get("ended_at"), now) if row.get("ended_at") else ""),
        ("updated", format_time(row.get("updated_at"), now)),
        ("duration", format_span(run_duration({**row, "kind": kind}, now))),
        ("exit code", exit_code_text(row)),
    ]
    fields += _specific_fields(kind, row, now)
    return [(label, value) for label, value in fields if value]


def exit_code_text(row: Mapping[str, Any]) -> str:
    """The command's own exit code beside lirun's, ``3 (lirun: 1)``, as the dashboard
    shows them; lirun's alone when the command's is not known."""
    own, ours = row.get("child_exit_code"), row.get("exit_code")
    if own is None:
        return "" if ours is None else str(ours)
    return f"{own} (lirun: {'-' if ours is None else ours})"


def work_text(work: object) -> str:
    """The ``evidence:`` line: what the run did, said by ``record.work`` ("reply only")."""
    return str(work.get("summary") or "") if isinstance(work, Mapping) else ""


def pruned_text(row: Mapping[str, Any], now: float) -> str:
    """When and by whom a record was pruned to its tombstone (docs/retention.md), or ""."""
    if not row.get("pruned_at"):
        return ""
    by = f" by {row['pruned_by']}" if row.get("pruned_by") else ""
    return f"{format_time(row['pruned_at'], now)}{by}: run directory and bulky columns removed"


def _specific_fields(kind: str, row: Mapping[str, Any], now: float) -> list[tuple[str, str]]:
    if kind == "run":
        provider = "/".join(str(row[k]) for k in ("provider", "model") if row.get(k))
        command = row.get("command_json")
        options = row.get("provider_options_json")
        return [
            ("provider", provider),
            ("version", row.get("provider_version") or ""),
            ("command", " ".join(map(str, command)) if isinstance(command, list) else ""),
            ("options", json.dumps(options, sort_keys=True) if options else ""),
            ("prompt", clip(row.get("prompt"))),
            # the reply: a command's stdout (its output) or an agent's answer (present_run)
            ("output" if row.get("provider") == "command" else "reply", clip(row.get("reply"))),
            (_error_label(row), clip(row.get("provider_error"))),
            ("retries", _retries_text(row)),
            ("turns", _opt(row.get("num_turns"))),
            ("tokens", tokens_text(row)),
            ("cost", "" if row.get("cost_usd") is None else format_cost(row["cost_usd"])),
            ("child time", "" if row.get("duration_s") is None else f"{row['duration_s']:.1f}s"),
            ("run dir", row.get("run_dir") or ""),
            ("artifact dir", row.get("artifact_dir") or ""),
            ("cwd", row.get("cwd") or ""),
            ("owner", owner_text(row, now)),
            ("engine uid", row.get("engine_session_uid") or ""),
            # a conversation `li agent --resume` continues, not a git branch
            ("conversation", row.get("branch_id") or ""),
            ("resumed from", row.get("resumed_from") or ""),
            ("invocation", row.get("invocation_id") or ""),
        ]
    if kind == "invocation":  # a flow's holds its legs' summed usage, its owner, its origin
        is_flow = row.get("invocation_kind") == "flow"
        skill = _opt(row.get("skill"))
        named = [("flow", os.path.basename(skill)), ("flow file", skill)] if is_flow else []
        return [
            *(named or [("skill", skill)]),
            ("prompt", clip(row.get("prompt"))),
            ("tokens", tokens_text(row)),
            ("cost", "" if row.get("cost_usd") is None else format_cost(row["cost_usd"])),
            ("run dir", row.get("run_dir") or ""),
            ("artifact dir", row.get("artifact_dir") or ""),
            ("owner", owner_text(row, now)),
            ("resumed from", row.get("resumed_from") or ""),
        ]
    if kind == "play":  # named by what each is in git and in the show
        labels = (
            ("show", "show_id"),
            ("play", "name"),
            ("attempt", "attempt"),
            ("git branch", "branch"),
            ("worktree", "worktree"),
            ("merged as", "merge_sha"),
            ("work run", "session_id"),
            ("artifact dir", "artifact_dir"),
        )
        return [(label, _opt(row.get(key))) for label, key in labels]
    keys = {
        "show": ("topic", "repo", "integration", "integration_head"),
        "schedule_run": (
            "schedule_id",
            "invocation_id",
            "action_kind",
            "attempt",
            "artifact_dir",
            # the chain a worker made (li worker): schedule → this run → its execution
            "schedule",
            "due_at",
            "event_key",  # the event it is for (an event schedule's run)
            "subject_key",  # what it is about (--overlap), when not its event key
            "event_json",
            "chain_parent_id",  # a chained run (--after): the parent run that fired it
            "chain_depth",
            "retry_of",
            "worker_id",
            "produced",
        ),
    }.get(kind, ())
    if kind == "schedule_run" and not row.get("chain_parent_id"):
        keys = tuple(k for k in keys if k not in ("chain_parent_id", "chain_depth"))
    if kind == "schedule_run" and row.get("subject_key") in (None, row.get("event_key")):
        keys = tuple(k for k in keys if k != "subject_key")
    return [(k.replace("_", " "), "" if row.get(k) is None else str(row[k])) for k in keys]


def _opt(value: object) -> str:
    return "" if value is None else str(value)


def _error_label(row: Mapping[str, Any]) -> str:
    """While the run runs, the provider's error is its latest, not how the run failed."""
    return "last provider error" if row.get("status") == "running" else "provider error"


def _retries_text(row: Mapping[str, Any]) -> str:
    """The provider's own API retries: "3 so far" while the run runs."""
    count = row.get("provider_retries")
    if count is None:
        return ""
    return f"{count} so far" if row.get("status") == "running" else str(count)


def owner_text(row: Mapping[str, Any], now: float) -> str:
    if not row.get("owner_pid"):
        return ""
    text = f"pid {row['owner_pid']} on {row.get('owner_host') or '?'}"
    if row.get("heartbeat_at"):
        text += f", last heartbeat {format_span(now - float(row['heartbeat_at']))} ago"
    verdict = row.get("owner_verdict")
    if isinstance(verdict, Mapping):
        text += f" — looks dead: {verdict.get('summary')} (`li reap` finalizes it)"
    return text


# --- drawing ----------------------------------------------------------------------------------


def console() -> Console:
    from rich.console import Console

    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else PIPE_WIDTH
    return Console(width=width, highlight=False, soft_wrap=False)


@contextmanager
def screen() -> Iterator[Console]:
    """A console whose output reaches stdout without rich's trailing padding."""
    out = console()
    with out.capture() as captured:
        yield out
    try:
        sys.stdout.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
        sys.stdout.flush()
    except BrokenPipeError:  # the reader left (`li status ID | head`): say no more
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the flush at exit fails no more either
        os.close(devnull)


def _text(value: object, style: str = "") -> Text:
    from rich.text import Text

    return Text("" if value is None else str(value), style=style)


def render_list(rows: Sequence[SessionRow], now: float) -> None:
    """A table of executions, newest first."""
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("ID", no_wrap=True)
    table.add_column("STATUS", no_wrap=True)
    table.add_column("AGE", justify="right", no_wrap=True)
    table.add_column("DURATION", justify="right", no_wrap=True)
    table.add_column("EXIT", justify="right", no_wrap=True)
    table.add_column("TOKENS", justify="right", no_wrap=True)
    table.add_column("COST", justify="right", no_wrap=True)
    table.add_column("REASON", no_wrap=True)
    table.add_column("SUMMARY", overflow="ellipsis", no_wrap=True, max_width=60)
    for row in rows:
        shown = row.as_dict()  # the duration and tokens are read as a record's detail is
        table.add_row(
            _text(row.id),
            _text(row.status, status_style("run", row.status)),
            _text(format_span(now - float(row.created_at or now))),
            _text(format_span(run_duration(shown, now))),
            _text("-" if row.exit_code is None else row.exit_code),
            _text(format_tokens(total_tokens(shown))),
            _text(format_cost(row.cost_usd)),
            _text(display_reason(row.status_reason_code)),
            _text(first_line(row.status_reason_summary)),
        )
    with screen() as out:
        out.print(table)


def render_record(detail: Mapping[str, Any], now: float) -> None:
    """One record: its fields, evidence, artifact verification, history and admin events."""
    with screen() as out:
        _draw_record(out, detail, now)


def _draw_record(out: Console, detail: Mapping[str, Any], now: float) -> None:
    from rich.table import Table

    kind = str(detail.get("kind") or "run")
    status = detail.get("status")
    title = _text(f"{kind} {detail.get('id')}  ", "bold")
    title.append(_text(status, status_style(kind, status)))
    if detail.get("pruned_at"):
        title.append(_text("  (pruned)", "dim"))
    out.print(title)
    _liveness(out, detail.get("liveness"))
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column()
    for label, value in record_fields(kind, detail, now):
        grid.add_row(_text(label), _text(value))
    out.print(grid)
    if detail.get("stderr_tail"):
        hint = f"its last lines; all of it: li logs {detail.get('id')} --stderr"
        _section(out, f"stderr ({hint})", detail["stderr_tail"])
    _section(out, "evidence", evidence_lines(detail.get("status_evidence_refs")))
    _section(
        out, "artifact verification", verification_lines(detail.get("artifact_verification_json"))
    )
    if detail.get("runs"):
        out.print(_text("\nruns", "bold"))
        render_rows_table(out, _run_rows(detail["runs"], now), ("ID", "STATUS", "AGE", "REASON"))
    out.print(_text("\nhistory", "bold"))
    render_rows_table(
        out,
        _history_rows(kind, detail.get("transitions") or [], now),
        ("WHEN", "FROM", "TO", "REASON", "SOURCE", "ACTOR", "SUMMARY"),
    )
    if detail.get("admin_events"):
        out.print(_text("\nadmin events", "bold"))
        render_rows_table(
            out,
            _admin_rows(detail["admin_events"], now),
            ("WHEN", "EVENT", "ACTOR", "JUSTIFICATION", "CHANGE"),
        )
    if detail.get("team"):
        from lirun.store.rows import TeamMessageRow
        from lirun.teams.message import escape_line, message_line

        team = detail["team"]
        heading = (
            f"team {team['name']} ({team['id']}) as {team['member']}: {team['total']} messages"
        )
        lines = [message_line(TeamMessageRow.from_row(m)) for m in team["messages"]] or ["(none)"]
        _section(out, escape_line(heading), lines)


_LIVENESS = {"alive": ("owner alive", "green"), "dead": ("owner dead", "bold red")}


def _liveness(out: Console, found: object) -> None:
    """The running record's owner verdict, and the command that reaps it."""
    if not isinstance(found, Mapping):
        return
    head, style = _LIVENESS.get(str(found.get("verdict")), ("no owner", "yellow"))
    line = _text(head, style)
    line.append(_text(f": {found.get('summary')}"))
    if found.get("advice"):
        line.append(_text(f"; {found['advice']}"))
    out.print(line)


def _section(out: Console, title: str, lines: Iterable[str]) -> None:
    lines = list(lines)
    if lines:
        out.print(_text(f"\n{title}", "bold"))
        for line in lines:
            out.print(_text(f"  {line}"))


def render_rows_table(out: Console, rows: Iterable[Sequence[Text]], headers: Sequence[str]) -> None:
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    for header in headers:
        table.add_column(header, no_wrap=header not in ("SUMMARY", "JUSTIFICATION"))
    for row in rows:
        table.add_row(*row)
    out.print(table)


def _history_rows(
    kind: str, transitions: Iterable[Mapping[str, Any]], now: float
) -> list[list[Text]]:
    return [
        [
            _text(format_time(t.get("created_at"), now)),
            _text(t.get("previous_status") or "-", status_style(kind, t.get("previous_status"))),
            _text(t.get("status"), status_style(kind, t.get("status"))),
            _text(display_reason(t.get("reason_code"))),
            _text(t.get("source")),
            _text(t.get("actor") or "-"),
            _text(t.get("reason_summary") or ""),
        ]
        for t in transitions
    ]


def _admin_rows(events: Iterable[Mapping[str, Any]], now: float) -> list[list[Text]]:
    rows = []
    for event in events:
        raw = event.get("payload")
        payload: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        before = payload.get("previous_status", "?")
        after = payload.get("new_status") or payload.get("attempted_status") or "?"
        rows.append(
            [
                _text(format_time(event.get("created_at"), now)),
                _text(event.get("event_type")),
                _text(event.get("actor") or "-"),
                _text(event.get("justification") or ""),
                _text(f"{before} → {after}"),
            ]
        )
    return rows


def _run_rows(runs: Iterable[Mapping[str, Any]], now: float) -> list[list[Text]]:
    return [
        [
            _text(s.get("id")),
            _text(s.get("status"), status_style("run", s.get("status"))),
            _text(format_span(now - float(s.get("created_at") or now))),
            _text(display_reason(s.get("status_reason_code"))),
        ]
        for s in runs
    ]

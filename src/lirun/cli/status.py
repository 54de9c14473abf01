"""``li status [ID]``: recent executions, or one record with its history.

The database is opened read-only. An ID is resolved as ``li wait`` resolves it
(``lirun.wait.resolve``): an exact run, invocation, play, branch, run-id or schedule-run
id first, else a unique prefix or suffix; two or more matches are an error that lists
up to ten of them and counts the rest (design.md §4.4).
"""

from __future__ import annotations

import sys
import time

from lirun.cli.common import add_db_option, deliver_pending, make_parser, print_json
from lirun.errors import DatabaseMissingError, NotFoundError, UsageError
from lirun.hints import Any
from lirun.lifecycle import canonical_entity_type, is_success, is_terminal, policy_for
from lirun.paths import resolve_db_url
from lirun.store import Store, open_store
from lirun.store.urls import redact_url

EXIT_CODES = """\
  0  shown (an empty list too, and no database yet for the list)
  2  usage error; ID not found or ambiguous; the database cannot be opened"""

DESCRIPTION = """\
Without ID: a table of recent runs, newest first (every supervised execution), or with
--kind the invocations (flows and manual ones), plays or schedule runs.
With ID (exact, a unique prefix, or a run id's unique random suffix such as 2b5dd3):
one record with its reason, evidence, artifact verification, transition history and
admin events; a running run or flow, or an active show, also says whether its owner
still runs it (alive, dead, or none recorded) and the command that reaps or takes it
over; an ambiguous ID lists up to ten candidates. Opens the database read-only,
after recording any run outcome spooled for it (a teardown that could not write)."""

LIST_KINDS = ("run", "invocation", "play", "schedule_run")
# ``--kind session``: the old word for a run, still accepted (with a note on stderr).
_OLD_KINDS = {"session": "run"}
# The --json shapes (docs/json.md, "Shape versions").
RECORD_SCHEMA = "lirun.record/2"
STATUS_ROW_SCHEMA = "lirun.status_row/1"
RUN_ROW_SCHEMA = "lirun.run_row/2"
_MAX_SINCE = 100 * 366 * 86400.0


def parse_duration(text: str) -> float:
    """``--since``: a DURATION (``90``, ``30m``, ``2h``, ``1d``, ``1w``) → seconds, at most
    a hundred years; UsageError otherwise."""
    from lirun.durations import parse_seconds

    return parse_seconds(text, "--since", high=_MAX_SINCE)


def build_parser() -> Any:
    parser = make_parser("li status", DESCRIPTION, EXIT_CODES)
    parser.add_argument(
        "id", nargs="?", metavar="ID", help="an id, a unique prefix, or a unique suffix"
    )
    add_db_option(parser)
    parser.add_argument("--json", action="store_true", help="JSON on stdout (list or object)")
    parser.add_argument(
        "--kind",
        choices=(*LIST_KINDS, *_OLD_KINDS),
        default="run",
        help="what to list: runs (the default), invocations, plays or schedule runs",
    )
    parser.add_argument(
        "--status",
        metavar="S",
        choices=sorted({s for k in LIST_KINDS for s in policy_for(k).statuses}),
        help="only those in this status (a status the --kind has)",
    )
    parser.add_argument("--running", action="store_true", help="only running executions")
    parser.add_argument("--since", metavar="DURATION", help="only those created within, e.g. 2h")
    parser.add_argument("--limit", metavar="N", type=int, default=20, help="at most N (20)")
    return parser


def _list_filters(args: Any) -> dict[str, Any]:
    if args.running and args.status not in (None, "running"):
        raise UsageError(f"--running contradicts --status {args.status}; use one of them")
    if args.limit < 1:
        raise UsageError(f"--limit must be at least 1, got {args.limit}")
    status = "running" if args.running else args.status
    if status is not None and status not in policy_for(args.kind).statuses:
        raise UsageError(
            f"a {args.kind} is never {status}; its statuses: "
            + ", ".join(sorted(policy_for(args.kind).statuses))
        )
    since = None if args.since is None else time.time() - parse_duration(args.since)
    return {"status": status, "since": since}


def list_rows(store: Store, kind: str, filters: dict[str, Any], limit: int) -> list[Any]:
    """The newest ``limit`` records of ``kind``: sessions with every column, the other
    kinds as the dashboard's runs list has them (``label``: a flow's file, a play's name,
    a schedule run's action; ``parent_id``: a play's show, a schedule run's schedule)."""
    if canonical_entity_type(kind) == "session":  # the sessions table: every column
        return store.sessions.list_recent(**filters, limit=limit)
    from lirun.store.ui_reads import RunFilter

    flt = RunFilter(status=filters["status"], kinds=(kind,), since=filters["since"])
    rows = store.ui.runs_page(flt, limit=limit)
    names: dict[str, str] = {}
    if kind == "schedule_run":  # a schedule by its name, not its id
        names = {s.id: s.name for s in store.schedules.list_all(include_deleted=True)}
    return [
        {
            **{k: v for k, v in row.as_dict().items() if k != "meta"},  # the dashboard's
            "status_reason_code": row.reason_code,
            "status_reason_summary": row.reason_summary,
            **({"schedule": names.get(str(row.parent_id))} if names else {}),
        }
        for row in rows
    ]


def show_list(args: Any, url: str) -> int:
    filters = _list_filters(args)
    # A run is its whole row; the other kinds are the dashboard's runs-list row.
    schema = STATUS_ROW_SCHEMA if args.kind == "run" else RUN_ROW_SCHEMA
    try:
        store = open_store(url, readonly=True)
    except DatabaseMissingError:
        print_json([], schema=schema) if args.json else print(
            f"no runs yet (no database at {redact_url(url)})"
        )
        return 0
    try:
        rows = list_rows(store, args.kind, filters, args.limit)
    finally:
        store.close()
    if args.json:
        from lirun.store.records import present_run

        shown = [present_run(r) for r in rows] if args.kind == "run" else rows
        print_json(shown, schema=schema)
    elif not rows:
        filtered = filters["status"] or filters["since"]
        print("no runs match these filters" if filtered else "no runs yet")
    elif args.kind == "run":
        from lirun.cli.render import render_list

        render_list(rows, time.time())
    else:
        from lirun.cli.list_render import render_kind_list

        render_kind_list(args.kind, rows, time.time())
    return 0


def show_one(args: Any, url: str) -> int:
    # The document lirun.Run.as_dict() returns too: one builder, below cli/ and client/.
    from lirun.views.detail import load_detail, resolve_record

    try:
        store = open_store(url, readonly=True)
    except DatabaseMissingError as exc:
        raise NotFoundError(f"{exc}; so there is no record {args.id!r}") from exc
    now = time.time()
    try:
        kind, row = resolve_record(store, args.id)
        detail = load_detail(store, kind, row, now)
    finally:
        store.close()
    if kind == "invocation" and row.get("kind") == "flow":
        detail["flow"] = flow_detail(row["id"], url)
    if args.json:
        print_json(detail, schema=RECORD_SCHEMA)
    else:
        from lirun.cli.render import render_record

        detail["stderr_tail"] = stderr_tail(kind, detail)  # shown, not in the JSON (li logs)
        render_record(detail, now)
        if detail.get("flow"):
            from lirun.cli.flow_view import render_flow

            render_flow(detail["flow"])
    return 0


STDERR_LINES = 5  # of a failed run's stderr, under its record (li logs has the rest)


def stderr_tail(kind: str, detail: dict[str, Any]) -> list[str]:
    """The last lines of a failed record's stderr (its run directory's), escaped; [] for
    one that did not fail or whose file is gone. Read here, on the fast path: ``os``."""
    status, run_dir = detail.get("status"), detail.get("run_dir")
    if not run_dir or not is_terminal(kind, status) or is_success(kind, status):
        return []
    from lirun.cli.render import clip
    from lirun.run_output import STDERR, last_lines, stream_dir
    from lirun.visible import visible

    path = f"{stream_dir(str(run_dir))}/{STDERR}"
    return [clip(visible(line, keep="\t"), 200) for line in last_lines(path, STDERR_LINES)]


def flow_detail(invocation_id: str, url: str) -> dict[str, Any] | None:
    """A flow invocation's legs (its report), or None when the flow cannot be read
    (said on stderr: the record itself is still shown)."""
    from lirun.errors import LirunError
    from lirun.flows.engine import flow_report

    try:
        return dict(flow_report(invocation_id, db_url=url).to_dict())
    except LirunError as exc:
        sys.stderr.write(f"li status: the flow's legs cannot be shown: {exc}\n")
        return None


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.kind in _OLD_KINDS:
        new = _OLD_KINDS[args.kind]
        sys.stderr.write(f"li status: --kind {args.kind} is deprecated; use --kind {new}\n")
        args.kind = new
    url = resolve_db_url(args.db)
    deliver_pending("li status", url)
    if args.id is None:
        return show_list(args, url)
    if args.status or args.running or args.since or args.kind != "run":
        raise UsageError(
            "--kind, --status, --running and --since filter the list; drop them with an ID"
        )
    return show_one(args, url)

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
from lirun.errors import AmbiguousIdError, DatabaseMissingError, NotFoundError, UsageError
from lirun.hints import TYPE_CHECKING, Any
from lirun.lifecycle import canonical_entity_type, is_success, is_terminal, policy_for, shown_kind
from lirun.paths import resolve_db_url
from lirun.store import Store, open_store
from lirun.store.urls import redact_url

if TYPE_CHECKING:  # annotations only: the record layer loads only when a row is judged
    from lirun.record.ownership import OwnedRecord
    from lirun.store.rows import SessionRow

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


def resolve_record(store: Store, ident: str) -> tuple[str, dict[str, Any]]:
    """``(kind, row)`` for what ``ident`` names, resolved exactly as ``li wait`` does.

    NotFoundError when nothing matches; AmbiguousIdError (a UsageError) listing at most
    ten candidates and how many more when a prefix or suffix is ambiguous.
    """
    from lirun.wait.resolve import AMBIGUOUS, resolve_targets

    if not ident.strip():
        raise UsageError("the ID must not be empty")
    [target] = resolve_targets(store, [ident])
    if target.problem == AMBIGUOUS:
        raise AmbiguousIdError(ident, target.candidates, target.total)
    row = (
        None
        if target.kind is None or target.id is None
        else store.get_entity(target.kind, target.id)
    )
    if target.kind is None or row is None:
        raise NotFoundError(
            f"no execution or record with id, prefix or suffix {ident!r}; see `li status`"
        )
    return target.kind, row


def owner_verdict(row: SessionRow, now: float) -> dict[str, Any] | None:
    """For a running session: why its owner looks dead (li reap's judgment), else None."""
    if row.status != "running":
        return None
    from lirun.liveness import boot_id, host_name, judge_owner, process_start_time

    verdict = judge_owner(
        row, now=now, host=host_name(), boot_id=boot_id(), process_start_time_of=process_start_time
    )
    return None if verdict is None else verdict._asdict()


def liveness(kind: str, row: dict[str, Any], now: float) -> dict[str, Any] | None:
    """For a running session or flow, or an active show: is its owner alive, and if not,
    the command that reaps it (``record.ownership``); None for any other record."""
    if kind not in ("session", "invocation", "show"):
        return None
    if row.get("status") != ("active" if kind == "show" else "running"):
        return None  # ended: nothing owns it (ownership.running_status), so nothing to load
    from lirun.liveness import boot_id, host_name, process_start_time
    from lirun.record.ownership import judge

    found = judge(
        kind,
        owned_row(kind, row),
        now=now,
        host=host_name(),
        boot_id=boot_id(),
        process_start_time_of=process_start_time,
    )
    return None if found is None else found.to_dict()


def owned_row(kind: str, row: dict[str, Any]) -> OwnedRecord:
    """The typed row of a session, invocation or show record as ``get_entity`` read it:
    what the owner judgment reads (the detail document itself stays the dict)."""
    from lirun.store.rows import InvocationRow, SessionRow, ShowRow

    if kind == "session":
        return SessionRow.from_row(row)
    return InvocationRow.from_row(row) if kind == "invocation" else ShowRow.from_row(row)


def backing_dirs(store: Store, kind: str, entity_id: str) -> dict[str, Any]:
    """``artifact_dir`` and ``run_dir`` as ``li wait`` reports them (design.md §4.1): the
    stored roots of the record's backing session (the session itself for a session)."""
    rows = store.waits.fetch_rows({kind: [entity_id]})
    return {
        "artifact_dir": (rows[0].artifact_dir or None) if rows else None,
        "run_dir": (rows[0].run_dir or None) if rows else None,
    }


def load_detail(store: Store, kind: str, row: dict[str, Any], now: float) -> dict[str, Any]:
    """The record plus its history, admin events and (for an invocation) its runs."""
    from lirun.store.records import present_run
    from lirun.store.rows import SessionRow

    session = SessionRow.from_row(row) if kind == "session" else None
    # An invocation's own ``kind`` column (flow / manual) must not hide the record's kind.
    shown = present_run(session) if session is not None else row
    detail: dict[str, Any] = {**shown, "kind": shown_kind(kind)}
    if kind == "invocation":
        detail["invocation_kind"] = row.get("kind") or "manual"
    dirs = backing_dirs(store, kind, row["id"])
    detail["artifact_dir"] = dirs["artifact_dir"]
    if detail.get("run_dir") is None:  # a flow invocation has its own; a manual one borrows
        detail["run_dir"] = dirs["run_dir"]
    detail["transitions"] = [t.as_dict() for t in store.list_transitions(kind, row["id"])]
    detail["admin_events"] = [e.as_dict() for e in store.list_admin_events(row["id"])]
    if session is not None:
        detail["owner_verdict"] = owner_verdict(session, now)
        detail["work"] = run_work(session)
    detail["liveness"] = liveness(kind, row, now)
    if kind == "invocation":
        detail["runs"] = [present_run(s) for s in store.waits.invocation_sessions(row["id"])]
        detail["sessions"] = detail["runs"]  # the old key, deprecated (docs/json.md)
    if kind == "schedule_run":
        detail.update(schedule_chain(store, row))
    if kind in ("session", "play"):
        from lirun.teams.talk import record_talk

        talk = record_talk(store, kind, row)
        if talk is not None:
            detail["team"] = talk
    return detail


def run_work(session: SessionRow) -> dict[str, Any] | None:
    """What an ended execution's evidence says it did (``record.work``): "reply only",
    "1 commit (abc1234), 3 files changed"; None while it runs."""
    if session.status == "running":
        return None
    from lirun.record.work import describe_work

    found = describe_work(session.status_evidence_refs, session.artifact_verification_json)
    return found.as_dict()


def schedule_chain(store: Store, row: dict[str, Any]) -> dict[str, Any]:
    """A schedule run's chain: its schedule's name and what it produced (kind, id,
    status and reason of the run, flow invocation or show)."""
    chain: dict[str, Any] = {}
    if row.get("schedule_id"):
        schedule = store.schedules.get_by_id(row["schedule_id"])
        chain["schedule"] = schedule.name if schedule else None
    getters = (
        ("run", "session_id", store.sessions.get),
        ("invocation", "invocation_id", store.invocations.get),
        ("show", "show_id", store.shows.get),
    )
    for kind, key, get in getters:
        if row.get(key):
            made = get(row[key])
            status = made.status if made is not None else "?"
            reason = (made.status_reason_code if made is not None else None) or ""
            chain["produced"] = f"{kind} {row[key]} {status} {reason}".strip()
    return chain


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

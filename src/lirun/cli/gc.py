"""``li gc``: prune old records to tombstones and remove their run directories
(docs/retention.md). It parses, makes one library call (``record.retention``) and renders;
``--schedule`` stores the same options as a schedule that workers apply."""

from __future__ import annotations

import sys
from typing import Any

from lirun.cli.common import add_db_option, deliver_pending, make_parser, print_json, warn
from lirun.errors import UsageError
from lirun.lifecycle import policy_for, shown_kind
from lirun.record.retention import GcOptions, collect_garbage, default_actor
from lirun.record.retention_rules import MAX_OLDER_THAN, REFUSAL_TEXT, RetentionPolicy
from lirun.schedules.actions import gc_action_words
from lirun.schedules.durations import parse_duration
from lirun.schedules.gc_schedule import store_gc_schedule
from lirun.settings import Settings
from lirun.signals import SignalTrap
from lirun.store import open_store

PROG = "li gc"
EXIT_CODES = """\
  0    done, also when nothing was old enough; records gc refused to prune (running, in
       a running flow or an active show, outcome pending in a spool) are named on stderr
  1    some run directories could not be removed (said on stderr); their records are
       tombstoned and the next li gc removes them
  2    usage error (a bad duration or status), or no database
  130  interrupted (SIGINT; 143 for SIGTERM): gc stops between two batches, so each
       record is whole or tombstoned; run li gc again to finish"""

DESCRIPTION = """\
Prune records that ended more than DUR ago: their run directories (streams, artifacts,
branch snapshots) are removed and the bulky columns of their rows (prompt, reply,
transcript, evidence) cleared; a tombstone stays with the id, status, reason, exit code,
times, cost, tokens, and when and by whom it was pruned. `li wait ID` on a pruned id
prints the line it printed before; `li status ID` says it was pruned.

Never pruned: a running record, a run of a running flow or an active show, a record
whose outcome is pending in a spool. Pruning goes in batches (progress on stderr); it is
safe to interrupt and to repeat.

--schedule EVERY stores these options as the schedule "gc" (action `gc ...`), which the
workers (li worker) apply every EVERY, e.g. li gc --older-than 90d --schedule 1d."""

_MAX_LISTED = 20


def build_parser() -> Any:
    parser = make_parser(PROG, DESCRIPTION, EXIT_CODES)
    parser.add_argument(
        "--older-than", required=True, metavar="DUR", help="e.g. 30d, 12h, 1d12h, 730d"
    )
    parser.add_argument(
        "--status",
        action="append",
        default=[],
        metavar="S",
        help="prune only records that ended with this status (repeatable)",
    )
    parser.add_argument(
        "--keep-failed",
        action="store_true",
        help="keep every record that did not succeed (failed, timed out, cancelled, ...)",
    )
    parser.add_argument("--dry-run", action="store_true", help="say what would go; change nothing")
    parser.add_argument("--json", action="store_true", help="the summary as one JSON object")
    parser.add_argument(
        "--batch", type=int, default=500, metavar="N", help="records per transaction (500)"
    )
    parser.add_argument(
        "--vacuum",
        action="store_true",
        help="then VACUUM: SQLite returns the freed pages to the file system",
    )
    parser.add_argument(
        "--schedule",
        metavar="EVERY",
        help="store these options as the schedule 'gc' run by workers every EVERY (e.g. 1d)",
    )
    add_db_option(parser)
    return parser


def parse_policy(args: Any) -> Any:
    """The retention policy of the options; UsageError for a bad duration or status."""
    older = parse_duration(args.older_than, "--older-than", high=MAX_OLDER_THAN)
    terminal = policy_for("session").terminal
    for status in args.status:
        if status not in terminal:
            known = ", ".join(sorted(terminal))
            raise UsageError(f"--status {status!r} is not a final status; give one of {known}")
    if args.batch < 1:
        raise UsageError(f"--batch {args.batch}: give a positive number of records, e.g. 500")
    return RetentionPolicy(
        older_than=older,
        statuses=tuple(dict.fromkeys(args.status)),
        keep_failed=args.keep_failed,
        batch=args.batch,
    )


def main(argv: list[str], settings: Settings) -> int:
    args = build_parser().parse_args(argv)
    policy = parse_policy(args)
    if args.schedule is not None:
        return _schedule(args, policy)
    if not args.dry_run:
        deliver_pending(PROG, args.db)
    store = open_store(args.db, create=False)
    options = GcOptions(dry_run=args.dry_run, actor=default_actor(), vacuum=args.vacuum)
    # A signal stops gc between two batches, never inside one (its exit code is 128 + n).
    with SignalTrap() as trap:
        try:
            tally = collect_garbage(
                store,
                policy,
                options,
                progress=lambda line: warn(PROG, line),
                stop=lambda: trap.received is not None,
            )
        finally:
            store.close()
    _report_refusals(tally)
    for problem in tally.problems:
        warn(PROG, f"warning: {problem}")
    if args.json:
        print_json(summary(tally, policy, dry_run=args.dry_run), schema=GC_SCHEMA)
    else:
        print(sentence(tally, dry_run=args.dry_run))
        for line in by_status(tally.would_prune):  # --dry-run: what would go, by status
            print(line)
    if trap.received is not None:
        warn(
            PROG,
            f"{trap.signal_name} received: stopped between two batches; every record is "
            "whole or a tombstone; run li gc again to finish",
        )
        return trap.exit_code() or 130
    return 1 if tally.problems else 0


def _report_refusals(tally: Any) -> None:
    for kind, record_id, cause in tally.refused[:_MAX_LISTED]:
        warn(PROG, f"not pruned: {shown_kind(kind)} {record_id}: {REFUSAL_TEXT[cause]}")
    if len(tally.refused) > _MAX_LISTED:
        warn(PROG, f"not pruned: {len(tally.refused) - _MAX_LISTED} more (see --json)")


def summary(tally: Any, policy: Any, *, dry_run: bool) -> dict[str, Any]:
    """``--json``: every kind as ``li`` shows it (a run, not its table's session)."""
    out = {
        "dry_run": dry_run,
        "policy": policy.to_dict(),
        "pruned": {shown_kind(k): n for k, n in tally.pruned.items()},
        "kept": dict(tally.kept),
        "refused": [{"kind": shown_kind(k), "id": i, "cause": c} for k, i, c in tally.refused],
        "bytes": {"columns": tally.bulk_bytes, "files": tally.file_bytes},
        "run_dirs_removed": tally.files_removed,
        "run_dirs_elsewhere": tally.files_elsewhere,
        "problems": list(tally.problems),
    }
    if dry_run:
        out["would_prune"] = [
            {"kind": shown_kind(k), "id": i, "status": s} for k, i, s in tally.would_prune
        ]
    return out


GC_SCHEMA = "lirun.gc/2"  # /2: a run's kind is run, was session (docs/json.md)
_KIND_WORDS = {"session": "runs", "invocation": "flow invocations"}


def by_status(would_prune: list[tuple[str, str, str | None]]) -> list[str]:
    """``runs: completed 3, failed 1``: one line per kind of what a dry run would prune."""
    counts: dict[str, dict[str, int]] = {}
    for kind, _, status in would_prune:
        per_kind = counts.setdefault(kind, {})
        per_kind[status or "unknown"] = per_kind.get(status or "unknown", 0) + 1
    return [
        f"  {_KIND_WORDS.get(kind, kind)}: "
        + ", ".join(f"{status} {n}" for status, n in sorted(per_kind.items()))
        for kind, per_kind in counts.items()
    ]


def _size(count: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1024 or unit == "GB":
            return f"{count} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024  # type: ignore[assignment]
    return f"{count} B"


def sentence(tally: Any, *, dry_run: bool) -> str:
    runs, flows = tally.pruned.get("session", 0), tally.pruned.get("invocation", 0)
    verb = "would prune" if dry_run else "pruned"
    text = (
        f"{verb} {runs} run(s) and {flows} flow invocation(s): "
        f"{_size(tally.file_bytes)} of run directories, {_size(tally.bulk_bytes)} of columns"
    )
    kept = sum(tally.kept.values())
    if kept:
        text += f"; kept {kept} by --status/--keep-failed"
    if tally.refused:
        text += f"; refused {len(tally.refused)} still in use"
    if tally.files_elsewhere:
        text += f"; {tally.files_elsewhere} run directories are on other hosts (run li gc there)"
    return text


def _schedule(args: Any, policy: Any) -> int:
    if args.dry_run or args.vacuum:
        raise UsageError("--schedule stores the policy; give --dry-run or --vacuum without it")
    row = store_gc_schedule(args.db, policy, every=args.schedule)
    if args.json:
        print_json(row.as_dict(), schema="lirun.schedule/1")
    else:
        sys.stdout.write(f"schedule {row.name}: li gc {' '.join(gc_words(policy))} {row.spec}\n")
    return 0


def gc_words(policy: Any) -> list[str]:
    return list(gc_action_words(policy))

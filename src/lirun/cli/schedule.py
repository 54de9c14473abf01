"""``li schedule``: define the runs a worker starts by time (docs/schedules.md).

Each subcommand parses, makes one library call (``lirun.schedules.registry``) and
renders. Every definition is checked in full before the database is opened, so a usage
error (exit 2) writes nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from lirun.cli.common import add_db_option, in_words, make_parser, print_json, print_table, warn
from lirun.errors import DatabaseMissingError, NotFoundError, UsageError
from lirun.providers.registry import get_provider, provider_names, providers
from lirun.schedules import registry
from lirun.schedules.actions import Action, example, parse_action
from lirun.schedules.applyfile import load_apply_file
from lirun.schedules.definition import (
    POLICY_KEYS,
    Definition,
    Policies,
    check_name,
    check_stored_size,
    describe_policies,
    make_policies,
)
from lirun.schedules.event_action import check_templates
from lirun.schedules.registry import current_actor
from lirun.schedules.submit import fire_now
from lirun.schedules.triggers import EVENT_KINDS, format_utc, parse_trigger
from lirun.schedules.webhooks import webhook_words
from lirun.settings import Settings
from lirun.store import Store, open_store
from lirun.store.rows import ScheduleRow

PROG = "li schedule"
EXIT_CODES = """\
  0    done (or nothing to do: already enabled, disabled, or apply found no change)
  1    apply: a schedule changed while apply ran, so that change was not made (said on
       stderr); run apply again
  2    usage error: an invalid name, trigger, zone, duration, time, policy or action (what
       was wrong is said on stderr, with a valid example; nothing is written); an
       unknown schedule name; a name already taken; an invalid apply file (file:line);
       the database could not be opened or written"""

ACTIONS = """\
The ACTION follows `--`:
  agent PROVIDER[/MODEL] PROMPT [--cwd DIR] [--timeout S] [--idle-timeout S]
        [--stall-timeout S]
        [--profile NAME] [--playbook NAME] [--artifact ID=PATH[?]] [-- PROVIDER_OPTIONS]
  run [--cwd DIR] [--timeout S] [--idle-timeout S] [--] CMD ...
  flow FILE [--cwd DIR]      show FILE [--cwd DIR]
  gc --older-than DUR [--status S]... [--keep-failed]   (li gc's retention policy)
The working directory and the flow or show file are resolved (and the file's sha256
kept) now; a worker where they are missing or changed fails the run."""

_AGENT = next(iter(provider_names()), "PROVIDER")  # the example names a provider known

DESCRIPTION = f"""\
A schedule starts an action by time: --cron EXPR [--tz ZONE] (five fields, evaluated in
the IANA zone ZONE, default this machine's zone, stored by name), --every DURATION
(30s, 5m, 2h, 1d, 1h30m; counted from the schedule's creation), --at TIME (RFC 3339
with an offset, e.g. 2026-12-24T18:00:00+01:00; without one only with --tz), or by event:
--poll CMD runs CMD every --every (default 1m); each JSON object it prints whose --key
(default id) was never seen fires the action once, which reads it as {{{{ event.FIELD }}}}
(the first poll only records what exists, unless --backfill). --webhook --secret-env VAR
makes li ui accept POST /hooks/NAME signed with the secret in VAR (X-Hub-Signature-256);
each delivery (X-GitHub-Delivery, else --key) fires the action once.

{ACTIONS}
  li schedule add nightly --cron '30 2 * * *' --tz Europe/Berlin -- \\
      agent {_AGENT} 'review the open pull requests' --timeout 1800
  li schedule add poll --every 5m --overlap skip -- run ./poll.sh
  li schedule add prs --poll 'gh pr list --json number,title,url' --key number -- \\
      agent {_AGENT} 'Review pull request {{{{ event.number }}}}: {{{{ event.title }}}}'
  li schedule apply schedules.yaml --dry-run

Every change (add, apply, enable, disable, delete) is recorded in the schedule's history
with its own reason code (li schedule show NAME). Workers (li worker) fire due schedules;
anyone who can write to the database can make them run commands."""

SUBCOMMANDS = ("add", "list", "show", "enable", "disable", "delete", "apply", "runs", "fire")


def _sub(sub: Any, parser: argparse.ArgumentParser, name: str, helptext: str) -> Any:
    child = sub.add_parser(
        name, help=helptext, description=helptext, epilog=parser.epilog,
        formatter_class=parser.formatter_class,
    )  # fmt: skip
    add_db_option(child)
    return child


def _add_policies(add: Any) -> None:
    opt = add.add_argument
    opt("--overlap", choices=("skip", "allow"), help="a due time while a run is active, or "
        "an event while a run about the same --key is: skip it (default) or start "
        "another")  # fmt: skip
    opt("--missed", metavar="skip|run_once", help="due times no worker fired within "
        "--missed-grace: recorded as skipped (default) or run once (default for --at)")  # fmt: skip
    opt("--max-runs", metavar="N", help="stop after N runs have started")
    opt("--budget-usd", metavar="X", help="stop when the recorded cost reaches X dollars")
    opt("--budget-tokens", metavar="N", help="stop when the recorded tokens reach N")
    opt("--budget-window", metavar="DURATION", help="count the budget over this rolling window")
    opt("--start-deadline", metavar="DURATION", help="a queued run not started by then "
        "fails (default 1h)")  # fmt: skip
    opt("--retries", metavar="N", help="new attempts for runs the record marks retryable")
    opt("--notify", metavar="CMD", help="a shell command run after each run ends")
    opt("--missed-grace", metavar="DURATION", help="how late a fire may start (default 60s)")


def build_parser() -> argparse.ArgumentParser:
    parser = make_parser(PROG, DESCRIPTION, EXIT_CODES)
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="{" + ",".join(SUBCOMMANDS) + "}"
    )
    add = _sub(sub, parser, "add", "define a schedule: li schedule add NAME TRIGGER -- ACTION")
    add.usage = (
        "li schedule add NAME (--cron EXPR [--tz ZONE] | --every DURATION | --at TIME | "
        "--poll CMD [--every DURATION] [--key FIELD] [--backfill] [--poll-timeout DURATION] | "
        "--webhook --secret-env VAR [--key FIELD] | --after OTHER[:completed|failed|any]) "
        "[policies] [--disabled] [--json] -- ACTION ..."
    )
    add.description = "define a schedule: li schedule add NAME TRIGGER -- ACTION\n\n" + ACTIONS
    add.add_argument("name", metavar="NAME", help="1-64 of A-Z a-z 0-9 . _ - (unique)")
    add.add_argument("--cron", metavar="EXPR", help="five cron fields, e.g. '30 2 * * *'")
    add.add_argument("--tz", metavar="ZONE", help="IANA zone (default: this machine's)")
    add.add_argument("--every", metavar="DURATION", help="e.g. 30s, 5m, 2h, 1d, 1h30m")
    add.add_argument("--at", metavar="TIME", help="once, e.g. 2026-12-24T18:00:00+01:00")
    add.add_argument(
        "--poll", metavar="CMD", help="every --every (default 1m) run CMD; new items fire"
    )
    add.add_argument(
        "--key", metavar="FIELD", help="a polled item's key (default id; e.g. pull_request.number)"
    )
    add.add_argument(
        "--backfill", action="store_true", help="the first poll fires what it finds, too"
    )
    add.add_argument(
        "--poll-timeout", metavar="DURATION", help="how long CMD may run (default 60s)"
    )
    add.add_argument(
        "--webhook", action="store_true", help="fire on each signed POST /hooks/NAME to li ui"
    )
    add.add_argument(
        "--secret-env", metavar="VAR", help="li ui's variable holding the webhook's secret"
    )
    add.add_argument(
        "--after", metavar="OTHER[:OUTCOME]", help="fire when a run of OTHER completes|failed|any"
    )
    add.add_argument("--disabled", action="store_true", help="create it disabled")
    add.add_argument("--json", action="store_true", help="the stored schedule as JSON")
    _add_policies(add)
    listing = _sub(sub, parser, "list", "the schedules with their next due time")
    listing.add_argument("--all", action="store_true", help="deleted schedules too")
    listing.add_argument("--json", action="store_true", help="one JSON array")
    for name, helptext in (
        ("show", "one schedule's definition and history"),
        ("runs", "one schedule's runs with their outcomes (newest first)"),
    ):
        child = _sub(sub, parser, name, helptext)
        child.add_argument("name", metavar="NAME")
        child.add_argument("--json", action="store_true", help="JSON on stdout")
        if name == "runs":
            child.add_argument("--limit", type=int, default=100, metavar="N", help="default 100")
    for name, helptext in (
        ("enable", "enable a schedule (due from now on)"),
        ("disable", "disable a schedule (it fires no more until enabled)"),
        ("delete", "delete a schedule (kept in history; the name is free again)"),
    ):
        child = _sub(sub, parser, name, helptext)
        child.add_argument("name", metavar="NAME")
        child.add_argument("--json", action="store_true", help="the schedule as JSON")
    fire = _sub(sub, parser, "fire", "queue one run of a schedule now (a worker runs it)")
    fire.add_argument("name", metavar="NAME")
    fire.add_argument("--json", action="store_true", help="the queued run as JSON")
    apply = _sub(sub, parser, "apply", "make the stored schedules match a YAML file")
    apply.add_argument("file", metavar="FILE", help="the schedules file (docs/schedules.md)")
    apply.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    apply.add_argument("--json", action="store_true", help="the plan as JSON")
    return parser


def _split_action(argv: list[str]) -> tuple[list[str], list[str] | None]:
    if argv[:1] == ["add"] and "--" in argv:
        cut = argv.index("--")
        return argv[:cut], argv[cut + 1 :]
    return argv, None


def main(argv: list[str], settings: Settings) -> int:
    mine, action = _split_action(list(argv))
    args = build_parser().parse_args(mine)
    now = int(time.time())
    if args.command == "add":
        return _add(args, action, now)
    if args.command == "apply":
        return _apply(args, now)

    try:
        store = open_store(args.db, create=False)  # these only read or change what exists
    except DatabaseMissingError as exc:
        if args.command != "list":
            raise NotFoundError(f"no schedule named {getattr(args, 'name', '')!r}: {exc}") from None
        if args.json:
            print_json([], schema="lirun.schedule/1")
        return 0
    try:
        return HANDLERS[args.command](store, args, now)
    finally:
        store.close()


def _add(args: Any, action: list[str] | None, now: int) -> int:
    if action is None:
        raise UsageError(
            f"no action: give it after --, e.g. li schedule add NAME --every 1h {example()}"
        )
    name = check_name(args.name)
    trigger = parse_trigger(
        cron=args.cron,
        every=args.every,
        at=args.at,
        tz=args.tz,
        now=now,
        poll=args.poll,
        key=args.key,
        backfill=args.backfill,
        poll_timeout=args.poll_timeout,
        webhook=args.webhook,
        secret_env=args.secret_env,
        after=args.after,
    )
    definition = Definition(
        name=name,
        trigger=trigger,
        action=parse_action(action),
        policies=make_policies({k: getattr(args, k) for k in POLICY_KEYS}, trigger),
        enabled=not args.disabled,
    )
    registry.refuse_past_at(definition, now)
    check_templates(definition.action, has_events=trigger.kind in EVENT_KINDS)
    check_stored_size(definition)  # before the store opens: a refused add writes nothing
    store = open_store(args.db)
    try:
        row = registry.add(store, definition, now=now, actor=registry.current_actor())
    finally:
        store.close()
    task = definition.action.task
    if definition.policies.budget_usd is not None and task and task.agent:
        provider = get_provider(task.agent.partition("/")[0])
        if not provider.capabilities.reports_cost:
            print(
                f"li schedule: note: {provider.name} reports no cost, so --budget-usd cannot "
                "see this schedule's runs; give --budget-tokens to bound them",
                file=sys.stderr,
            )
    if args.json:
        print_json(row.as_dict(), schema="lirun.schedule/1")
    else:
        print(added_sentence(row, now))
    return 0


def added_sentence(row: ScheduleRow, now: float) -> str:
    """``added schedule tick; next run 10:40:03 (in 3 s)``: the confirmation of an add."""

    name, due = row.name, row.next_due_at
    if row.status == "disabled" or row.enabled in (0, False):
        return f"added schedule {name}, disabled: it runs once `li schedule enable {name}`"
    if due is None:
        return f"added schedule {name}; it has no next run"
    same_day = time.localtime(due)[:3] == time.localtime(now)[:3]
    at = time.strftime("%H:%M:%S" if same_day else "%Y-%m-%d %H:%M:%S", time.localtime(due))
    return f"added schedule {name}; next run {at} (in {in_words(due - now)})"


def _due(due: Any) -> str:
    return "-" if due is None else format_utc(int(due))


def _local(due: Any) -> str:
    if due is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S %z", time.localtime(int(due)))


def _list(store: Store, args: Any, now: int) -> int:
    rows = store.schedules.list_all(include_deleted=args.all)
    if args.json:
        print_json([r.as_dict() for r in rows], schema="lirun.schedule/1")
        return 0
    header = ("NAME", "STATUS", "TRIGGER", "NEXT DUE (LOCAL)", "NEXT DUE (UTC)", "ACTION")
    lines: list[tuple[Any, ...]] = [header]
    lines += [
        (r.name, r.status, r.spec or "", _local(r.next_due_at), _due(r.next_due_at), _action(r))
        for r in rows
    ]
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header) - 1)]
    for line in lines:
        cells = [str(c).ljust(w) for c, w in zip(line, widths, strict=False)]
        print("  ".join([*cells, str(line[-1])]).rstrip())
    return 0


def _action(row: ScheduleRow) -> str:
    try:
        return Action.from_dict(row.action_json).describe()
    except (KeyError, TypeError, ValueError):
        return str(row.action_kind)


def _show(store: Store, args: Any, now: int) -> int:
    row = registry.find(store, args.name)
    policies = Policies.from_dict(row.policies_json or {})
    history = store.list_transitions("schedule", row.id)
    kind = (row.trigger_json or {}).get("kind")
    polled = kind in EVENT_KINDS
    events = _events(store, row) if polled else None
    if args.json:
        detail = {"schedule": row.as_dict(), "history": [t.as_dict() for t in history]}
        if events is not None:
            detail["events"] = events
        print_json(detail, schema="lirun.schedule_detail/1")
        return 0
    fields: list[tuple[str, Any]] = [
        ("name", row.name), ("id", row.id), ("status", row.status),
        ("reason", row.status_reason_code), ("trigger", row.spec), ("zone", row.tz),
        ("next due", f"{_local(row.next_due_at)}  ({_due(row.next_due_at)})"),
        ("action", _action(row)), ("cwd", (row.action_json or {}).get("cwd")),
        ("policies", _policies(row)),
    ]  # fmt: skip
    if policies.budget_usd is not None or policies.budget_tokens is not None:
        fields.append(("spent", _spent(store, row, policies, now)))
    if kind == "webhook":
        fields.append(("hook", webhook_words(row.name, row.trigger_json or {})))
    elif kind == "poll":
        fields.append(("last poll", _last_poll(row)))
    if events is not None:
        fields.append(("events", f"{events['seen']} seen, {events['fired']} fired a run"))
    for key, value in fields:
        print(f"{key:<10} {value}")
    print("history:")
    for item in history:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(item.created_at))
        extra = _diff_text((item.metadata or {}).get("diff"))
        print(f"  {when}  {item.status:<9} {item.reason_code}  {item.actor or ''}{extra}")
    return 0


def _events(store: Store, row: ScheduleRow) -> dict[str, Any]:
    seen, fired = store.events.count(row.id)
    recent = [_event_dict(e) for e in store.events.list(row.id, limit=20)]
    return {"seen": seen, "fired": fired, "recent": recent}


def _event_dict(event: Any) -> dict[str, Any]:
    return {
        "event_key": event.event_key,
        "source": event.source,
        "seen_at": event.seen_at,
        "baseline": event.baseline,
        "schedule_run_id": event.schedule_run_id,
    }


def _last_poll(row: ScheduleRow) -> str:
    if row.last_poll_at is None:
        return "never (the first good poll records what exists as seen)"
    detail = f": {row.last_poll_detail}" if row.last_poll_detail else ""
    return f"{_local(row.last_poll_at)}  {row.last_poll_reason}{detail}"


def _spent(store: Store, row: ScheduleRow, policies: Any, now: int) -> str:
    """The recorded usage the budgets are checked against (over the window, if any)."""
    since = now - policies.budget_window if policies.budget_window else 0
    usd, tokens = store.schedules.usage(row.id, since=since)
    text = f"{'no cost recorded' if usd is None else f'${usd:.4f}'}, {tokens} tokens"
    if policies.budget_usd is not None:
        blind = "; runs that record no cost are invisible to it"
        if costless := [p.name for p in providers() if not p.capabilities.reports_cost]:
            blind += f" (those of {', '.join(costless)})"
        text += f" (of --budget-usd {policies.budget_usd}{blind})"
    return text


def _policies(row: ScheduleRow) -> str:
    return describe_policies(Policies.from_dict(row.policies_json or {})) or "(defaults)"


def _diff_text(diff: dict[str, Any] | None) -> str:
    if not diff:
        return ""
    return "  " + "; ".join(f"{k}: {v[0]!r} -> {v[1]!r}" for k, v in diff.items())


def _runs(store: Store, args: Any, now: int) -> int:
    row = registry.find(store, args.name)
    runs = store.schedules.list_runs(row.id, limit=args.limit)
    if args.json:
        print_json([r.as_dict() for r in runs], schema="lirun.schedule_run/1")
        return 0
    if not runs:
        warn(PROG, f"{row.name} has no runs yet (workers start them: li worker)")
        return 0
    # a chained run's event key is its parent run's id: PARENT and DEPTH say it instead
    chained = (row.trigger_json or {}).get("kind") == "chain"
    table = []
    for run in runs:
        stamps = [_due(at) for at in (run.due_at, run.started_at, run.ended_at)]
        reason = run.status_reason_code or "-"
        cause = [run.chain_parent_id or "-", run.chain_depth] if chained else [run.event_key or "-"]
        table.append((run.id, run.status, *stamps, *cause, reason))
    header = ("RUN", "STATUS", "DUE (UTC)", "STARTED (UTC)", "ENDED (UTC)",
              *(("PARENT", "DEPTH") if chained else ("EVENT",)), "REASON")  # fmt: skip
    print_table(header, table)
    return 0


def _toggle(store: Store, args: Any, now: int) -> int:
    actor = registry.current_actor()
    if args.command == "delete":
        row, changed = registry.delete(store, args.name, actor=actor), True
    else:
        enabled = args.command == "enable"
        row, changed = registry.set_enabled(store, args.name, enabled, now=now, actor=actor)
    if not changed:
        warn(PROG, f"{row.name} is already {row.status}; nothing changed")
    if args.json:
        print_json(row.as_dict(), schema="lirun.schedule/1")
    elif changed:
        print(toggled_sentence(row, now))
    return 0


def toggled_sentence(row: ScheduleRow, now: float) -> str:
    """``disabled schedule tick``, ``enabled schedule tick; next run ...``."""
    name, status = row.name, row.status
    if status == "enabled":
        return added_sentence(row, now).replace("added", "enabled", 1)
    return f"{status} schedule {name}"


def _apply(args: Any, now: int) -> int:
    loaded = load_apply_file(args.file, now=now)
    store = open_store(args.db)
    try:
        changes = registry.plan(
            store.schedules.list_all(),
            list(loaded.definitions),
            now=now,
            missing=loaded.missing,
            places=loaded.places,
        )
        lost = []
        if not args.dry_run:
            lost = registry.apply(
                store, changes, now=now, source=loaded.path, actor=registry.current_actor()
            )
    finally:
        store.close()
    for change in lost:
        warn(PROG, f"{change.name} changed while apply ran; not {change.op}d: run apply again")
    if args.json:
        print_json(
            {"dry_run": args.dry_run, "changes": [c.to_dict() for c in changes]},
            schema="lirun.schedule_apply/1",
        )
        return 1 if lost else 0
    rows = [(c.op, c.name, ", ".join(c.changes) or c.why or "-") for c in changes]
    if rows:
        print_table(("CHANGE", "SCHEDULE", "DETAIL"), rows)
    else:
        print("no schedules in the file and none stored: nothing to change")
    if args.dry_run:
        warn(PROG, "dry run: nothing was changed")
    return 1 if lost else 0


def _fire(store: Store, args: Any, now: int) -> int:
    run = fire_now(store, args.name, actor=current_actor())
    print_json(run.as_dict(), schema="lirun.schedule_run/1") if args.json else print(run.id)
    return 0


HANDLERS = {
    "fire": _fire,
    "list": _list,
    "show": _show,
    "runs": _runs,
    "enable": _toggle,
    "disable": _toggle,
    "delete": _toggle,
}

"""When a schedule is due: ``--cron EXPR`` (in an IANA zone), ``--every DURATION`` or
``--at TIME``. Pure: every function takes the time it reasons about as an argument.

Due times are integer epoch seconds (UTC). ``next_due(trigger, after)`` is the first due
time strictly after ``after``; ``due_between(trigger, start, end, limit)`` lists the due
times in ``(start, end]``, which is what a worker counts as missed after an outage.

Cron is evaluated by cronsim in the trigger's zone, so wall-clock times follow daylight
saving: a daily 02:30 fires once on the spring-forward day (at 03:00, the first minute
that exists after the gap) and once on the fall-back day (at the first 02:30).
``--every`` is anchored on the schedule's creation time: due at anchor + k·period, k ≥ 1,
never drifting with how late a worker fired. ``--at`` is due once. ``--poll CMD`` is due
as ``--every`` is (default every minute): each due time is one run of CMD, whose new
items are events (``schedules/events.py``). ``--webhook`` is never due: its events come
as signed requests to ``li ui`` (``schedules/webhooks.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from lirun.errors import UsageError
from lirun.schedules.chains import DEFAULT_OUTCOME, parse_after
from lirun.schedules.chains import describe as chain_words
from lirun.schedules.durations import format_duration, parse_duration
from lirun.schedules.events import DEFAULT_KEY, check_key_path

KINDS = ("cron", "every", "at", "poll", "webhook", "chain")
EVENT_KINDS = ("poll", "webhook", "chain")  # the kinds whose runs are each for one event
DEFAULT_POLL_EVERY = "1m"
DEFAULT_POLL_TIMEOUT = "60s"
CRON_EXAMPLE = "'30 2 * * *' (02:30 every day) or '*/15 9-17 * * mon-fri'"
AT_EXAMPLE = "2026-12-24T18:00:00+01:00 or 2026-12-24T17:00:00Z"
ZONE_EXAMPLE = "Europe/Berlin, America/New_York or UTC"
LAST_YEAR = 9000  # every due time stays printable in any zone


@dataclass(frozen=True, slots=True)
class Trigger:
    """One trigger. ``cron``: ``expr`` in ``tz``; ``every``: ``seconds`` from ``anchor``
    (epoch, the schedule's creation); ``at``: the single due time ``at`` (epoch).
    ``tz`` is always an IANA name (``UTC`` for every/at unless given): it is how the
    schedule's times are shown and, for cron, how they are computed."""

    kind: str
    tz: str = "UTC"
    expr: str | None = None
    seconds: int | None = None
    anchor: int | None = None
    at: int | None = None
    command: str | None = None  # poll: the command printing the items
    key: str | None = None  # poll: the items' key (a dotted path)
    backfill: bool | None = None  # poll: the first poll fires what it finds
    timeout: int | None = None  # poll: seconds the command may take
    secret_env: str | None = None  # webhook: the variable holding the secret in li ui's env
    after: str | None = None  # chain: the name of the schedule whose runs' ends fire it
    outcome: str | None = None  # chain: completed, failed or any (schedules/chains.py)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "tz": self.tz}
        for key in (
            "expr", "seconds", "anchor", "at", "command", "key", "backfill", "timeout",
            "secret_env", "after", "outcome",
        ):  # fmt: skip
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trigger:
        kind = data.get("kind")
        if kind not in KINDS:
            raise UsageError(f"stored trigger has unknown kind {kind!r}; expected {KINDS}")
        return cls(
            kind=kind,
            tz=str(data.get("tz") or "UTC"),
            expr=data.get("expr"),
            seconds=data.get("seconds"),
            anchor=data.get("anchor"),
            at=data.get("at"),
            command=data.get("command"),
            key=data.get("key"),
            backfill=data.get("backfill"),
            timeout=data.get("timeout"),
            secret_env=data.get("secret_env"),
            after=data.get("after"),
            outcome=data.get("outcome"),
        )

    def describe(self) -> str:
        """``cron '30 2 * * *' Europe/Berlin``, ``every 1h30m``, ``at 2026-…+01:00``."""
        if self.kind == "cron":
            return f"cron '{self.expr}' {self.tz}"
        if self.kind == "every":
            return f"every {format_duration(self.seconds or 0)}"
        if self.kind == "poll":
            extra = " --backfill" if self.backfill else ""
            return (
                f"poll '{self.command}' every {format_duration(self.seconds or 0)} "
                f"key {self.key}, timeout {format_duration(self.timeout or 0)}{extra}"
            )
        if self.kind == "chain":
            return chain_words(self.after or "", self.outcome or DEFAULT_OUTCOME)
        if self.kind == "webhook":
            return f"webhook, secret ${self.secret_env}, key {self.key}"
        return f"at {format_local(self.at or 0, self.tz)}"


# --- zones ------------------------------------------------------------------------------------


def zone(name: str) -> Any:
    """The ``ZoneInfo`` named ``name``; a UsageError naming valid zones otherwise."""

    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise UsageError(f"time zone {name!r} is empty or padded; use e.g. {ZONE_EXAMPLE}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise UsageError(
            f"unknown time zone {name!r}; give an IANA zone name such as {ZONE_EXAMPLE}"
        ) from None


def local_zone_name(environ: dict[str, str] | None = None, etc: str = "/etc") -> str:
    """This machine's zone as an IANA name (stored at ``add``: the worker's machine may
    be in another zone). ``$TZ`` if set (a POSIX rule such as ``CET-1`` has no IANA name:
    refused), else where ``/etc/localtime`` links,
    else ``/etc/timezone``; no ``/etc/localtime`` at all means UTC (the C library's own
    default). A local zone with no IANA name is a UsageError asking for ``--tz``."""
    env = os.environ if environ is None else environ
    given = _zone_of_path(env.get("TZ", "").removeprefix(":"))
    if given:
        try:
            zone(given)
        except UsageError:
            raise UsageError(
                f"$TZ is {env['TZ']!r}, not an IANA zone name; give --tz ZONE (e.g. "
                f"{ZONE_EXAMPLE}) so that every machine computes the same times"
            ) from None
        return given
    candidates: list[str] = []
    localtime = os.path.join(etc, "localtime")
    if os.path.islink(localtime):
        candidates.append(_zone_of_path(os.path.realpath(localtime)))
    try:
        with open(os.path.join(etc, "timezone"), encoding="utf-8") as file:
            candidates.append(file.read().strip())
    except OSError:
        pass
    for name in candidates:
        if name and not name.startswith("/"):
            try:
                zone(name)
            except UsageError:
                continue
            return name
    if not os.path.lexists(localtime):
        return "UTC"
    raise UsageError(
        "cannot tell this machine's time zone by its IANA name; give --tz ZONE "
        f"(e.g. {ZONE_EXAMPLE})"
    )


def _zone_of_path(text: str) -> str:
    """``/usr/share/zoneinfo/posix/Europe/Berlin`` → ``Europe/Berlin``; other text as is."""
    marker = os.sep + "zoneinfo" + os.sep
    if not text.startswith(os.sep) or marker not in text:
        return text
    name = text.split(marker, 1)[1]
    for prefix in ("posix/", "right/"):
        name = name.removeprefix(prefix)
    return name


def format_local(epoch: int, tz: str) -> str:
    """RFC 3339 in ``tz`` (seconds precision)."""
    return datetime.fromtimestamp(epoch, zone(tz)).isoformat()


def format_utc(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- parsing ----------------------------------------------------------------------------------


def cron_trigger(expr: str, tz: str) -> Trigger:
    """A cron trigger; an expression cronsim refuses is a UsageError with an example."""

    text = " ".join(str(expr).split())
    where = zone(tz)
    if len(text.split()) != 5:
        raise UsageError(
            f"cron expression {expr!r} has {len(text.split())} fields; give 5 "
            f"(minute hour day-of-month month day-of-week), e.g. {CRON_EXAMPLE}"
        )
    try:
        next(CronSim(text, datetime(2026, 1, 1, tzinfo=where)))
    except (CronSimError, StopIteration) as exc:
        raise UsageError(f"cron expression {expr!r}: {exc}; e.g. {CRON_EXAMPLE}") from None
    return Trigger(kind="cron", tz=tz, expr=text)


def every_trigger(duration: str, anchor: int, tz: str = "UTC") -> Trigger:
    seconds = parse_duration(duration, "--every")
    return Trigger(kind="every", tz=tz, seconds=seconds, anchor=int(anchor))


def poll_trigger(
    command: str,
    anchor: int,
    *,
    every: str | None = None,
    key: str | None = None,
    backfill: bool = False,
    timeout: str | None = None,
) -> Trigger:
    """A poll trigger: ``command`` every ``every`` (default 1m), items keyed by ``key``
    (default ``id``), each run of it limited to ``timeout`` (default 60s)."""
    if not isinstance(command, str) or not command.strip():
        raise UsageError("--poll: give a command that prints JSON, e.g. 'gh pr list --json number'")
    path = key if key is not None else DEFAULT_KEY
    check_key_path(path)
    return Trigger(
        kind="poll",
        seconds=parse_duration(every or DEFAULT_POLL_EVERY, "--every"),
        anchor=int(anchor),
        command=command,
        key=path,
        backfill=bool(backfill),
        timeout=parse_duration(timeout or DEFAULT_POLL_TIMEOUT, "--poll-timeout"),
    )


def webhook_trigger(secret_env: str | None, key: str | None = None) -> Trigger:
    """A webhook trigger: events POSTed to ``li ui`` at ``/hooks/NAME``, signed with the
    secret in the environment variable ``secret_env`` (its name is stored, never its
    value), keyed by the delivery id or ``key`` (default ``id``)."""
    if not secret_env:
        raise UsageError(
            "--webhook needs --secret-env VAR: the environment variable of `li ui` that "
            "holds the secret the sender signs with, e.g. --secret-env GITHUB_HOOK_SECRET"
        )
    name = str(secret_env)
    if not (name[0].isalpha() or name[0] == "_") or not set(name) <= _ENV_CHARS:
        raise UsageError(
            f"--secret-env {name!r} is not an environment variable name; give the name "
            "(letters, digits, _), not the secret, e.g. --secret-env GITHUB_HOOK_SECRET"
        )
    path = key if key is not None else DEFAULT_KEY
    check_key_path(path)
    return Trigger(kind="webhook", key=path, secret_env=name)


_ENV_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def parse_time(text: str, tz: str | None) -> int:
    """RFC 3339 with an offset (``Z`` or ``+01:00``) → epoch seconds.

    A time without an offset is read in ``tz`` when one was given explicitly, and refused
    otherwise (a naive time means different instants on different machines). A local
    time that does not exist (the spring-forward gap) or exists twice (the fall-back
    hour) in ``tz`` is refused: give the offset."""
    raw = str(text).strip()
    try:
        value = datetime.fromisoformat(raw.replace("z", "Z"))
    except ValueError:
        raise UsageError(f"--at {text!r} is not an RFC 3339 time; e.g. {AT_EXAMPLE}") from None
    if value.tzinfo is None:
        if tz is None:
            raise UsageError(
                f"--at {text!r} has no UTC offset; add one (e.g. {AT_EXAMPLE}) or give "
                "--tz ZONE to read it in that zone"
            )
        value = _aware(value, tz, text)
    if value.year > LAST_YEAR or value.astimezone(UTC).year > LAST_YEAR:
        raise UsageError(f"--at {text!r} is too far in the future; give a time before {LAST_YEAR}")
    return int(value.timestamp())


def _aware(naive: datetime, tz: str, text: str) -> datetime:
    where = zone(tz)
    early, late = naive.replace(tzinfo=where, fold=0), naive.replace(tzinfo=where, fold=1)

    def exists(value: datetime) -> bool:
        return datetime.fromtimestamp(value.timestamp(), where).replace(tzinfo=None) == naive

    if not exists(early) and not exists(late):
        raise UsageError(
            f"--at {text!r} does not exist in {tz} (clocks go forward); pick another time "
            "or give the offset"
        )
    if early.utcoffset() != late.utcoffset():
        raise UsageError(
            f"--at {text!r} happens twice in {tz} (clocks go back); give the offset, "
            f"e.g. {early.isoformat()} or {late.isoformat()}"
        )
    return early


def at_trigger(text: str, tz: str | None) -> Trigger:
    return Trigger(kind="at", tz=tz or "UTC", at=parse_time(text, tz))


def parse_trigger(
    *,
    cron: str | None = None,
    every: str | None = None,
    at: str | None = None,
    tz: str | None = None,
    now: int,
    local_zone: str | None = None,
    poll: str | None = None,
    key: str | None = None,
    backfill: bool = False,
    poll_timeout: str | None = None,
    webhook: bool = False,
    secret_env: str | None = None,
    after: str | None = None,
) -> Trigger:
    """Exactly one of ``cron``, ``every``, ``at``, ``poll`` (``every`` is then how
    often it polls), ``webhook`` and ``after`` (``OTHER[:OUTCOME]``, a chain). ``tz``
    defaults to ``local_zone`` for cron (resolved by the caller with
    ``local_zone_name``); ``now`` anchors ``every`` and ``poll``."""
    if after is not None:
        given = [
            n
            for n, v in (
                ("--cron", cron), ("--every", every), ("--at", at), ("--poll", poll),
                ("--key", key), ("--poll-timeout", poll_timeout), ("--secret-env", secret_env),
            )
            if v is not None
        ] + (["--webhook"] if webhook else []) + (["--backfill"] if backfill else [])  # fmt: skip
        if given:
            raise UsageError(
                f"--after fires when another schedule's run ends; it cannot take {given[0]}"
            )
        parent, outcome = parse_after(after)
        return Trigger(kind="chain", after=parent, outcome=outcome)
    if webhook:
        given = [
            n
            for n, v in (
                ("--cron", cron),
                ("--every", every),
                ("--at", at),
                ("--poll", poll),
                ("--poll-timeout", poll_timeout),
            )
            if v
        ]
        if backfill:
            given.append("--backfill")
        if given:
            raise UsageError(
                f"--webhook fires on each signed request to li ui; it cannot take {given[0]}"
            )
        return webhook_trigger(secret_env, key)
    if secret_env is not None:
        raise UsageError("--secret-env belongs to a webhook trigger: give --webhook with it")
    if poll is not None:
        if cron is not None or at is not None:
            other = "--cron" if cron is not None else "--at"
            raise UsageError(f"--poll polls every DURATION (--every); it cannot take {other}")
        return poll_trigger(
            poll, now, every=every, key=key, backfill=backfill, timeout=poll_timeout
        )
    for name, value in (("--key", key), ("--poll-timeout", poll_timeout)):
        if value is not None:
            raise UsageError(
                f"{name} belongs to a poll trigger or a webhook: give --poll CMD or --webhook"
            )
    if backfill:
        raise UsageError("--backfill belongs to a poll trigger: give --poll CMD with it")
    named = [k for k, v in (("cron", cron), ("every", every), ("at", at)) if v is not None]
    if len(named) != 1:
        raise UsageError(
            "give exactly one trigger: --cron EXPR [--tz ZONE], --every DURATION, --at TIME "
            "--poll CMD or --webhook"
            + (f" (got {', '.join('--' + g for g in named)})" if named else "")
        )
    if tz is not None:
        zone(tz)
    if cron is not None:
        return cron_trigger(cron, tz or local_zone or local_zone_name())
    if every is not None:
        return every_trigger(every, now, tz or "UTC")
    assert at is not None
    return at_trigger(at, tz)


# --- due times --------------------------------------------------------------------------------


def next_due(trigger: Trigger, after_epoch: int) -> int | None:
    """The first due time strictly after ``after_epoch``; None when there is none (an
    ``at`` trigger whose time has passed)."""
    after = int(after_epoch)
    if trigger.kind in ("webhook", "chain"):
        return None  # its events come as requests, never at a time
    if trigger.kind == "at":
        assert trigger.at is not None
        return trigger.at if trigger.at > after else None
    if trigger.kind in ("every", "poll"):
        assert trigger.seconds
        assert trigger.anchor is not None
        if after < trigger.anchor:
            return trigger.anchor + trigger.seconds
        steps = (after - trigger.anchor) // trigger.seconds + 1
        return trigger.anchor + steps * trigger.seconds
    return _cron_next(trigger, after)


def _cron_next(trigger: Trigger, after: int) -> int | None:
    start = datetime.fromtimestamp(after, zone(trigger.tz))
    try:
        due = int(next(CronSim(trigger.expr or "", start)).timestamp())
    except StopIteration:  # an expression that never matches again (e.g. 30 Feb)
        return None
    # cronsim works in minutes: a start inside a minute can yield that same minute.
    return due if due > after else _cron_next(trigger, after + 60 - after % 60)


def due_between(trigger: Trigger, start: int, end: int, limit: int) -> list[int]:
    """The due times ``t`` with ``start < t <= end``, oldest first, at most ``limit``.

    A worker back from an outage asks for ``limit + 1`` to learn whether more were missed
    than it records one by one."""
    found: list[int] = []
    cursor = int(start)
    while len(found) < limit:
        due = next_due(trigger, cursor)
        if due is None or due > end:
            break
        found.append(due)
        cursor = due
    return found

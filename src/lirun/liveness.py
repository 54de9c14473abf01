"""Owner identity and the pure dead-owner decision (design.md §4.6).

A running execution records who owns it (pid, process start time, host, boot id)
and heartbeats. ``judge_owner`` decides from those facts alone whether the owner
is provably dead or its lease has lapsed; the caller gathers the facts (clock,
host, boot id, a process probe), so the decision is table-testable. It reads the owner
attributes of a typed value (``Owned``): a store row as it is returned, or ``OwnerFacts``
for what is no row (a spool reservation's header).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

from lirun import platform

DEFAULT_LEASE_SECONDS = 60.0
# Several heartbeats fit in one lease, so one slow beat never looks like death.
HEARTBEAT_INTERVAL = DEFAULT_LEASE_SECONDS / 4
# Start times come from clock ticks (Linux) or floats (psutil): allow rounding.
START_TIME_TOLERANCE = 2.0
# The note a dead owner's guard (exec.guard) leaves in the directory of each run whose
# processes it killed; the reaper adds it to the record (record.reap).
OWNER_DEATH_NOTE = "owner_died.json"

ORPHANED = "session.orphaned.no_process"
STALE = "session.stale.no_heartbeat"
_BTIME = "btime:"  # the portable platform's boot ids (lirun.platform.portable)


class Owned(Protocol):
    """What a running record says of its owner: the facts ``judge_owner`` reads. Every
    row with the ``owner_*`` and lease columns (a session's, a flow invocation's, a
    show's, a waited-on target's) is one as it is."""

    @property
    def owner_pid(self) -> int | None: ...
    @property
    def owner_start_time(self) -> float | None: ...
    @property
    def owner_host(self) -> str | None: ...
    @property
    def owner_boot_id(self) -> str | None: ...
    @property
    def heartbeat_at(self) -> float | None: ...
    @property
    def lease_seconds(self) -> float | None: ...


class OwnedGroup(Owned, Protocol):
    """An owned record that also names the child its owner started (a session): what
    ``orphaned_group`` reads to stop the process group a dead owner left running."""

    @property
    def child_pid(self) -> int | None: ...
    @property
    def child_start_time(self) -> float | None: ...


class OwnerFacts(NamedTuple):
    """Owner facts that come from no row (a spool reservation's JSON header), typed so
    the decision has one kind of input whatever the facts were read from."""

    owner_pid: int | None = None
    owner_start_time: float | None = None
    owner_host: str | None = None
    owner_boot_id: str | None = None
    heartbeat_at: float | None = None
    lease_seconds: float | None = None
    child_pid: int | None = None
    child_start_time: float | None = None

    @classmethod
    def from_mapping(cls, facts: Mapping[str, Any]) -> OwnerFacts:
        """The facts of ``facts``' keys of those names; a missing key is unknown (None)."""
        return cls(**{name: facts.get(name) for name in cls._fields})


class OwnerVerdict(NamedTuple):
    """Why a running row's owner is judged dead: what ``update_status`` needs."""

    reason_code: str
    summary: str
    evidence: list[dict[str, Any]]


def boot_id() -> str:
    """This machine's boot id, or "" where the platform has none."""
    return platform.boot_id()


def host_name() -> str:
    return os.uname().nodename  # what socket.gethostname() returns


def process_start_time(pid: int) -> float | None:
    """Epoch start time of ``pid``, or None when no such process is visible."""
    if pid <= 0:
        return None
    return platform.start_time(pid)


def current_owner() -> dict[str, Any]:
    """The owner identity of this process, as the ``sessions.owner_*`` columns."""
    pid = os.getpid()
    return {
        "owner_pid": pid,
        "owner_start_time": process_start_time(pid),
        "owner_host": host_name(),
        "owner_boot_id": boot_id(),
    }


def _comparable(recorded: str, current: str) -> bool:
    """Two boot ids tell the same boot from another only when both are known and of one
    kind: Linux's boot id and the portable platform's boot time (``btime:...``) are not
    (an owner recorded under one platform judged by a reader under the other)."""
    return bool(recorded and current) and (
        recorded.startswith(_BTIME) == current.startswith(_BTIME)
    )


def _judge_process(
    row: Owned,
    *,
    host: str,
    boot: str,
    process_start_time_of: Callable[[int], float | None],
) -> OwnerVerdict | None:
    """Same-host evidence: a changed boot id, a vanished pid, or a reused pid."""
    pid, owner_host = row.owner_pid, row.owner_host
    if not pid or not owner_host or owner_host != host:
        return None
    owner_boot = row.owner_boot_id or ""
    facts = {"kind": "owner", "pid": pid, "host": owner_host, "boot_id": owner_boot}
    if owner_boot and _comparable(owner_boot, boot) and owner_boot != boot:
        summary = f"owner pid {pid} on {host} died with its machine (boot id changed)"
        return OwnerVerdict(ORPHANED, summary, [{**facts, "current_boot_id": boot}])
    if owner_boot and not _comparable(owner_boot, boot):
        return None  # we cannot tell whether this is the same boot
    started = process_start_time_of(int(pid))
    if started is None:
        return OwnerVerdict(ORPHANED, f"owner pid {pid} on {host} is gone", [facts])
    recorded = row.owner_start_time
    if recorded is not None and abs(float(recorded) - started) > START_TIME_TOLERANCE:
        summary = f"owner pid {pid} on {host} was replaced by another process"
        evidence = [{**facts, "recorded_start_time": recorded, "current_start_time": started}]
        return OwnerVerdict(ORPHANED, summary, evidence)
    return None


def _judge_heartbeat(row: Owned, *, now: float) -> OwnerVerdict | None:
    beat = row.heartbeat_at
    if beat is None:
        return None
    lease = row.lease_seconds or DEFAULT_LEASE_SECONDS
    age = now - float(beat)
    if age <= float(lease):
        return None
    summary = f"no heartbeat for {age:.0f}s (lease {float(lease):.0f}s)"
    evidence = [{"kind": "heartbeat", "heartbeat_at": beat, "lease_seconds": lease, "now": now}]
    return OwnerVerdict(STALE, summary, evidence)


def judge_owner(
    row: Owned,
    *,
    now: float,
    host: str,
    boot_id: str,
    process_start_time_of: Callable[[int], float | None],
) -> OwnerVerdict | None:
    """None when the owner is alive or we cannot tell; else why it is dead.

    Process evidence (same host only) comes first because it is proof; a stale
    heartbeat is judged for any host. A row with neither owner nor heartbeat is
    never judged: it may come from a writer that does not record liveness.
    """
    verdict = _judge_process(
        row, host=host, boot=boot_id, process_start_time_of=process_start_time_of
    )
    return verdict or _judge_heartbeat(row, now=now)


def orphaned_group(
    row: OwnedGroup,
    verdict: OwnerVerdict,
    *,
    host: str,
    boot_id: str,
    process_start_time_of: Callable[[int], float | None],
) -> int | None:
    """The process group a dead owner left running, when it provably is that group.

    Only for process evidence on this host and boot (a stale heartbeat may come from a
    live owner). The child leads its own group, so its pid is the group id; a pid that
    now belongs to a younger process is not ours. A vanished leader still proves the
    group: Linux never reuses a pid while a process group carries it.
    """
    pid = row.child_pid
    same_machine = row.owner_host == host and (row.owner_boot_id or "") == boot_id
    if verdict.reason_code != ORPHANED or not pid or not same_machine or not boot_id:
        return None
    started = process_start_time_of(int(pid))
    recorded = row.child_start_time
    if started is not None and (
        recorded is None or abs(float(recorded) - started) > START_TIME_TOLERANCE
    ):
        return None
    return int(pid)

"""Pending outcomes: a teardown write that could not land is spooled, never dropped.

At setup, before the run's row exists, ``reserve_spool`` pre-allocates the space its
spool needs (a hidden file of the pending directory); when that fails nothing starts.
When the database stays unwritable past the retry bound (a lock held too long, a full
disk, a lost server), teardown writes the outcome it decided to a small fsync'd file:
``<run state dir>/outcome.pending.json`` for the person reading the run directory, and
the same content as ``<home>/pending/<database key>/<run id>.json``, where every later
``li run``, ``li wait``, ``li status`` and ``li reap`` on that database finds it with one
directory listing and applies it before answering.

Applying is guarded and idempotent (:func:`decide_delivery` is the pure decision): a row
still running gets the normal guarded write; a row a reaper already finalized as
orphaned or stale (it could not know the true cause) is corrected by an audited
override with source ``system``; a row that holds another real outcome is left alone.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from lirun.errors import LirunError
from lirun.lifecycle import is_terminal
from lirun.liveness import (
    OwnerFacts,
    OwnerVerdict,
    boot_id,
    current_owner,
    host_name,
    judge_owner,
    process_start_time,
)
from lirun.logs import get_logger
from lirun.paths import nothing_pending, pending_root, resolve_db_url
from lirun.record.rundir import private_dir, write_atomically
from lirun.store import is_postgres_url, open_store
from lirun.store.dbfile import sqlite_path_from_url
from lirun.store.rows import SessionRow
from lirun.store.urls import redact_url

log = get_logger(__name__)

__all__ = [
    "PENDING_FILE",
    "Delivery",
    "SpooledOutcome",
    "apply_pending",
    "apply_pending_run",
    "database_key",
    "decide_delivery",
    "deliver_pending",
    "pending_dir",
    "pending_files",
    "release_reservation",
    "reserve_spool",
    "stale_reservation",
    "sweep_reservations",
    "write_spool",
]

PENDING_FILE = "outcome.pending.json"
# Reserved at setup for a run's spooled outcome (a typical one is a few KB).
RESERVE_BYTES = 128 * 1024
# The reaper's verdicts: it finalizes a row whose owner it saw gone, without the cause.
_REAPER_REASONS = frozenset({"session.orphaned.no_process", "session.stale.no_heartbeat"})

Delivery = Literal["write", "override", "done", "leave", "keep"]


@dataclass(frozen=True, slots=True)
class SpooledOutcome:
    """The decided outcome of one run, as teardown would have written it."""

    run_id: str
    database: str  # the database's printable identity (no password)
    status: str
    reason_code: str
    reason_summary: str
    evidence: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    extra_fields: dict[str, Any] = field(default_factory=dict)
    expected_status: str = "running"
    cause: str = ""
    spooled_at: float = 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=str, sort_keys=True) + "\n"

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> SpooledOutcome:
        known = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        return cls(**known)


# --- where ------------------------------------------------------------------------------------


def database_identity(url: str) -> str:
    """One string per database: the absolute SQLite path, or the URL without its password."""

    if is_postgres_url(url):
        return redact_url(url)

    return os.path.abspath(sqlite_path_from_url(url))


def database_key(url: str) -> str:
    """A short hash of the identity: a directory name that holds no secret."""

    return hashlib.sha256(database_identity(url).encode("utf-8")).hexdigest()[:16]


def pending_dir(url: str) -> Path:
    return pending_root() / database_key(url)


def pending_files(url: str) -> list[Path]:
    """The spooled outcomes for this database: one directory listing, [] when none."""
    if nothing_pending():
        return []
    try:
        with os.scandir(pending_dir(url)) as entries:
            return sorted(
                Path(e.path)
                for e in entries
                if e.name.endswith(".json") and not e.name.startswith(".")
            )
    except (FileNotFoundError, NotADirectoryError):
        return []


# --- writing ----------------------------------------------------------------------------------


def reservation_path(url: str, run_id: str) -> Path:
    """The space reserved at setup for the run's spooled outcome: a hidden file of the
    pending directory (``pending_files`` skips it), so using it is a rename in place."""
    return pending_dir(url) / f".{run_id}.reserve"


def reserve_spool(url: str, run_id: str) -> Path:
    """Reserve ``RESERVE_BYTES`` for the run's spooled outcome (``posix_fallocate``), so
    a run that started can always record how it ended, even on a full disk. OSError when
    it cannot: then nothing may start."""
    try:
        return _reserve(url, run_id)
    except OSError as exc:
        raise OSError(
            exc.errno,
            f"no room to reserve {RESERVE_BYTES // 1024} KB for its outcome "
            f"({exc.strerror or exc}); free space in the lirun home",
        ) from exc


def _reserve(url: str, run_id: str) -> Path:
    path = reservation_path(url, run_id)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    for attempt in range(3):
        private_dir(path.parent)
        try:
            fd = os.open(path, flags, 0o600)
            break
        except FileNotFoundError:  # another run's release removed the directory just now
            if attempt == 2:
                raise
    try:
        try:
            os.posix_fallocate(fd, 0, RESERVE_BYTES)
        except (AttributeError, OSError) as exc:
            if isinstance(exc, OSError) and exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise
            os.write(fd, bytes(RESERVE_BYTES))  # a filesystem without fallocate
    except OSError:
        os.close(fd)
        with contextlib.suppress(OSError):
            path.unlink()
        raise
    try:
        # Whose it is, over the first reserved blocks (no new space): a reservation whose
        # owner died without ending its run is given back by the next sweep.
        with contextlib.suppress(OSError):
            os.pwrite(fd, _owner_header(), 0)
    finally:
        os.close(fd)
    return path


def _owner_header() -> bytes:
    return (json.dumps(current_owner(), sort_keys=True) + "\n").encode("utf-8")


def release_reservation(url: str, run_id: str) -> None:
    """The run's outcome is in the database (or the reservation became its spool): give
    the space back, and the pending directory too when nothing else is in it."""
    path = reservation_path(url, run_id)
    with contextlib.suppress(OSError):
        path.unlink()
    with contextlib.suppress(OSError):
        path.parent.rmdir()


def stale_reservation(header: bytes, *, judge: Callable[[OwnerFacts], object]) -> bool:
    """Whether a reservation is left over by an owner that died before it ended its run
    (pure: ``judge`` is ``liveness.judge_owner`` bound to this host). A reservation whose
    header cannot be read (being written now) or whose owner is on another host is kept."""
    try:
        owner = json.loads(header.split(b"\n", 1)[0])
    except ValueError:
        return False
    if not isinstance(owner, dict) or not owner.get("owner_pid"):
        return False
    return judge(OwnerFacts.from_mapping(owner)) is not None


def sweep_reservations(url: str) -> list[str]:
    """Remove the reservations of runs whose owner is gone (a SIGKILLed ``li run`` never
    gave its space back); the ids of their runs. Never raises; one listing when none."""
    if nothing_pending():
        return []
    host, boot, now = host_name(), boot_id(), time.time()

    def judge(owner: OwnerFacts) -> OwnerVerdict | None:
        return judge_owner(
            owner, now=now, host=host, boot_id=boot, process_start_time_of=process_start_time
        )

    removed = []
    directory = pending_dir(url)
    try:
        with os.scandir(directory) as entries:
            reserved = [e.path for e in entries if e.name.endswith(".reserve")]
    except OSError:
        return []
    for path in reserved:
        try:
            with open(path, "rb") as handle:
                header = handle.read(4096)
        except OSError:
            continue
        if stale_reservation(header, judge=judge):
            with contextlib.suppress(OSError):
                os.unlink(path)
                removed.append(os.path.basename(path)[1 : -len(".reserve")])
    if removed:
        with contextlib.suppress(OSError):  # empty now: keep the next listing trivial
            directory.rmdir()
    return removed


def _fitted(outcome: SpooledOutcome) -> bytes:
    """The spool's content within the reservation: evidence and metadata give way first,
    never the status, reason and exit code."""
    payload = outcome.to_json().encode("utf-8")
    if len(payload) <= RESERVE_BYTES:
        return payload
    trimmed = replace(
        outcome,
        evidence=[{"kind": "trimmed", "note": "evidence left out: the spool had no room"}],
        metadata={},
        reason_summary=outcome.reason_summary[:2000],
    )
    return trimmed.to_json().encode("utf-8")


def _use_reservation(reserved: Path, entry: Path, payload: bytes) -> None:
    """Write ``payload`` over the reserved blocks (no new space), then rename it into
    place: a reader sees the whole entry or none."""
    fd = os.open(reserved, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.pwrite(fd, payload, 0)
        os.ftruncate(fd, len(payload))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(reserved, entry)


def write_spool(url: str, state_root: Path, outcome: SpooledOutcome) -> Path:
    """Spool ``outcome``; return the pending entry. OSError when it cannot be written.

    The entry under ``<home>/pending`` is what later commands apply: written into the
    space reserved at setup when there is one (a full disk cannot refuse it), else as a
    new file. The copy in the run directory is for a reader of that directory (best
    effort).
    """
    payload = _fitted(outcome)
    with contextlib.suppress(OSError):
        write_atomically(state_root / PENDING_FILE, payload)

    directory = pending_dir(url)
    entry = directory / f"{outcome.run_id}.json"
    reserved = reservation_path(url, outcome.run_id)
    if reserved.is_file():
        _use_reservation(reserved, entry, payload)
        return entry
    private_dir(directory)
    write_atomically(entry, payload)
    return entry


def _remove(entry: Path, spooled: SpooledOutcome | None, state_root: str | None) -> None:
    with contextlib.suppress(OSError):
        entry.unlink()
    if spooled is not None and state_root:
        with contextlib.suppress(OSError):
            (Path(state_root) / PENDING_FILE).unlink()


# --- applying ---------------------------------------------------------------------------------


def decide_delivery(row: SessionRow | None, spooled: SpooledOutcome) -> Delivery:
    """What to do with a spooled outcome, given the row as it is now (pure).

    ``write``: the row is not terminal yet, a normal guarded write; ``override``: a
    reaper finalized it without knowing the cause, the true cause wins; ``done``: the row
    already holds this outcome; ``leave``: it holds another real outcome, which stands;
    ``keep``: no such row here, keep the spool.
    """

    if row is None:
        return "keep"
    status = row.status
    if not is_terminal("session", status):
        return "write"
    if status == spooled.status and row.status_reason_code == spooled.reason_code:
        return "done"
    reaped = row.status_reason_code in _REAPER_REASONS
    return "override" if reaped and spooled.reason_code not in _REAPER_REASONS else "leave"


def _load(entry: Path) -> SpooledOutcome | None:
    try:
        data = json.loads(entry.read_text(encoding="utf-8"))
        return SpooledOutcome.from_mapping(data) if isinstance(data, dict) else None
    except (OSError, ValueError, TypeError):
        return None


def _deliver(store: Any, spooled: SpooledOutcome, row: SessionRow, how: Delivery) -> bool:
    metadata = {
        **spooled.metadata,
        "spooled": {"at": spooled.spooled_at, "cause": spooled.cause, "applied_at": time.time()},
    }
    common: dict[str, Any] = {
        "new_status": spooled.status,
        "reason_code": spooled.reason_code,
        "reason_summary": spooled.reason_summary,
        "evidence_refs": spooled.evidence,
        "metadata": metadata,
        "extra_fields": spooled.extra_fields,
    }
    if how == "write":
        return bool(
            store.update_status("session", spooled.run_id, expected_statuses={row.status}, **common)
        )
    justification = (
        f"the run's own outcome, spooled at teardown because the database could not be "
        f"written ({spooled.cause or 'unknown cause'}), replaces the reaper's "
        f"{row.status_reason_code}"
    )
    return bool(
        store.update_status(
            "session",
            spooled.run_id,
            source="system",
            override=True,
            override_actor="lirun",
            override_justification=justification,
            expected_statuses={row.status},
            expected_updated_at=row.updated_at,
            **common,
        )
    )


def _apply_entry(store: Any, entry: Path) -> Delivery | None:
    spooled = _load(entry)
    if spooled is None:
        return None  # half-written by a writer that died: its atomic replace never ran
    for _ in range(3):  # a lost compare-and-set: re-read and decide again
        row = store.sessions.get(spooled.run_id)
        how = decide_delivery(row, spooled)
        delivering = how in ("write", "override") and row is not None
        if delivering and not _deliver(store, spooled, row, how):
            continue
        if how != "keep":
            _remove(entry, spooled, row.run_dir if row else None)
        return how
    return None


def apply_pending(store: Any) -> list[tuple[str, Delivery]]:
    """Apply every spooled outcome of ``store``'s database; [(run id, what was done)].

    Cheap when nothing is pending (one directory listing). A spool is removed once the
    row holds an outcome (this one, or another real one); database errors propagate and
    leave the spool for the next command.
    """
    done: list[tuple[str, Delivery]] = []
    sweep_reservations(store.url)
    entries = pending_files(store.url)
    for entry in entries:
        how = _apply_entry(store, entry)
        if how is not None:
            done.append((entry.stem, how))
    if entries:
        with contextlib.suppress(OSError):  # empty now: keep the next listing trivial
            entries[0].parent.rmdir()
    return done


def apply_pending_run(store: Any, run_id: str) -> Delivery | None:
    """The spooled outcome of one run, applied if there is one (a reaper asks first)."""
    if nothing_pending():
        return None
    entry = pending_dir(store.url) / f"{run_id}.json"
    if not entry.is_file():
        return None
    return _apply_entry(store, entry)


def deliver_pending(url: str | None) -> list[tuple[str, Delivery]]:
    """For a command about to read ``url``: apply its pending outcomes, never raise.

    Opens the database for writing only when something is pending; a failure is said
    once as a warning (``lirun.record.spool``) and the spools stay for a later command.
    """

    resolved = resolve_db_url(url)
    try:
        sweep_reservations(resolved)
        if not pending_files(resolved):
            return []
    except Exception:  # an unusable URL: the command itself will say what is wrong
        return []

    try:
        store = open_store(resolved)
        try:
            return apply_pending(store)
        finally:
            store.close()
    except (LirunError, OSError) as exc:
        log.warning(
            "pending run outcomes could not be recorded yet (%s); they stay spooled", exc,
            extra={"event": "spool.kept"},
        )  # fmt: skip
        return []

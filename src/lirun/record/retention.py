"""`li gc`: prune old records to tombstones and remove their run directories.

One batch at a time: read the candidates (``store.retention.candidates``), decide each
(``retention_rules.decide``, pure), write the tombstones of a batch in one transaction,
then remove their run directories and record that they are gone. A gc killed anywhere
leaves each record whole or tombstoned; a tombstone whose directory outlived the kill is
finished by the next pass (``finish_removals``), so gc is safe to repeat.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from lirun.lifecycle import policy_for, shown_kind
from lirun.liveness import host_name
from lirun.record.retention_rules import (
    PRUNE,
    REFUSALS,
    Candidate,
    RetentionPolicy,
    Tally,
    decide,
)
from lirun.record.spool import PENDING_FILE, pending_files
from lirun.store import Store
from lirun.store.retention_records import PRUNED_KINDS
from lirun.store.rows import GcCandidateRow, UnremovedFileRow

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class GcOptions:
    """How one pass runs: ``dry_run`` writes and removes nothing; ``actor`` is recorded
    as ``pruned_by``; ``now`` is the clock the cutoff is measured from."""

    dry_run: bool = False
    actor: str = ""
    now: float | None = None
    vacuum: bool = False


def default_actor(what: str = "li gc") -> str:
    """``<login>@<host> (<what>)``: who pruned, for ``pruned_by``."""
    login = next((os.environ[k] for k in ("LOGNAME", "USER", "USERNAME") if os.environ.get(k)), "")
    if not login:
        try:
            login = pwd.getpwuid(os.getuid()).pw_name
        except KeyError:
            login = str(os.getuid())
    return f"{login}@{host_name()} ({what})"


def collect_garbage(
    store: Store,
    policy: RetentionPolicy,
    options: GcOptions,
    progress: Progress | None = None,
    stop: Callable[[], bool] | None = None,
) -> Tally:
    """Prune what ``policy`` selects; returns what was pruned, kept and refused. ``stop``
    is asked between batches (each one whole): when it says so, the rest waits for the
    next gc."""
    tally = Tally()
    now = time.time() if options.now is None else options.now
    report = progress or (lambda line: None)
    if not options.dry_run:
        finish_removals(store, tally, now=now, batch=policy.batch)
    verb = "to prune" if options.dry_run else "pruned"
    stopped = stop or (lambda: False)
    for kind in PRUNED_KINDS:
        after, examined = "", 0
        while not stopped():
            rows = store.retention.candidates(
                kind, cutoff=now - policy.older_than, after=after, limit=policy.batch
            )
            if not rows:
                break
            after = rows[-1].id
            examined += len(rows)
            # listed again per batch: a spool written meanwhile still holds its record
            pending = {p.name.removesuffix(".json") for p in pending_files(store.url)}
            chosen = _choose(kind, rows, policy, pending, tally)
            _prune_batch(store, kind, chosen, options, tally, now=now)
            report(f"{shown_kind(kind)}s: {examined} examined, {tally.pruned.get(kind, 0)} {verb}")
    if stopped():
        return tally
    if options.vacuum and not options.dry_run:
        report("reclaiming space (VACUUM)")
        store.retention.reclaim_space()
    return tally


def _choose(
    kind: str, rows: list[GcCandidateRow], policy: RetentionPolicy, pending: set[str], tally: Tally
) -> list[GcCandidateRow]:
    """The rows of a batch to prune; the others counted as kept or refused."""
    chosen = []
    for row in rows:
        verdict = decide(_candidate(kind, row, pending), policy)
        if verdict == PRUNE:
            chosen.append(row)
        elif verdict in REFUSALS:
            tally.refused.append((kind, row.id, verdict))
        else:
            tally.count_kept(verdict)
    return chosen


def _candidate(kind: str, row: GcCandidateRow, pending: set[str]) -> Candidate:
    run_dir = row.run_dir
    spooled = row.id in pending or bool(
        run_dir and os.path.lexists(os.path.join(run_dir, PENDING_FILE))
    )
    return Candidate(
        kind=kind,
        id=row.id,
        status=row.status,
        flow_status=row.flow_status,
        in_active_show=bool(row.in_active_show),
        spool_pending=spooled,
    )


def _prune_batch(
    store: Store,
    kind: str,
    rows: list[GcCandidateRow],
    options: GcOptions,
    tally: Tally,
    *,
    now: float,
) -> None:
    if options.dry_run:
        for row in rows:
            tally.count_pruned(kind)
            tally.would_prune.append((kind, row.id, row.status))
            tally.bulk_bytes += int(row.bulk_bytes or 0)
            tally.file_bytes += tree_bytes(owned_run_dir(row.id, row.run_dir))
        return
    terminal = sorted(policy_for(kind).terminal)
    ids = [r.id for r in rows]
    done = set(
        store.retention.write_tombstones(kind, ids, terminal=terminal, now=now, actor=options.actor)
    )
    tombstoned = [r for r in rows if r.id in done]
    tally.count_pruned(kind, len(tombstoned))
    tally.bulk_bytes += sum(int(r.bulk_bytes or 0) for r in tombstoned)
    _remove_files(store, kind, tombstoned, tally, now=now)


def _remove_files(
    store: Store,
    kind: str,
    rows: Iterable[GcCandidateRow | UnremovedFileRow],
    tally: Tally,
    *,
    now: float,
) -> None:
    removed = []
    here = host_name()
    for row in rows:
        if row.owner_host not in (None, "", here):
            tally.files_elsewhere += 1  # its directory is there: a gc on that host removes it
            continue
        directory = owned_run_dir(row.id, row.run_dir)
        size = tree_bytes(directory)
        try:
            if directory is not None:
                shutil.rmtree(directory)
                tally.files_removed += 1
        except FileNotFoundError:
            pass
        except OSError as exc:
            tally.problems.append(f"{row.id}: cannot remove {directory}: {exc}")
            continue
        tally.file_bytes += size
        removed.append(row.id)
    store.retention.mark_files_removed(kind, removed, now=now)


def finish_removals(store: Store, tally: Tally, *, now: float, batch: int) -> None:
    """Remove the run directories of this host's tombstones that a stopped gc (or a gc
    on another host) left behind."""
    while True:
        rows = store.retention.unremoved_files(host=host_name(), limit=batch)
        if not rows:
            return
        for kind in PRUNED_KINDS:
            _remove_files(store, kind, [r for r in rows if r.kind == kind], tally, now=now)
        if len(rows) < batch or tally.problems:
            return


def owned_run_dir(record_id: str, path: str | None) -> str | None:
    """The record's state root ``path`` when it is lirun's to remove: a real directory
    (not a symlink) named for the record's id. Anything else (none, a foreign path) is
    left."""
    if not path or os.path.basename(path) != record_id:
        return None
    try:
        return path if stat.S_ISDIR(os.lstat(path).st_mode) else None
    except OSError:
        return None


def tree_bytes(directory: str | None) -> int:
    """The bytes of the regular files under ``directory`` (0 for None or a vanished one)."""
    if directory is None:
        return 0
    total = 0
    for root, _dirs, files in os.walk(directory):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total

"""One waiter's state: resolved targets, their outcomes so far, one query per tick.

``Watcher`` is synchronous and shared by the async library API (which runs its
methods in a worker thread) and by `li wait` (which runs them directly and so starts
without importing asyncio).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from lirun.errors import DatabaseConnectionLostError, DatabaseUnavailableError, LirunError
from lirun.hints import Any
from lirun.logs import get_logger
from lirun.store.core import Store
from lirun.store.rows import WaitFetchRow
from lirun.wait.outcome import is_final, project, unfinished
from lirun.wait.resolve import Target, resolve_targets
from lirun.wait.wake import make_waker

_log = get_logger(__name__)
Key = tuple[str, str]  # (kind, canonical id)
# Liveness is judged at most this often: probing /proc for every running row on
# every change-triggered re-read would cost more than it could ever find.
LIVENESS_SECONDS = 1.0
# How often a waiter reads its queued schedule runs whole to check their start deadline
# (one read each: many queued targets must not cost many reads every second).
DEADLINE_SECONDS = 5.0


def _one_per_record(targets: Iterable[Target]) -> list[Target]:
    """Two inputs naming one record (an id and its branch, say) print one line."""
    seen: set[Key] = set()
    kept = []
    for target in targets:
        key = (target.kind or "", target.id or "")
        if target.problem is None and key in seen:
            continue
        seen.add(key)
        kept.append(target)
    return kept


class Watcher:
    """Resolve ``ids`` (already split), then report each target once it is final.

    ``writable`` opens a store the waiter may reap through; it is called at most once,
    and only when a waited-on session's owner is judged dead. Diagnostics go to this
    module's logger (``lirun.wait.watch``).
    """

    def __init__(
        self,
        store: Store,
        ids: Sequence[str],
        *,
        writable: Callable[[], Store] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self._writable_factory = writable
        self._writable: Store | None = None
        self._reaping = True  # False once this waiter found it cannot write
        self._lost = False  # the last tick could not read the database
        self._clock = clock
        self._next_liveness = clock()
        self._next_deadline_check = clock()
        self._pending: dict[Key, int] = {}  # unfinished record → its target's index
        self._last_rows: dict[Key, WaitFetchRow] = {}
        # Subscribe before the first read, so no terminal commit falls between the two.
        self.waker = make_waker(store.connector, self._pending_ids)
        try:
            self.targets: list[Target] = _one_per_record(resolve_targets(store, ids))
        except BaseException:
            self.waker.close()
            raise
        self.outcomes: list[dict[str, Any] | None] = [None] * len(self.targets)
        self._unreported: list[int] = []
        for index, target in enumerate(self.targets):
            if target.problem is not None:
                self.outcomes[index] = project(target, None)
                self._unreported.append(index)
            else:
                assert target.kind is not None
                assert target.id is not None
                self._pending[(target.kind, target.id)] = index
        self.queries = 0  # full reads so far (the bench checks one per tick)

    # -- state ------------------------------------------------------------------

    @property
    def done(self) -> bool:
        return not self._pending

    def _pending_ids(self) -> set[str]:
        return {key[1] for key in list(self._pending)}

    def pending_outcomes(self) -> list[dict[str, Any]]:
        """The latest view of every unfinished target (for progress and diagnostics)."""
        return [
            unfinished(self.targets[index], self._last_rows.get(key))
            for key, index in self._pending.items()
        ]

    def results(self) -> list[dict[str, Any]]:
        """One outcome per target, in input order; unfinished ones show their last status."""
        return [
            outcome
            if outcome is not None
            else unfinished(target, self._last_rows.get((target.kind or "", target.id or "")))
            for target, outcome in zip(self.targets, self.outcomes, strict=True)
        ]

    # -- one tick ---------------------------------------------------------------

    def fetch(self, keys: Iterable[Key]) -> dict[Key, WaitFetchRow]:
        """One batched read of ``keys``, whatever their number and kinds."""
        by_kind: dict[str, list[str]] = {}
        for kind, entity_id in keys:
            by_kind.setdefault(kind, []).append(entity_id)
        self.queries += 1
        rows = self.store.waits.fetch_rows(by_kind)
        return {(row.kind, row.id): row for row in rows}

    def tick(self) -> list[dict[str, Any]]:
        """Read every pending target once; return the outcomes that became final."""
        try:
            rows = self.fetch(self._pending)
            if self._liveness_due() and self._reap(rows.values()):
                rows = self.fetch(self._pending)  # rare: report the persisted winner
        except LirunError as exc:
            if not self._lost:  # said once per outage; the next ticks retry quietly
                _log.warning(
                    "%s; retrying until the database answers", exc, extra={"event": "db.lost"}
                )
            self._lost = True
            rows = None
        else:
            if self._lost:
                _log.info("the database answers again", extra={"event": "db.back"})
            self._lost = False
        finished = self._settle(rows) if rows is not None else []
        self.waker.after_read(bool(finished))
        finished.extend(self._unreported)
        self._unreported = []
        return [self.outcomes[i] for i in sorted(finished)]  # type: ignore[misc]

    def _settle(self, rows: Mapping[Key, WaitFetchRow]) -> list[int]:
        finished: list[int] = []
        for key, index in list(self._pending.items()):
            row = rows.get(key)  # None: deleted since resolution, which ends its wait
            outcome = project(self.targets[index], row)
            if is_final(outcome):
                self.outcomes[index] = outcome
                del self._pending[key]
                finished.append(index)
            elif row is not None:
                self._last_rows[key] = row
        return finished

    def wait(self, timeout: float, stop: Callable[[], bool]) -> bool:
        """Sleep up to ``timeout``; return early when a change may have happened."""
        return self.waker.wait(timeout, stop)

    # -- liveness ---------------------------------------------------------------

    def _liveness_due(self) -> bool:
        now = self._clock()
        if now < self._next_liveness:
            return False
        self._next_liveness = now + LIVENESS_SECONDS
        return True

    def _reap(self, rows: Collection[WaitFetchRow]) -> bool:
        """Finalize waited-on sessions and flow invocations whose owner is dead (a flow's
        running legs with it); True if any write was tried."""
        kinds = ("session", "invocation")  # only a flow invocation has owner facts
        # A schedule run carries its worker's facts and its lease (a lone waiter on a
        # run whose worker died would otherwise wait for another worker to reap it).
        runs = [r for r in rows if r.kind == "schedule_run" and r.status == "running"]
        queued = [r for r in rows if r.kind == "schedule_run" and r.status == "queued"]
        if queued and self._clock() < self._next_deadline_check:
            queued = []
        elif queued:
            self._next_deadline_check = self._clock() + DEADLINE_SECONDS
        if (
            not runs
            and not queued
            and not any(r.kind in kinds and r.status == "running" for r in rows)
        ):
            return False
        from lirun.liveness import ORPHANED
        from lirun.record.reap import (  # not needed on the fast path
            judge,
            local_facts,
            reap_sessions,
        )
        from lirun.record.reap_flows import reap_flows

        facts = local_facts()
        dead = [r for r in rows if r.kind in kinds and judge(r, facts) is not None]
        # a run's worker elsewhere whose lease lapsed is not proof: the workers judge it
        dead_runs = [
            r
            for r in runs
            if _lease_lapsed(r, facts.now)
            and getattr(judge(r, facts), "reason_code", None) == ORPHANED
        ]
        expired = []
        if queued:
            from lirun.record.reap_schedule_runs import expired_queued_runs

            expired = expired_queued_runs(self.store, queued, now=facts.now)
        store = self._store_for_reaping() if dead or dead_runs or expired else None
        if store is None:
            return False
        try:
            sessions = [r.id for r in dead if r.kind == "session"]
            flows = [r for r in dead if r.kind == "invocation"]
            reaped = bool(reap_sessions(store, sessions)) | bool(reap_flows(store, flows))
            if dead_runs or expired:
                from lirun.record.reap_schedule_runs import (
                    fail_past_start_deadline,
                    reap_dead_worker_runs,
                )

                reaped |= bool(reap_dead_worker_runs(store, dead_runs))
                for run in expired:
                    reaped |= fail_past_start_deadline(store, run, facts.now)
            return reaped
        except DatabaseUnavailableError as exc:
            if isinstance(exc, DatabaseConnectionLostError):
                raise  # transient: the tick retries
            self._give_up_reaping(exc)
            return False

    def _give_up_reaping(self, exc: LirunError) -> None:
        """Say once that this waiter cannot write, and keep waiting without reaping."""
        self._reaping = False
        _log.warning(
            "cannot finalize runs whose owner is gone (%s); waiting without reaping "
            "(a `li reap` by a user who can write the database will finalize them)", exc,
            extra={"event": "wait.no_reaping"},
        )  # fmt: skip

    def _store_for_reaping(self) -> Store | None:
        if not self._reaping:
            return None
        if not self.store.readonly:
            return self.store
        if self._writable is None and self._writable_factory is not None:
            factory, self._writable_factory = self._writable_factory, None
            try:
                self._writable = factory()
            except DatabaseConnectionLostError:
                self._writable_factory = factory  # transient: try again on a later tick
                raise
            except LirunError as exc:
                self._give_up_reaping(exc)
        return self._writable

    def close(self) -> None:
        self.waker.close()
        if self._writable is not None and self._writable is not self.store:
            self._writable.close()


def _lease_lapsed(row: WaitFetchRow, now: float) -> bool:
    beat = row.heartbeat_at
    return beat is not None and now > float(beat) + float(row.lease_seconds or 0)

"""A schedule run's record that another worker's reaper inferred from this worker's
lapsed lease, corrected by how its work really ended (``record.correction``).

A worker that was frozen or cut off past its lease comes back to find its run
``failed`` (``schedule.failed.lease_lapsed``) and, where ``--retries`` allowed, attempt
n+1 queued. When its work had ended by itself (nothing stopped it: not this worker, not
its guard), that ending replaces the inferred one, audited as actor ``lirun``; a retry
the inference queued is cancelled while it waits (``schedule.cancelled.superseded``), or
marked as a repeat (an admin event) once it started. A retry the true ending would have
had too is left alone.
"""

from __future__ import annotations

from lirun.logs import get_logger
from lirun.record.correction import ACTOR, correction_for
from lirun.schedules.outcomes import SUPERSEDED, Outcome, should_retry
from lirun.store import Store
from lirun.store.rows import ScheduleRunRow

__all__ = ["correct_inferred_end"]

log = get_logger(__name__)


def correct_inferred_end(
    store: Store, run_id: str, outcome: Outcome, *, retries: int
) -> ScheduleRunRow | None:
    """Correct run ``run_id``, which this worker ran and found ended by another writer,
    to ``outcome`` when that is a correction (``retries``: the run's ``--retries``);
    the corrected row, or None when the record stands."""
    run = store.schedules.get_run(run_id)
    if run is None:
        return None
    lapse = [outcome.lapse.evidence()] if outcome.lapse is not None else []
    correction = correction_for(
        run.status,
        run.status_reason_code,
        outcome.status,
        outcome.reason_code,
        evidence=lapse,
        recorded_at=run.ended_at,
    )
    if correction is None:
        log.warning(
            f"run {run_id} is already {run.status} ({run.status_reason_code}); this "
            f"worker computed {outcome.status} ({outcome.reason_code}), not written"
        )
        return None
    exit_code = {"exit_code": outcome.exit_code} if outcome.exit_code is not None else None
    applied = store.update_status(
        "schedule_run",
        run_id,
        new_status=outcome.status,
        reason_code=outcome.reason_code,
        reason_summary=outcome.summary[:2000],
        evidence_refs=[*lapse, correction.evidence],
        source="system",
        actor=ACTOR,
        expected_statuses={run.status},
        extra_fields=exit_code,
        override=True,
        override_actor=ACTOR,
        override_justification=correction.justification,
    )
    if not applied:
        return None
    log.warning(
        f"run {run_id}: {run.status_reason_code} corrected to {outcome.status} "
        f"({outcome.reason_code}): its work ended by itself"
    )
    if not should_retry(outcome.status, outcome.reason_code, int(run.attempt or 1), retries):
        _supersede(store, run, outcome)
    return store.schedules.get_run(run_id)


def _supersede(store: Store, run: ScheduleRunRow, outcome: Outcome) -> None:
    """The retries queued for ``run`` on its inferred ending: cancelled while queued,
    else marked as repeats of its work."""
    attempt = int(run.attempt or 1)
    for retry in store.schedules.retries_of(run.id):
        cancelled = store.update_status(
            "schedule_run",
            retry.id,
            new_status="cancelled",
            reason_code=SUPERSEDED,
            reason_summary=(
                f"queued because attempt {attempt} ({run.id}) was recorded "
                f"{run.status_reason_code}; that attempt ended {outcome.status} by itself"
            ),
            source="system",
            actor=ACTOR,
            expected_statuses={"queued"},
        )
        if not cancelled:
            store.schedules.mark_repeat(
                retry.id,
                of=run.id,
                actor=ACTOR,
                justification=(
                    f"started before attempt {attempt} ({run.id}) was found to have ended "
                    f"{outcome.status} by itself: it repeats that work"
                ),
            )

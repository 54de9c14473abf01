"""The detail document of one record: what ``li status ID --json`` prints
(``lirun.record/2``) and ``lirun.Run.as_dict()`` returns, built in one place so the
command and the client cannot disagree about a record.

Below ``cli/`` and ``client/``: it reads through the store, judges an owner with
``record.ownership`` and says what a run did with ``record.work``. On ``li status ID``'s
fast path, so what only some records need is imported inside the function that needs it.
"""

from __future__ import annotations

from lirun.errors import AmbiguousIdError, NotFoundError, UsageError
from lirun.hints import TYPE_CHECKING, Any
from lirun.lifecycle import shown_kind

if TYPE_CHECKING:  # annotations only: the record layer loads only when a row is judged
    from lirun.record.ownership import OwnedRecord
    from lirun.store import Store
    from lirun.store.rows import SessionRow

__all__ = ["liveness", "load_detail", "resolve_record", "run_work"]


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

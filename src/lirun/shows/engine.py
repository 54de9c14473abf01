"""Run, resume, abort and read a show: the library calls behind ``li show``.

``run_show`` checks everything it can before it writes anything (a typed LirunError,
exit 2, otherwise), creates the show with its plays, creates the integration branch
from base when missing, and runs the show loop (``conductor``). The show row is the
show's lock: it names its owner (pid, start time, host, boot id) and its heartbeat, so a
second run of the same active show refuses, and ``resume_show`` takes over only from an
owner that is provably dead or has no lease left. ``abort_show`` ends a show; plays that
finished but did not merge become ``aborted_after_finish``, plays that never started
``blocked``. ``show_report`` reads the board and changes nothing.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from lirun.errors import ConflictError, NotFoundError, UsageError
from lirun.exec.task import check_task
from lirun.exec.worktrees import GitError
from lirun.liveness import DEFAULT_LEASE_SECONDS, HEARTBEAT_INTERVAL, current_owner, judge_owner
from lirun.orchestra.graph import find_cycle, unknown_deps
from lirun.orchestra.lease import OwnerLease
from lirun.paths import resolve_db_url
from lirun.record.reap import local_facts
from lirun.record.rundir import new_run_id, safe_component
from lirun.settings import Settings
from lirun.shows.conductor import Conductor
from lirun.shows.decide import abort_target
from lirun.shows.gitwork import ShowGit, current_head
from lirun.shows.jobs import Workers
from lirun.shows.preflight import check_not_checked_out, check_repo
from lirun.shows.recovery import check_head, reap_gates, reap_orphans, recover
from lirun.shows.report import ShowReport, build_report
from lirun.shows.spec import DEFAULT_PARALLEL, ShowSpec
from lirun.signals import SignalTrap
from lirun.store import Store, open_existing, open_store
from lirun.store.rows import ShowRow

__all__ = [
    "DEFAULT_PARALLEL",
    "ShowOptions",
    "abort_show",
    "owner_alive",
    "recent_shows",
    "resume_show",
    "run_show",
    "show_report",
]


# How each way the loop ends leaves the show (it stays active unless it completed).
_ENDINGS = {
    "completed": ("completed", "show.completed.ok"),
    "blocked": ("active", "show.blocked.no_ready_plays"),
    "final_gate_failed": ("active", "show.active.final_gate_failed"),
    "integration_unverified": ("active", "show.active.integration_unverified"),
    "interrupted": ("active", "show.active.interrupted"),
}


@dataclass(frozen=True)
class ShowOptions:
    """``parallel`` overrides the file's; ``continue_integration`` accepts an integration
    branch with commits base does not have; ``on_progress`` gets one human line per event
    (for stderr); ``settings``: every play's and gate's execution's
    (``RunRequest.settings``), None: the environment's, read once per show."""

    parallel: int | None = None
    continue_integration: bool = False
    on_progress: Callable[[str], None] | None = None
    settings: Settings | None = None


# -- reading ----------------------------------------------------------------------------------


def find_show(store: Store, text: str) -> ShowRow:
    """The show ``text`` names: its id, a unique id prefix or suffix, or an active topic."""
    try:
        return _get(store, store.resolve_id("show", text))
    except NotFoundError:
        active = store.shows.active_for_topic(text)
        if len(active) == 1:
            return active[0]
        if active:
            ids = ", ".join(s.id for s in active)
            raise UsageError(f"topic {text!r} has several active shows ({ids}); name one") from None
        raise NotFoundError(
            f"no show with id {text!r} and no active show with that topic; "
            "`li show status` lists shows"
        ) from None


def _get(store: Store, show_id: str) -> ShowRow:
    row = store.shows.get(show_id)
    if row is None:
        raise NotFoundError(f"no show with id {show_id!r}")
    return row


def _report(store: Store, show_id: str, interrupted: str | None = None) -> ShowReport:
    show = _get(store, show_id)
    plays = store.shows.list_plays(show_id)
    sessions = {p.id: store.shows.list_play_sessions(p.id) for p in plays}
    unowned = show.status == "active" and not owner_alive(show)
    # The head as git has it: a branch moved by hand shows where it really is.
    head = current_head(show)
    return build_report(show, plays, sessions, head=head, interrupted=interrupted, unowned=unowned)


def show_report(show: str, *, db_url: str | None = None) -> ShowReport:
    """The board of ``show`` (id, id prefix or active topic); changes nothing."""
    store = open_store(db_url, readonly=True)
    try:
        return _report(store, find_show(store, show).id)
    finally:
        store.close()


def recent_shows(*, db_url: str | None = None, limit: int = 20) -> tuple[ShowReport, ...]:
    """The boards of the active shows first, then the newest ones (``li show status``)."""
    store = open_store(db_url, readonly=True)
    try:
        return tuple(_report(store, row.id) for row in store.shows.recent(limit=limit))
    finally:
        store.close()


# -- checks before anything is written ---------------------------------------------------------


def _check_plays(spec: ShowSpec, settings: Settings | None) -> None:
    """What the show file loader checks, again for library callers: names, the graph,
    and that every task can run here (a missing provider, profile or playbook)."""

    deps = {p.name: p.depends_on for p in spec.plays}
    if len(deps) != len(spec.plays):
        raise UsageError("two plays have the same name; give each play its own")
    for p in spec.plays:
        safe_component(p.name, "play name")
        if p.attempts < 1:
            raise UsageError(f"play {p.name}: attempts must be 1 or 2, not {p.attempts}")
        check_task(p.task, settings)
    for node, dep in unknown_deps(deps):
        raise UsageError(f"play {node} depends on {dep!r}, which is no play of this show")
    cycle = find_cycle(deps)
    if cycle is not None:
        raise UsageError("plays depend on each other in a cycle: " + " -> ".join(cycle))


def _check_topic_free(store: Store, topic: str) -> None:
    for row in store.shows.active_for_topic(topic):
        raise ConflictError(
            f"show {row.id} of topic {topic!r} is still active; continue it with "
            f"`li show resume {row.id}` or end it with `li show abort {row.id}`"
        )


# -- the lock ---------------------------------------------------------------------------------


def owner_alive(row: ShowRow) -> bool:
    """Whether a live process owns the show (its lock): what resume, abort and clean ask."""
    if not row.owner_pid and row.heartbeat_at is None:
        return False
    facts = local_facts()
    verdict = judge_owner(
        row,
        now=facts.now,
        host=facts.host,
        boot_id=facts.boot_id,
        process_start_time_of=facts.start_time_of,
    )
    return verdict is None


def _claim(store: Store, row: ShowRow, owner: dict[str, Any]) -> None:
    if row.status != "active":
        raise ConflictError(f"show {row.id} is {row.status}; there is nothing to resume")
    if owner_alive(row):
        raise ConflictError(
            f"show {row.id} is running in pid {row.owner_pid} on "
            f"{row.owner_host}; wait for it, or stop that process and resume"
        )
    previous = row.as_dict()
    if not store.shows.claim(row.id, owner, previous=previous, lease_seconds=DEFAULT_LEASE_SECONDS):
        raise ConflictError(f"show {row.id} was taken over or ended meanwhile")


# -- running ----------------------------------------------------------------------------------


def _play_rows(spec: ShowSpec, show_id: str) -> list[dict[str, Any]]:
    return [
        {
            "id": f"{show_id}.{p.name}",
            "name": p.name,
            "position": i,
            "attempts": p.attempts,
            "depends_on_json": list(p.depends_on),
        }
        for i, p in enumerate(spec.plays)
    ]


def run_show(
    spec: ShowSpec,
    *,
    db_url: str | None = None,
    options: ShowOptions = ShowOptions(),
    show_id: str | None = None,
    stop: SignalTrap | None = None,
) -> ShowReport:
    """Run ``spec`` as a new show until it completes, needs a person, or ``stop`` gets a
    signal. Raises UsageError / ConflictError / NotFoundError (exit 2) before anything is
    written: a repository or base that is missing, an integration branch that is checked
    out or has commits base lacks (unless ``continue_integration``), an active show of
    the same topic."""
    if not spec.plays:
        raise UsageError("a show needs at least one play")
    if options.parallel is not None and options.parallel < 1:
        raise UsageError(f"--parallel must be at least 1, not {options.parallel}")
    if options.settings is None:  # read once, here, for the checks and every execution
        options = replace(options, settings=Settings.from_env())
    _check_plays(spec, options.settings)
    if not os.path.isabs(spec.repo):
        spec = replace(spec, repo=os.path.abspath(spec.repo))  # stored: resume needs it whole
    url = resolve_db_url(db_url)
    show_id = safe_component(show_id, "show id") if show_id else new_run_id()
    integration = spec.integration_branch(show_id)
    git = check_repo(spec, integration, continue_integration=options.continue_integration)
    base_sha = git.repo.branch_head(spec.base)
    store = open_store(url)
    try:
        _check_topic_free(store, spec.topic)
        if store.shows.get(show_id) is not None:
            raise ConflictError(f"show id {show_id!r} is already used")
        owner = current_owner()
        head = git.head()
        store.shows.create_with_plays(
            id=show_id,
            fields={
                "topic": spec.topic,
                "spec_json": spec.to_dict(),
                "repo": spec.repo,
                "base": spec.base,
                "base_sha": base_sha,
                "integration": integration,
                "integration_head": head or base_sha,
                **owner,
                "heartbeat_at": time.time(),
                "lease_seconds": DEFAULT_LEASE_SECONDS,
            },
            plays=_play_rows(spec, show_id),
            exclusive_topic=True,
        )
        if head is None:
            git.move_integration(str(base_sha), None)
        elif head != base_sha and git.repo.is_ancestor(head, str(base_sha)):
            git.move_integration(str(base_sha), head)  # nothing of its own: start from base
            store.update_fields("show", show_id, {"integration_head": base_sha})
        return _conduct(store, show_id, spec, url, options, stop, owner, resumed=False)
    finally:
        store.close()


def resume_show(
    show: str,
    *,
    db_url: str | None = None,
    options: ShowOptions = ShowOptions(),
    stop: SignalTrap | None = None,
) -> ShowReport:
    """Go on with an active show (id, id prefix or active topic) from its records.
    ConflictError (exit 2) when it ended, when a live process runs it, or when its
    integration branch was rewritten or is checked out."""
    url = resolve_db_url(db_url)
    store = open_existing(
        url, f"show with id {show!r}"
    )  # no database: nothing to resume, none made
    try:
        row = find_show(store, show)
        spec = ShowSpec.from_dict(row.spec_json)
        git = ShowGit(spec.repo, row.id, str(row.integration))
        check_not_checked_out(git)
        owner = current_owner()
        _claim(store, row, owner)
        return _conduct(store, row.id, spec, url, options, stop, owner, resumed=True)
    finally:
        store.close()


def _conduct(
    store: Store,
    show_id: str,
    spec: ShowSpec,
    url: str,
    options: ShowOptions,
    stop: SignalTrap | None,
    owner: dict[str, Any],
    *,
    resumed: bool,
) -> ShowReport:
    if options.settings is None:  # read once, here, for every play and gate
        options = replace(options, settings=Settings.from_env())
    show = _get(store, show_id)
    git = ShowGit(spec.repo, show_id, str(show.integration))
    say = options.on_progress or (lambda line: None)
    conductor = Conductor(
        store=store,
        show=show,
        spec=spec,
        git=git,
        workers=Workers(git, url, say, options.settings),  # plays and gates run on these
        parallel=options.parallel or spec.parallel or DEFAULT_PARALLEL,
        owner=owner,
        stop=stop,
        progress=say,
        beat_every=HEARTBEAT_INTERVAL,
    )
    # Its executions are killed before the show's lease lapses when it cannot renew it.
    conductor.lease = OwnerLease.take(DEFAULT_LEASE_SECONDS)
    say(
        f"show {show_id} ({spec.topic}): {'resumed' if resumed else 'started'}; "
        f"{len(spec.plays)} play(s) merge into {show.integration}"
    )
    try:
        if resumed:
            store.update_status(
                "show",
                show_id,
                new_status="active",
                reason_code="show.active.resumed",
                expected_statuses={"active"},
            )
            reap_gates(conductor)  # before any gate runs in the gate worktree again
            check_head(conductor)
            recover(conductor)
        outcome = conductor.run()
        _finish(store, conductor, outcome)  # still the owner: nobody resumes half-written
    finally:
        if conductor.workers.busy:
            conductor.workers.shutdown(15)
        conductor.lease.close()
        store.shows.release(show_id, owner)
    interrupted = stop.signal_name if outcome == "interrupted" and stop is not None else None
    return _report(store, show_id, interrupted)


def _finish(store: Store, conductor: Any, outcome: str) -> None:
    if outcome not in _ENDINGS:  # lost: aborted or taken over meanwhile
        if _get(store, conductor.show.id).status == "aborted":
            # a play this process moved while the abort wrote may have slipped past it
            settle_aborted_plays(store, conductor.show.id, reason_summary="the show was aborted")
            conductor.git.remove_gate()  # the abort left it to us: we were still using it
        return  # taken over: its new owner writes the show
    status, reason = _ENDINGS[outcome]
    show_id = conductor.show.id
    stuck = [n for n, r in conductor.rows.items() if r.status in ("escalated", "gate_failed")]
    summary = {
        "blocked": f"plays needing a person: {', '.join(stuck) or 'none'}",
        "final_gate_failed": "the final gate failed on the integration head",
        "integration_unverified": "the integration head a person moved failed its gate",
    }.get(outcome, "")
    if not store.update_status(
        "show",
        show_id,
        new_status=status,
        reason_code=reason,
        reason_summary=summary,
        expected_statuses={"active"},
    ):
        now = _get(store, show_id)
        conductor.say(f"show {conductor.spec.topic}: {now.status} meanwhile")
        return
    conductor.say(f"show {conductor.spec.topic}: {status} ({reason})")
    if status == "completed":
        conductor.git.remove_gate()


# -- aborting ---------------------------------------------------------------------------------

_SETTLE_ROUNDS = 20


def settle_aborted_plays(store: Store, show_id: str, **fields: Any) -> None:
    """Put every play of the aborted show in a terminal status (``abort_target``). A live
    owner may move a play between the read and the guarded write (pending → prepared):
    the play is read again and written from where it is now, until none is left."""
    for _ in range(_SETTLE_ROUNDS):
        left = False
        for play in store.shows.list_plays(show_id):
            target = abort_target(play.status)
            if target is None:
                continue
            moved = store.update_status(
                "play",
                play.id,
                new_status=target[0],
                reason_code=target[1],
                expected_statuses={play.status},
                **fields,
            )
            left = left or not moved
        if not left:
            return


def abort_show(
    show: str, *, db_url: str | None = None, actor: str, justification: str
) -> ShowReport:
    """End an active show as ``aborted``. A process still running it notices on its next
    heartbeat and stops its executions. Worktrees stay for a person to look at."""
    if not actor.strip() or not justification.strip():
        raise UsageError("abort needs --actor and --justification (they are audited)")
    store = open_existing(db_url, f"show with id {show!r}")
    try:
        row = find_show(store, show)
        if row.status != "active":
            raise ConflictError(f"show {row.id} is already {row.status}")
        meta = {"justification": justification}
        store.update_status(
            "show",
            row.id,
            new_status="aborted",
            reason_code="show.aborted.user",
            reason_summary=justification,
            source="admin",
            actor=actor,
            metadata=meta,
            expected_statuses={"active"},
        )
        settle_aborted_plays(
            store,
            row.id,
            reason_summary=justification,
            source="admin",
            actor=actor,
            metadata=meta,
        )
        # A live owner stops its executions at its next heartbeat and still uses the gate
        # worktree until then; a dead owner's executions are stopped here.
        if not owner_alive(row):
            reap_orphans(store, row.id, agents=True)
            if row.repo:
                git = ShowGit(row.repo, row.id, str(row.integration))
                with contextlib.suppress(GitError):  # housekeeping: the show is aborted
                    git.remove_gate()
        return _report(store, row.id)
    finally:
        store.close()

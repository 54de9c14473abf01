"""``lirun.Client``: lirun from Python, one object over one database.

What ``li run``, ``li agent``, ``li status`` and ``li wait`` do, as methods that take
Python values and return typed ones (``Run``, ``WaitOutcome``, ``Started``). The client
reads the environment once, when it is made without explicit settings
(``Settings.from_env()``), and never again: everything it starts gets those settings.
Errors are lirun's typed errors (``UsageError`` for input it cannot take,
``NotFoundError`` for an id that names no run…), each raised before anything is
recorded; a run's own fate (failed, timed out) is its status, never an exception.

The record a method returns is built by the code ``li status`` uses, so the two cannot
disagree (``Run.as_dict()`` is ``li status ID --json``).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from lirun.client.results import FlowResult, Overridden, ShowResult
from lirun.client.team import Team
from lirun.client.values import Queued, Run, RunStatus, Started, WaitOutcome
from lirun.errors import NotFoundError, UsageError
from lirun.settings import Settings
from lirun.store import Store, open_store

__all__ = ["RUN_KINDS", "Client"]

# ``runs(kind=...)``: what a run ran.
RUN_KINDS = ("agent", "command")


def database_url(db: str | os.PathLike[str] | None, settings: Settings) -> str:
    """``db`` > the settings' ``db_url`` > ``<home>/state.db`` (``LIRUN_HOME``, else
    ``~/.lirun``, as for ``li``), checked as ``li`` checks a ``--db``."""
    from lirun.paths import default_db_location, resolve_db_url

    if db is not None and os.fspath(db) != "":
        return resolve_db_url(db)
    return resolve_db_url(settings.db_url or default_db_location())


class Client:
    """lirun over one database: start runs, read their records, wait for them.

    ``Client()`` reads ``LIRUN_*`` from the environment once (``Settings.from_env()``);
    ``Client(db=..., settings=...)`` takes them as given (``db`` wins over
    ``settings.db_url``). The database is opened on first use and created if missing
    (``create=False``: DatabaseMissingError instead, and nothing is made); use the client
    as a context manager, or call ``close()``, to close it.
    """

    def __init__(
        self,
        db: str | os.PathLike[str] | None = None,
        *,
        settings: Settings | None = None,
        create: bool = True,
    ) -> None:
        self.settings = settings if settings is not None else Settings.from_env()
        self.db_url = database_url(db, self.settings)
        self._create = create
        self._store: Store | None = None
        self._opening = threading.Lock()  # AsyncClient calls come from worker threads

    # -- the store ---------------------------------------------------------------------

    @property
    def store(self) -> Store:
        """Internal: the open store (opened, and the database created, on first use)."""
        with self._opening:
            if self._store is None:
                self._store = open_store(self.db_url, create=self._create)
            return self._store

    def close(self) -> None:
        """Close the database; the client opens it again if used after."""
        with self._opening:
            store, self._store = self._store, None
        if store is not None:
            store.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- starting runs -----------------------------------------------------------------

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
        artifacts: Iterable[Mapping[str, Any]] = (),
        require_change: bool = False,
        env: Mapping[str, str] | None = None,
        detach: bool = False,
    ) -> Run | Started:
        """Run the command ``argv`` under supervision, as ``li run`` does; return its
        record once it has ended (``detach=True``: once it has started, with its id).

        ``cwd``: where it runs (default: this process's); ``timeout``: seconds before
        it is stopped (``timed_out``); ``artifacts``: the files it must produce, as
        ``{"id": ..., "path": ..., "required": bool}`` under its artifact directory;
        ``require_change``: completed needs a change in ``cwd`` or an artifact, not only
        exit 0; ``env``: variables added to its environment.

        UsageError when ``argv`` is empty or its program cannot be found (nothing is
        recorded).
        """
        from lirun.exec.task import Task

        where = _cwd(cwd)
        command = [str(part) for part in argv]
        _check_command(command, where)
        task = Task(
            run=tuple(command),
            timeout=timeout,
            artifacts=tuple(artifacts),
            require_change=require_change,
        )
        if detach:
            from lirun.client.detached import start_detached

            return start_detached(self, task, where, env=env)
        return self._execute(task, where, env=env)

    def agent(
        self,
        provider: str,
        prompt: str,
        *,
        model: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
        stall_timeout: float | None = None,
        profile: str | None = None,
        playbook: str | None = None,
        artifacts: Iterable[Mapping[str, Any]] = (),
        require_change: bool = False,
        provider_options: Mapping[str, Any] | None = None,
        detach: bool = False,
    ) -> Run | Started:
        """Run the agent CLI ``provider`` (``claude``, ``codex``, …) on ``prompt``, as
        ``li agent`` does, and return its record once it has ended (``detach=True``:
        once it has started, with its id; its provider options then come from a
        profile, not ``provider_options``).

        ``model``: the provider's model name; ``stall_timeout``: seconds without progress
        before it is stopped (0: never); ``profile`` / ``playbook``: the names of files
        under ``<home>/profiles`` and ``<home>/playbooks``; ``provider_options``: the
        options a profile's ``defaults:`` takes (``permission_mode``, ``allowed_tools``…).
        The rest as for ``run``. UsageError for an unknown provider, a provider not
        installed, or options it does not take (nothing is recorded).
        """
        from lirun.exec.task import Task

        if not provider or "/" in provider:
            from lirun.providers.registry import provider_names

            raise UsageError(
                f"provider {provider!r}: give the provider's name alone (one of "
                f"{', '.join(provider_names())}) and the model as model="
            )
        task = Task(
            agent=f"{provider}/{model}" if model else provider,
            prompt=prompt,
            options=dict(provider_options or {}),
            profile=profile,
            playbook=playbook,
            artifacts=tuple(artifacts),
            timeout=timeout,
            stall_timeout=stall_timeout,
            require_change=require_change,
        )
        where = _cwd(cwd)
        if detach:
            from lirun.client.detached import start_detached

            return start_detached(self, task, where)
        return self._execute(task, where)

    def _execute(self, task: Any, cwd: str, *, env: Mapping[str, str] | None = None) -> Run:
        from lirun.exec.execution import execute

        result = execute(self.request(task, cwd, env=env), store=self.store)
        return self.status(result.run_id)

    def request(self, task: Any, cwd: str, *, env: Mapping[str, str] | None = None) -> Any:
        """Internal: the ``RunRequest`` for ``task`` (a ``lirun.exec.task.Task``) in
        ``cwd``, against this client's database and settings."""
        from lirun.exec.task import build_request

        return build_request(task, cwd=cwd, db_url=self.db_url, env=env, settings=self.settings)

    def submit(
        self,
        action: Sequence[str],
        *,
        key: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
        start_deadline: float | str | None = None,
        retries: int | None = None,
        notify: str | None = None,
    ) -> Queued:
        """Queue one run of ``action`` for a worker (``li worker``), as ``li submit -- ACTION``
        does: ``["run", "make", "nightly"]``, ``["agent", "claude", "PROMPT"]``,
        ``["flow", "FILE"]``… (the words of ``li schedule add``'s ACTION; a relative path in
        them is read from ``cwd``, default this process's).

        ``key`` makes retrying safe: a second submit with it queues nothing and returns the
        first run (``created`` False); the same key with another action is a
        ConflictError. ``start_deadline`` (seconds, or a DURATION such as ``"30m"``; not
        started by then: failed), ``retries`` and ``notify`` (a shell command run when it
        ends) are ``li submit``'s options. UsageError for an action or option that is not
        valid here; nothing is queued then.
        """
        from lirun.schedules.actions import parse_action
        from lirun.schedules.definition import make_policies
        from lirun.schedules.registry import current_actor
        from lirun.schedules.submit import check_key, submit_once

        raw = {"start_deadline": start_deadline, "retries": retries, "notify": notify}
        policies = make_policies(raw, None)
        parsed = parse_action([str(word) for word in action], base=_cwd(cwd))
        checked = None if key is None else check_key(key)
        run, created = submit_once(
            self.store, parsed, key=checked, actor=current_actor(), policies=policies
        )
        return Queued(run_id=run.id, status=run.status, created=created, _row=run.as_dict())

    # -- flows, shows, teams, repairs --------------------------------------------------

    def flow(
        self,
        path: str | os.PathLike[str],
        vars: Mapping[str, str] | None = None,
        *,
        parallel: int | None = None,
        timeout: float | None = None,
        detach: bool = False,
    ) -> FlowResult | Started:
        """Run the flow file ``path`` as ``li flow run`` does, with ``vars`` for the
        variables it declares (``--var``), its legs in this process's current directory;
        return its result once it has ended (``detach=True``: once its invocation row
        exists, ``Started.run_id`` being the invocation id).

        ``parallel``: legs at once (default: the file's, else 4); ``timeout``: the whole
        flow's limit in seconds (``timed_out``). FlowFileError (a UsageError) listing every
        problem of the file, or a missing file, before anything is recorded; a leg's fate
        is its status, never an exception.
        """
        from lirun.client.orchestrations import run_flow_file

        return run_flow_file(
            self, path, dict(vars or {}), parallel=parallel, timeout=timeout, detach=detach
        )

    def show(
        self,
        path: str | os.PathLike[str],
        *,
        parallel: int | None = None,
        continue_integration: bool = False,
    ) -> ShowResult:
        """Run the show file ``path`` as ``li show run`` does, until it completes or needs
        a person (``status`` ``active``, ``needs_person`` naming the plays); its plays
        merge only through their gates. ShowFileError (a UsageError) for a file with
        problems, UsageError / ConflictError for a repository it cannot start in (an
        integration branch checked out, an active show of the same topic): nothing is
        recorded then.
        """
        from lirun.client.orchestrations import run_show_file

        return run_show_file(
            self, path, parallel=parallel, continue_integration=continue_integration
        )

    def team(self, name: str) -> Team:
        """The team ``name`` (an active team's name, an id or a unique id prefix):
        ``send``, ``inbox``, ``log``, ``members``. NotFoundError when there is none."""
        return Team(self, name)

    def override(
        self,
        id: str,
        status: str,
        *,
        reason: str,
        justification: str,
        actor: str,
        summary: str = "",
        entity: str = "session",
    ) -> Overridden:
        """Repair the status of record ``id`` (a run by default; ``entity`` names another
        kind: ``invocation``, ``play``, ``show``…) to ``status`` with ``reason``, audited
        with ``actor`` and ``justification``, as ``li override`` does.

        UsageError / ValidationError for an unknown status or a reason that does not fit
        it, a blank actor or justification; NotFoundError / AmbiguousIdError for the id;
        ConflictError for a run or flow that still runs; RecordChangedError when it changed
        meanwhile. Nothing is written when it raises.
        """
        from lirun.client.override import override

        return override(
            self.store,
            entity,
            id,
            status=status,
            reason=reason,
            actor=actor,
            justification=justification,
            summary=summary,
        )

    # -- reading records ---------------------------------------------------------------

    def status(self, run_id: str) -> Run:
        """The record of run ``run_id`` (the full id, a unique prefix, or a run id's
        unique random suffix, as ``li status`` takes it).

        NotFoundError when no run has that id; AmbiguousIdError (a UsageError) listing
        the candidates when a prefix or suffix names several.
        """
        from lirun.store.rows import SessionRow
        from lirun.views.detail import load_detail, resolve_record

        kind, row = resolve_record(self.store, run_id)
        if kind != "session":
            raise NotFoundError(
                f"{run_id!r} names a {kind.replace('_', ' ')}, not a run; "
                f"read it with `li status {run_id}`"
            )
        detail = load_detail(self.store, kind, row, time.time())
        return Run.from_record(SessionRow.from_row(row), detail)

    def runs(
        self,
        *,
        status: RunStatus | str | None = None,
        kind: str | None = None,
        since: float | None = None,
        limit: int = 50,
    ) -> list[Run]:
        """The newest runs first, at most ``limit``: those in ``status``, of ``kind``
        (``agent`` or ``command``), started within the last ``since`` seconds."""
        wanted = _check_filters(status, kind, since, limit)
        cutoff = None if since is None else time.time() - since
        rows: list[Any] = []
        fetch = limit
        while True:  # a kind is not a column: read more until enough match or none are left
            page = self.store.sessions.list_recent(status=wanted, since=cutoff, limit=fetch)
            rows = [row for row in page if kind is None or _kind_of(row.provider) == kind]
            if len(rows) >= limit or len(page) < fetch:
                break
            fetch *= 4
        return [self._run_of(row) for row in rows[:limit]]

    def _run_of(self, row: Any) -> Run:
        from lirun.views.detail import load_detail

        detail = load_detail(self.store, "session", row._asdict(), time.time())
        return Run.from_record(row, detail)

    # -- waiting -----------------------------------------------------------------------

    def iter_wait(
        self,
        ids: str | Iterable[str],
        *,
        timeout: float | None = None,
        interval: float = 1.0,
        should_stop: Callable[[], bool] | None = None,
    ) -> Generator[WaitOutcome, None, None]:
        """Each target's outcome as it ends (terminal, or an id that names nothing), as
        ``li wait`` reports it; when ``timeout`` seconds have passed, the ones still
        running follow with ``terminal=False``. Every target is yielded once.

        ``ids``: run ids (or invocation, play, schedule-run ids), full or a unique
        prefix or suffix. Changes are noticed at once on SQLite and PostgreSQL alike;
        ``interval`` bounds how long one can go unnoticed otherwise; ``should_stop()``,
        checked between reads, ends the wait as a timeout does.
        """
        from lirun.wait.api import check_interval, check_timeout, next_sleep, start_watching
        from lirun.wait.resolve import split_ids

        targets = split_ids([ids] if isinstance(ids, str) else list(ids))
        if not targets:
            raise UsageError("wait: give at least one id")
        period, limit = check_interval(interval), check_timeout(timeout)
        _, _, watcher = start_watching(self.store, targets, timeout=limit)
        stop = should_stop or (lambda: False)
        deadline = None if limit is None else time.monotonic() + limit
        try:
            while True:
                for outcome in watcher.tick():
                    yield WaitOutcome.from_outcome(outcome)
                left = next_sleep(period, deadline, time.monotonic())
                if watcher.done or left <= 0 or stop():
                    break
                watcher.wait(left, stop)
            for outcome in watcher.pending_outcomes():
                yield WaitOutcome.from_outcome(outcome)
        finally:
            watcher.close()

    def wait(
        self, ids: str | Iterable[str], *, timeout: float | None = None, interval: float = 1.0
    ) -> list[WaitOutcome]:
        """Wait until every target has ended (or ``timeout`` seconds): their outcomes in
        the order they ended, then the ones still running (``terminal=False``)."""
        return list(self.iter_wait(ids, timeout=timeout, interval=interval))


def _cwd(cwd: str | os.PathLike[str] | None) -> str:
    where = os.path.abspath(os.fspath(cwd)) if cwd is not None else os.getcwd()
    if not os.path.isdir(where):
        raise UsageError(f"cwd {where} is not a directory; give an existing directory")
    return where


def _check_command(command: list[str], cwd: str) -> None:
    """The program must exist before anything is recorded (as ``li run`` checks it)."""
    from lirun.exec.preflight import check_command

    if not command:
        raise UsageError("run: argv is empty; give the program and its arguments")
    check_command(command, cwd)


def _kind_of(provider: str | None) -> str:
    return "command" if provider == "command" else "agent"


def _check_filters(
    status: RunStatus | str | None, kind: str | None, since: float | None, limit: int
) -> str | None:
    if status is not None and status not in set(RunStatus):
        known = ", ".join(s.value for s in RunStatus)
        raise UsageError(f"status {status!r}: a run's status is one of {known}")
    if kind is not None and kind not in RUN_KINDS:
        raise UsageError(f"kind {kind!r}: a run is an agent or a command")
    if since is not None and not since > 0:
        raise UsageError(f"since must be a positive number of seconds, not {since!r}")
    if limit < 1:
        raise UsageError(f"limit must be at least 1, not {limit!r}")
    return None if status is None else RunStatus(status).value

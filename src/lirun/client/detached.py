"""``Client.run(..., detach=True)``: the run handed to a background ``li``, as ``li run
--detach`` hands it.

The same steps as the command (``lirun.exec.detach``): every check that can fail runs
here first (so a bad request is a UsageError and nothing is recorded), the run is
allocated, ``python -m lirun run --detached-worker --run-id ID ...`` starts in its own
session, and the call returns once that worker has created the run's row. The worker is
another process: it gets the client's settings through its environment (the variables
``Settings.from_env`` reads), never through its arguments, which every user can read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lirun.client.values import Started
from lirun.errors import UsageError
from lirun.settings import CGROUP_ENV, GUARD_ENV, HEARTBEAT_ENV, WRITE_RETRY_ENV, Settings

if TYPE_CHECKING:
    from lirun.client.sync import Client
    from lirun.exec.task import Task

__all__ = ["settings_env", "start_detached", "worker_argv"]

# The keys an artifact entry may have when it goes to the worker as ``--artifact``.
_ARTIFACT_KEYS = frozenset({"id", "path", "required"})


def settings_env(settings: Settings, db_url: str) -> dict[str, str]:
    """The variables that give a child ``li`` these settings and this database."""
    env = {"LIRUN_DB_URL": db_url, WRITE_RETRY_ENV: repr(settings.write_retry_seconds)}
    if settings.heartbeat_interval is not None:
        env[HEARTBEAT_ENV] = repr(settings.heartbeat_interval)
    env[CGROUP_ENV] = "on" if settings.cgroup else "off"
    env[GUARD_ENV] = "on" if settings.guard else "off"
    env.update(settings.provider_bins)
    return env


def worker_argv(task: Task) -> tuple[str, list[str]]:
    """The command (``run`` or ``agent``) and its options that make the worker run
    ``task``: ``li run``'s options, ``--`` and the command; or ``li agent``'s options,
    the provider and ``--prompt=-`` (the prompt goes on the worker's stdin, never in its
    arguments). UsageError for what these options cannot carry."""
    out = []
    if task.timeout is not None:
        out.append(f"--timeout={float(task.timeout)!r}")
    for entry in task.artifacts:
        extra = sorted(set(entry) - _ARTIFACT_KEYS)
        if extra or "id" not in entry or "path" not in entry:
            raise UsageError(
                f"artifact {dict(entry)!r}: a detached run takes entries of id, path and "
                "required only; put checks in a profile or playbook"
            )
        optional = "" if entry.get("required", True) else "?"
        out.append(f"--artifact={entry['id']}={entry['path']}{optional}")
    if task.require_change:
        out.append("--require-change")
    if task.run is not None:
        return "run", [*out, "--", *task.run]
    assert task.agent is not None
    if task.options:
        raise UsageError(
            "provider_options with detach=True: a detached agent takes them from a "
            "profile (profile=NAME, its defaults:), not as a mapping"
        )
    if task.stall_timeout is not None:
        out.append(f"--stall-timeout={float(task.stall_timeout)!r}")
    out += [f"--{key}={value}" for key, value in _named(task) if value is not None]
    return "agent", [*out, task.agent, "--prompt=-"]


def _named(task: Task) -> tuple[tuple[str, str | None], ...]:
    return (("profile", task.profile), ("playbook", task.playbook))


def start_detached(
    client: Client, task: Task, cwd: str, *, env: Mapping[str, str] | None = None
) -> Started:
    """Start ``task`` in a background ``li``; return once its row exists.

    DetachError when the worker exits before creating the row, or takes too long.
    """
    from lirun.exec.detach import detached_env, spawn_worker, wait_for_row
    from lirun.exec.execution import prepare
    from lirun.exec.request import settings_of
    from lirun.record.rundir import allocate_run

    request: Any = client.request(task, cwd)  # the checks build_request makes
    command, options = worker_argv(task)
    store = client.store
    prepare(request, store)
    run = allocate_run(request.save_dir, settings_of(request).run_id, client.settings)
    worker_env = {
        **detached_env(client.db_url),
        **settings_env(client.settings, client.db_url),
        **dict(env or {}),
    }
    proc = spawn_worker(
        command, [f"--cwd={cwd}", *options], run, env=worker_env, stdin_text=task.prompt
    )
    wait_for_row(store, run, proc)
    return Started(
        run_id=run.run_id, run_dir=str(run.state_root), artifact_dir=str(run.artifact_dir)
    )

"""``Client.flow`` and ``Client.show``: a flow file or a show file run to its end, as
``li flow run`` and ``li show run`` run it, and its record read back as typed values.

The file is read and checked whole first (FlowFileError / ShowFileError, each a
UsageError listing every problem with ``file:line``; nothing is recorded then). A flow
detached is handed to a background ``li flow run`` with the client's settings in its
environment, as ``li flow run --detach`` does, and the call returns once its invocation
row exists. A run started here installs no signal handlers: stop it with ``timeout``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from lirun.client.detached import settings_env
from lirun.client.results import FlowResult, PlayResult, ShowResult, ShowStatus
from lirun.client.values import Run, RunStatus, Started
from lirun.exec.detach import detached_env, spawn_worker, wait_for_row
from lirun.flows.engine import FlowOptions, run_flow
from lirun.flows.load import load_flow
from lirun.flows.report import FlowReport
from lirun.record.rundir import allocate_run, new_run_id
from lirun.shows.engine import ShowOptions, run_show
from lirun.shows.load import load_show
from lirun.shows.report import ShowReport

if TYPE_CHECKING:
    from lirun.client.sync import Client

__all__ = ["flow_result", "run_flow_file", "run_show_file", "show_result"]


def run_flow_file(
    client: Client,
    path: str | os.PathLike[str],
    vars: Mapping[str, str],
    *,
    parallel: int | None,
    timeout: float | None,
    detach: bool,
) -> FlowResult | Started:
    """Run the flow in ``path`` on ``client``'s database and settings, its legs in this
    process's current directory (as ``li flow run``)."""
    spec = load_flow(path, vars)
    if detach:
        return _detach_flow(client, str(spec.path or path), vars, parallel, timeout)
    options = FlowOptions(
        parallel=parallel,
        timeout=timeout,
        settings=client.settings.with_flags(db_url=client.db_url),
    )
    report = run_flow(spec, db_url=client.db_url, options=options)
    return flow_result(client, report)


def _detach_flow(
    client: Client,
    path: str,
    vars: Mapping[str, str],
    parallel: int | None,
    timeout: float | None,
) -> Started:
    argv = ["run", path, *(f"--var={k}={v}" for k, v in vars.items())]
    argv += [f"--{k}={v!r}" for k, v in (("parallel", parallel), ("timeout", timeout)) if v]
    run = allocate_run(run_id=new_run_id())
    env = {**detached_env(client.db_url), **settings_env(client.settings, client.db_url)}
    proc = spawn_worker("flow", argv, run, env=env)
    wait_for_row(client.store, run, proc, entity_type="invocation")
    return Started(
        run_id=run.run_id, run_dir=str(run.state_root), artifact_dir=str(run.artifact_dir)
    )


def flow_result(client: Client, report: FlowReport) -> FlowResult:
    """The typed result of a flow invocation's report: each leg that ran, as its run."""
    legs: dict[str, Run] = {}
    not_run = []
    for leg in report.legs:
        if leg.session_id is None:
            not_run.append(leg.id)
        else:
            legs[leg.id] = client.status(leg.session_id)
    return FlowResult(
        invocation_id=report.invocation_id,
        status=RunStatus(report.status),
        reason=report.reason_code,
        summary=report.reason_summary or "",
        run_dir=report.run_dir,
        exit_code=report.exit_code,
        legs=legs,
        not_run=tuple(not_run),
        _report=report.to_dict(),
    )


def run_show_file(
    client: Client,
    path: str | os.PathLike[str],
    *,
    parallel: int | None,
    continue_integration: bool,
) -> ShowResult:
    """Run the show in ``path`` until it completes or needs a person."""
    spec = load_show(path)
    options = ShowOptions(
        parallel=parallel,
        continue_integration=continue_integration,
        settings=client.settings.with_flags(db_url=client.db_url),
    )
    return show_result(run_show(spec, db_url=client.db_url, options=options))


def show_result(report: ShowReport) -> ShowResult:
    """The typed form of a show's board."""
    plays = tuple(
        PlayResult(
            id=play.id,
            name=play.name,
            status=play.status,
            reason=play.reason_code,
            summary=play.reason_summary or "",
            attempts=play.attempts,
            branch=play.branch,
            merge_sha=play.merge_sha,
            runs=tuple(play.session_ids),
        )
        for play in report.plays
    )
    return ShowResult(
        show_id=report.show_id,
        topic=report.topic,
        status=ShowStatus(report.status),
        reason=report.reason_code,
        summary=report.reason_summary or "",
        exit_code=report.exit_code,
        integration=report.integration,
        plays=plays,
        needs_person=tuple(report.needs_person),
        _report=report.to_dict(),
    )

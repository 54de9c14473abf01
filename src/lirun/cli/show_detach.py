"""``li show run --detach``: hand a checked show to a background ``li`` and print its id.

The parent has read and checked the show file (exit 2 on a problem, nothing started);
it picks the show id, starts ``python -m lirun show run --detached-worker --show-id ID``
in a new session with its output in ``<home>/shows/<id>/``, and returns once the worker
has created the show row: from then on ``li wait ID`` and ``li show status ID`` follow it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from lirun.cli.common import print_started, refuse_if_signalled
from lirun.exec.detach import detached_env, spawn_detached, wait_for_entity
from lirun.paths import lirun_home
from lirun.record.rundir import new_run_id
from lirun.signals import held_trap
from lirun.store import open_store

__all__ = ["detach", "show_log_dir"]


def show_log_dir(show_id: str) -> Path:
    """Where a detached show's own stdout and stderr go: ``<home>/shows/<id>``."""

    return lirun_home() / "shows" / show_id


def _worker_argv(args: argparse.Namespace, spec: Any, show_id: str) -> list[str]:
    argv = [sys.executable, "-m", "lirun", "show", "run", "--detached-worker"]
    argv += ["--show-id", show_id, spec.path or args.file]
    if args.parallel is not None:
        argv.append(f"--parallel={args.parallel}")
    if args.continue_integration:
        argv.append("--continue-integration")
    return argv  # the database goes in the environment: argv shows in `ps`


def detach(args: argparse.Namespace, spec: Any) -> int:
    store = open_store(args.db)  # the database must open before anything starts
    try:
        refuse_if_signalled(held_trap())
        show_id = args.show_id or new_run_id()
        logs = show_log_dir(show_id)
        logs.mkdir(parents=True, exist_ok=True, mode=0o700)
        out, err = logs / "li.stdout.log", logs / "li.stderr.log"
        argv = _worker_argv(args, spec, show_id)
        proc = spawn_detached(argv, out, err, env=detached_env(args.db))
        wait_for_entity(store, "show", show_id, proc, err_log=err)
    finally:
        store.close()
    started = {"show_id": show_id, "status": "active", "log_dir": str(logs)}
    print_started(started, "show_id", as_json=args.json)
    return 0

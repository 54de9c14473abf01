"""The fault suite: an owner killed while a leg's leftovers are being ended.

- ``leftover_grace[flow]``: a flow leg's child leaves a grandchild that ignores SIGTERM
  (and holds the output pipe), then exits 0. ``li flow run`` is SIGKILLed at a random
  moment inside the 2 s grace between the grandchild's SIGTERM and its SIGKILL. The leg's
  record must already say ``completed`` (its real outcome, not ``running``, later
  ``orphaned``), ``li flow resume`` must reuse it rather than run it again, and the
  grandchild must be gone within 2 s of the owner's death (by the cgroup or the owner's
  guard). Each round picks a cgroup or the fallback at random.

Counters (``faultkit``): ``lost`` for a leg whose outcome the record does not hold (or
that resume ran again), ``escaped`` for a process that outlived the owner.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from support.faultkit import (
    Escaped,
    Lost,
    Round,
    describe,
    fault_env,
    finish,
    li,
    read_row,
    run_rounds,
    start,
    tagged_processes,
    tail,
)
from test_faults_contain import _cgroups_here

pytestmark = [pytest.mark.faults, pytest.mark.slow]

# The supervisor's grace between a leftover's SIGTERM and its SIGKILL (at most 2 s).
GRACE = 2.0


def _leg_script(folder: Path) -> str:
    """Counts its runs, leaves a grandchild that ignores SIGTERM (once it does), marks the
    moment it exits, exits 0."""
    ready, ended, runs = folder / "ready", folder / "ended", folder / "runs"
    return (
        f"echo run >> {runs}; "
        f"sh -c 'trap \"\" TERM; touch {ready}; exec sleep 300' & "
        f"while [ ! -e {ready} ]; do sleep 0.01; done; touch {ended}"
    )


def _wait_for(path: Path, proc: subprocess.Popen[str], label: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            done = finish(proc, label, timeout=5)
            raise Lost(f"{label} ended (exit {done.rc}) before its leg did: {tail(done.err)}")
        time.sleep(0.005)


def _leg_rows(url: str) -> list[dict[str, object]]:
    from lirun.store import open_store

    store = open_store(url, readonly=True)
    try:
        sessions = store.sessions.list_recent()
    finally:
        store.close()
    return [row for s in sessions if (row := read_row(url, s.id)) is not None]


def test_leftover_grace_flow(tmp_path: Path) -> None:
    modes = ["cgroup", "off"] if _cgroups_here() else ["off"]

    def body(rnd: Round) -> None:
        mode = rnd.rng.choice(modes)
        url = str(rnd.workdir / "state.db")
        extra = {"LIRUN_CGROUP": "off" if mode == "off" else ""}
        env = fault_env(rnd.workdir / "home", url, **extra)
        flow = rnd.workdir / "flow.yaml"
        script = _leg_script(rnd.workdir)
        leg_yaml = f"{{id: a, run: [sh, -c, {json.dumps(script)}]}}"  # JSON: a YAML flow scalar
        flow.write_text(f"legs:\n  - {leg_yaml}\n", encoding="utf-8")
        proc = start(rnd, "flow", "run", str(flow), env=env, tagged=True)
        _wait_for(rnd.workdir / "ended", proc, "li flow run")
        # Inside the grace: past the moment the record takes to land, before the SIGKILL.
        pause = rnd.rng.uniform(0.3, GRACE - 0.2)
        rnd.note(f"LIRUN_CGROUP={extra['LIRUN_CGROUP']}; SIGKILL {pause:.2f}s after the exit")
        time.sleep(pause)
        proc.kill()
        proc.communicate(timeout=30)
        killed_at = time.monotonic()
        while tagged_processes(rnd.tag) and time.monotonic() - killed_at < 2.0:
            time.sleep(0.05)
        left = tagged_processes(rnd.tag)
        if left:
            raise Escaped(f"2 s after li flow run was killed its leftover runs: {describe(left)}")
        [leg] = _leg_rows(url)
        if leg["status"] != "completed":
            rnd.fail(
                "lost",
                f"the leg's child exited 0 {pause:.2f}s before its owner died, but its "
                f"record says {leg['status']} ({leg['status_reason_code']})",
            )
        resumed = li(rnd, "flow", "resume", str(leg["invocation_id"]), env=env)
        if resumed.rc != 0:
            rnd.fail("lost", f"li flow resume exited {resumed.rc}: {tail(resumed.err)}")
        runs = (rnd.workdir / "runs").read_text().split()
        if len(runs) != 1:
            rnd.fail("lost", f"the leg ran {len(runs)} times: resume ran it again")
        left = tagged_processes(rnd.tag)
        if left:
            raise Escaped(f"processes outlived the resumed flow: {describe(left)}")

    run_rounds("leftover_grace[flow]", body, tmp_path, parallel=2)

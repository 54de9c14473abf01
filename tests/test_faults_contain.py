"""The fault suite, issue 19 items 2 and 3: nothing a run starts outlives it or its owner.

- ``daemon_escape[cgroup|nocgroup]``: the issue's double-forking ``setsid`` daemon, with
  random pauses between its forks. After ``li run`` ends no process of it is left, and
  the record's evidence names what was killed (``LIRUN_CGROUP=off`` forces the fallback).
- ``owner_sigkill[flow|show|worker]``: the owner of running legs (``li flow run``, ``li
  show run``, ``li worker``) is SIGKILLed at a random moment mid-leg. Within two seconds no
  process of the legs is left (a background ``setsid`` job included), none finishes its
  work afterwards, and once ``li reap`` ran each leg's record says its processes were
  killed with their owner. Each round picks a cgroup or the fallback at random.

Counters (``faultkit``): ``escaped`` for a process that outlived its run or owner (or work
done after the owner died), ``lying`` for a record that does not say what was killed.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support.faultkit import (
    Escaped,
    Lost,
    Round,
    check_run_exit,
    describe,
    fault_env,
    finish,
    leftover_processes,
    li,
    new_run_id,
    read_row,
    run_rounds,
    start,
    tagged_processes,
    tail,
)
from support.gitkit import GIT_ENV
from support.showfilekit import write_show

pytestmark = [pytest.mark.faults, pytest.mark.slow]

# Seconds a leg works before it writes its result: long enough to be killed mid-leg.
WORK = 2.5
# The daemon (fork, setsid, fork, the middle exits at once), after a random pause;
# the child itself lingers a random time after its fork before it exits.
DAEMON = (
    "import os,sys,time; time.sleep(float(sys.argv[1])); "
    "os.fork() and (time.sleep(float(sys.argv[2])), os._exit(0)); "
    "os.setsid(); os.fork() and os._exit(0); time.sleep(300)"
)
MODES = [pytest.param("cgroup", id="cgroup"), pytest.param("off", id="nocgroup")]


def _mode_env(mode: str) -> dict[str, str]:
    if mode == "off":
        return {"LIRUN_CGROUP": "off"}
    if not _cgroups_here():
        pytest.skip("no cgroup v2 this process may create cgroups in")
    return {"LIRUN_CGROUP": ""}


def _evidence(row: dict[str, Any] | None, kind: str) -> list[dict[str, Any]]:
    refs = (row or {}).get("status_evidence_refs") or []
    return [e for e in refs if isinstance(e, dict) and e.get("kind") == kind]


@pytest.mark.parametrize("mode", MODES)
def test_daemon_escape(tmp_path: Path, mode: str) -> None:
    extra = _mode_env(mode)

    def body(rnd: Round) -> None:
        url = str(rnd.workdir / "state.db")
        env = fault_env(rnd.workdir / "home", url, **extra)
        run_id = new_run_id(rnd)
        first = rnd.rng.uniform(0, 0.3)
        linger = rnd.rng.choice([0.0, rnd.rng.uniform(0, 0.3)])
        rnd.note(f"fork after {first:.2f}s, the child exits {linger:.2f}s later")
        argv = [sys.executable, "-c", DAEMON, f"{first:.3f}", f"{linger:.3f}"]
        proc = start(rnd, "run", "--json", "--run-id", run_id, "--", *argv, env=env, tagged=True)
        done = finish(proc, "li run", timeout=30)
        left = leftover_processes(rnd.tag)
        if left:
            raise Escaped(f"the daemon outlived its run: {describe(left)}")
        row = read_row(url, run_id)
        check_run_exit(done, row)
        killed = [p for e in _evidence(row, "killed_descendants") for p in e["processes"]]
        if not any("os.setsid()" in p.get("command", "") for p in killed):
            refs = (row or {}).get("status_evidence_refs")
            rnd.fail("lying", f"no killed_descendants evidence names the daemon: {refs}")
        if mode == "cgroup" and not any(
            "cgroup" in e for e in _evidence(row, "killed_descendants")
        ):
            rnd.fail("lying", "the run was in a cgroup but its evidence does not say so")

    run_rounds(f"daemon_escape[{'cgroup' if mode != 'off' else 'nocgroup'}]", body, tmp_path)


def _leg_script(folder: Path, name: str) -> str:
    """A leg: marks itself started, leaves a ``setsid`` job behind, works, then writes."""
    work = folder / f"work-{name}"
    return (
        f"setsid sh -c 'sleep {WORK}; echo late >> {work}' & "
        f"touch {folder / ('started-' + name)}; sleep {WORK}; echo done >> {work}"
    )


def _sigkill_owner(
    rnd: Round,
    proc: Any,
    names: list[str],
    url: str,
    env: dict[str, str],
    label: str,
) -> None:
    """Kill the owner once every leg started (plus a random pause), then check the three
    promises: gone within 2 s, no work done afterwards, the record says so after reap."""
    deadline = time.monotonic() + 60
    while not all((rnd.workdir / f"started-{n}").exists() for n in names):
        if proc.poll() is not None or time.monotonic() > deadline:
            done = finish(proc, label, timeout=5)
            raise Lost(f"{label} ended (exit {done.rc}) before its legs started: {tail(done.err)}")
        time.sleep(0.02)
    # Half the rounds kill at once: nearest to the moment the legs were spawned, when the
    # owner may not have told its guard about them yet.
    pause = rnd.rng.choice([0.0, rnd.rng.uniform(0, 0.8)])
    rnd.note(f"SIGKILL {label} {pause:.2f}s after its legs started")
    time.sleep(pause)
    proc.kill()
    proc.communicate(timeout=30)
    killed_at = time.monotonic()
    while tagged_processes(rnd.tag) and time.monotonic() - killed_at < 2.0:
        time.sleep(0.05)
    left = tagged_processes(rnd.tag)
    if left:
        raise Escaped(f"2 s after {label} was killed its legs still run: {describe(left)}")
    time.sleep(max(0.0, WORK + 0.5 - (time.monotonic() - killed_at)))
    late = [n for n in names if (rnd.workdir / f"work-{n}").exists()]
    if late:
        raise Escaped(f"legs {late} finished their work after {label} died")
    reap = li(rnd, "reap", env=env)
    if reap.rc not in (0, 2):
        raise Lost(f"li reap exited {reap.rc}: {tail(reap.err)}")
    _check_legs_recorded(rnd, url)


def _check_legs_recorded(rnd: Round, url: str) -> None:
    from lirun.store import open_store

    store = open_store(url, readonly=True)
    try:
        sessions = store.sessions.list_recent()
    finally:
        store.close()
    if not sessions:
        raise Lost("no leg's execution row")
    for session in sessions:
        row = read_row(url, session.id)
        if row is None or row["status"] == "running":
            raise Lost(f"leg {session.id} is still running after li reap")
        if row["status"] in ("completed", "completed_empty"):
            raise Escaped(f"leg {session.id} completed after its owner died")
        if not _evidence(row, "killed_with_owner"):
            rnd.fail(
                "lying",
                f"leg {row['id']} ({row['status_reason_code']}) does not say "
                f"its processes died with their owner: {row.get('status_evidence_refs')}",
            )


def _cgroups_here() -> bool:
    from lirun.exec import cgroup as cgroups
    from lirun.settings import Settings

    made = cgroups.create("lirun-test", settings=Settings())
    if made is not None:
        made.remove()
    return made is not None


def _owner_rounds(
    tmp_path: Path,
    kind: str,
    start_owner: Callable[[Round, dict[str, str]], tuple[Any, list[str], str, dict[str, str]]],
) -> None:
    modes = ["cgroup", "off"] if _cgroups_here() else ["off"]

    def body(rnd: Round) -> None:
        mode = rnd.rng.choice(modes)  # both paths, at no extra cost
        rnd.note(f"LIRUN_CGROUP={mode if mode == 'off' else ''}")
        proc, names, url, env = start_owner(rnd, {"LIRUN_CGROUP": "off" if mode == "off" else ""})
        _sigkill_owner(rnd, proc, names, url, env, f"li {kind}")

    run_rounds(f"owner_sigkill[{kind}]", body, tmp_path, parallel=2)


def test_owner_sigkill_flow(tmp_path: Path) -> None:
    def start_owner(
        rnd: Round, extra: dict[str, str]
    ) -> tuple[Any, list[str], str, dict[str, str]]:
        url = str(rnd.workdir / "state.db")
        env = fault_env(rnd.workdir / "home", url, **extra)
        names = ["a", "b"]
        legs = "".join(
            f"  - {{id: {n}, run: [sh, -c, {_leg_script(rnd.workdir, n)!r}]}}\n" for n in names
        )
        flow = rnd.workdir / "flow.yaml"
        flow.write_text(f"legs:\n{legs}", encoding="utf-8")
        proc = start(rnd, "flow", "run", str(flow), "--parallel", "2", env=env, tagged=True)
        return proc, names, url, env

    _owner_rounds(tmp_path, "flow", start_owner)


def test_owner_sigkill_show(tmp_path: Path) -> None:
    def start_owner(
        rnd: Round, extra: dict[str, str]
    ) -> tuple[Any, list[str], str, dict[str, str]]:
        url = str(rnd.workdir / "state.db")
        env = fault_env(rnd.workdir / "home", url, **GIT_ENV, **extra)
        names = ["one", "two"]
        plays = "".join(f"  - name: {n}\n    run: {_leg_script(rnd.workdir, n)!r}\n" for n in names)
        text = (
            "topic: kill\nrepo: repo\nbase: main\nintegration: show/kill\n"
            f'gate: "true"\nparallel: 2\nplays:\n{plays}'
        )
        path = write_show(rnd.workdir, text)
        proc = start(rnd, "show", "run", str(path), env=env, tagged=True)
        return proc, names, url, env

    _owner_rounds(tmp_path, "show", start_owner)


def test_owner_sigkill_worker(tmp_path: Path) -> None:
    def start_owner(
        rnd: Round, extra: dict[str, str]
    ) -> tuple[Any, list[str], str, dict[str, str]]:
        url = str(rnd.workdir / "state.db")
        env = fault_env(rnd.workdir / "home", url, **extra)
        names = ["w"]
        proc = start(rnd, "worker", "--lease", "5s", env=env, tagged=True)
        script = _leg_script(rnd.workdir, "w")
        submitted = li(rnd, "submit", "--", "run", "sh", "-c", script, env=env)
        if submitted.rc != 0:
            proc.kill()
            finish(proc, "li worker", timeout=10, allow_traceback=True)
            raise Lost(f"li submit exited {submitted.rc}: {tail(submitted.err)}")
        return proc, names, url, env

    _owner_rounds(tmp_path, "worker", start_owner)

"""What ``LIRUN_CGROUP=off`` loses: an ``env -i`` daemon started just before its owner
dies. Prints ``name: value`` lines.

    .venv/bin/python bench/bench_nocgroup_daemon.py [--rounds 40] [--owners run,flow]

A run's child starts a double-forked daemon (fork, ``setsid``, fork) under ``env -i``, so
it carries no run mark and has left the run's group and session, then keeps working. Its
owner (``li run``, or ``li flow run``, which holds a lease) is SIGKILLed a random delay
(0 to 1 s) after the daemon wrote its pid and the time; 3 s later the bench looks whether
the daemon still runs (and kills it). Rounds are counted by the delay measured between
the daemon's time and the kill, so a loaded machine does not shift them. Without a
cgroup only the owner's guard can find such a daemon after the owner died, and only in
its last look at the owner's process tree, which it takes every
``owner_tree.SNAPSHOT_SECONDS`` (0.5 s) while the owner holds a lease; ``li run`` holds
none. With a cgroup (when this host lets lirun make one) the daemon cannot get away.

- ``survived.<owner>.<mode>.<from>-<to>s``: the share (0 to 1) of the rounds, SIGKILLed
  between ``from`` and ``to`` seconds after the daemon started, in which it outlived its
  owner; ``mode`` ``nocgroup`` (``LIRUN_CGROUP=off``) or ``cgroup``.
- ``rounds.<owner>.<mode>.<from>-<to>s``: how many rounds fell in that bucket.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchkit import out

ROOT = Path(__file__).resolve().parent.parent
BUCKETS = [(0.0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1.5)]
# The daemon: fork, setsid, fork; the grandchild writes its pid and lives on.
DAEMON = (
    "import os,sys,time; os.fork() and os._exit(0); os.setsid(); os.fork() and os._exit(0); "
    "open(sys.argv[1] + '.tmp', 'w').write(f'{os.getpid()} {time.time()!r}'); "
    "os.rename(sys.argv[1] + '.tmp', sys.argv[1]); time.sleep(300)"
)


def _cgroups_here() -> bool:
    sys.path.insert(0, str(ROOT / "src"))
    from lirun.exec import cgroup as cgroups
    from lirun.settings import Settings

    made = cgroups.create("lirun-bench", settings=Settings())
    if made is not None:
        made.remove()
    return made is not None


def _child_argv(pid_file: Path) -> list[str]:
    daemon = f"env -i {sys.executable} -c {json.dumps(DAEMON)} {pid_file}"
    return ["sh", "-c", f"{daemon}; sleep 30"]


def _start_owner(owner: str, folder: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    argv = _child_argv(folder / "daemon.pid")
    if owner == "run":
        args = ["run", "--", *argv]
    else:
        flow = folder / "flow.yaml"
        flow.write_text(f"legs:\n  - {{id: a, run: {json.dumps(argv)}}}\n", encoding="utf-8")
        args = ["flow", "run", str(flow)]
    return subprocess.Popen(
        [sys.executable, "-m", "lirun", *args],
        env=env,
        cwd=folder,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def _round(owner: str, mode: str, delay: float, base: Path) -> tuple[float, bool] | None:
    """(the measured delay, whether the daemon outlived its owner); None when the round
    could not be set up."""
    folder = Path(tempfile.mkdtemp(dir=base))
    env = {
        **os.environ,
        "LIRUN_HOME": str(folder / "home"),
        "LIRUN_DB_URL": str(folder / "state.db"),
        "LIRUN_CGROUP": "off" if mode == "nocgroup" else "",
    }
    proc = _start_owner(owner, folder, env)
    pid_file = folder / "daemon.pid"
    deadline = time.monotonic() + 30
    while not pid_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            return None
        time.sleep(0.002)
    pid, started = pid_file.read_text().split()
    time.sleep(delay)
    killed_at = time.time()
    proc.kill()
    proc.wait()
    daemon = int(pid)
    time.sleep(3.0)  # the guard's kill takes at most 2 s
    survived = _alive(daemon)
    with contextlib.suppress(OSError):
        os.kill(daemon, signal.SIGKILL)
    return killed_at - float(started), survived


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40, help="rounds per owner and mode")
    parser.add_argument("--owners", default="run,flow", help="owners: run, flow")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    modes = ["nocgroup", "cgroup"] if _cgroups_here() else ["nocgroup"]
    with tempfile.TemporaryDirectory(prefix="lirun-bench-") as tmp:
        for owner in args.owners.split(","):
            for mode in modes:
                results = [
                    _round(owner, mode, rng.uniform(0.0, 1.0), Path(tmp))
                    for _ in range(args.rounds)
                ]
                done = [r for r in results if r is not None]
                for low, high in BUCKETS:
                    inside = [survived for delay, survived in done if low <= delay < high]
                    share = sum(inside) / len(inside) if inside else float("nan")
                    out(f"survived.{owner}.{mode}.{low:g}-{high:g}s", share)
                    out(f"rounds.{owner}.{mode}.{low:g}-{high:g}s", len(inside))


if __name__ == "__main__":
    main()

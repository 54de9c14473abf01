"""Simulated machines: processes in their own UTS, PID and network namespaces.

Each ``SimHost`` is a network namespace joined to this machine by a veth pair with a
/30 of its own (``10.231.N.1`` on this side, ``10.231.N.2`` inside); a process started on
it also gets its own UTS namespace (its own host name) and PID namespace (it is pid 1
there), so to the code under test it is another machine that reaches PostgreSQL over a
network link. ``cut()`` takes the link down (packets vanish, connections hang, as when a
cable or a switch goes) and ``restore()`` brings it back.

``sim_cluster`` is a throwaway PostgreSQL cluster of its own that listens on 127.0.0.1
and on the host side of every veth, with trust auth for 10.231.0.0/16 only; it is started
after the hosts exist (a server can only listen on addresses that exist).

``namespaces_unavailable()`` says why not when this process cannot make namespaces (not
root, no ``ip``/``unshare``, a container without CAP_SYS_ADMIN/CAP_NET_ADMIN); tests skip
with that reason.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from support.pgcluster import PgCluster, kept_port, server_bin_dir

SUBNET = "10.231.0.0/16"


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def namespaces_unavailable() -> str | None:
    """None when network/UTS/PID namespaces and veth pairs can be made here, else why not."""
    if os.geteuid() != 0:
        return "simulated hosts need root (network namespaces and veth pairs)"
    for tool in ("ip", "unshare"):
        if shutil.which(tool) is None:
            return f"simulated hosts need `{tool}` (iproute2 / util-linux)"
    probe = f"lirunprobe{os.getpid()}"
    made = _run("ip", "netns", "add", probe)
    if made.returncode != 0:
        return f"`ip netns add` is not allowed here: {made.stderr.strip()}"
    try:
        pair = _run("ip", "link", "add", f"lp{os.getpid() % 100000}", "type", "veth",
                    "peer", "name", "lpeer", "netns", probe)  # fmt: skip
        if pair.returncode != 0:
            return f"veth pairs are not allowed here: {pair.stderr.strip()}"
        _run("ip", "link", "del", f"lp{os.getpid() % 100000}")
        inner = _run("ip", "netns", "exec", probe, "unshare", "--uts", "--pid", "--fork",
                     "--mount-proc", "true")  # fmt: skip
        if inner.returncode != 0:
            return f"UTS/PID namespaces are not allowed here: {inner.stderr.strip()}"
    finally:
        _run("ip", "netns", "del", probe)
    return None


class SimHost:
    """One simulated machine (see the module docstring)."""

    def __init__(self, name: str, index: int) -> None:
        self.name = name
        self.index = index
        tag = f"{os.getpid() % 100000}{index}"
        self.netns = f"lirun{tag}"
        self.outer_if = f"lro{tag}"[:15]
        self.inner_if = "eth0"
        self.server_address = f"10.231.{index}.1"  # this machine, as the host sees it
        self.address = f"10.231.{index}.2"
        self.procs: list[subprocess.Popen[bytes]] = []

    def create(self) -> None:
        steps = [
            ["ip", "netns", "add", self.netns],
            ["ip", "link", "add", self.outer_if, "type", "veth", "peer", "name",
             self.inner_if, "netns", self.netns],
            ["ip", "addr", "add", f"{self.server_address}/30", "dev", self.outer_if],
            ["ip", "link", "set", self.outer_if, "up"],
            ["ip", "-n", self.netns, "addr", "add", f"{self.address}/30", "dev", self.inner_if],
            ["ip", "-n", self.netns, "link", "set", self.inner_if, "up"],
            ["ip", "-n", self.netns, "link", "set", "lo", "up"],
        ]  # fmt: skip
        for step in steps:
            done = _run(*step)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(step)}: {done.stderr.strip()}")

    def start(self, argv: Sequence[str], *, log: Path, env: dict[str, str], cwd: Path
              ) -> subprocess.Popen[bytes]:  # fmt: skip
        """Run ``argv`` on this host (its own host name and pid 1 of its PID namespace)."""
        wrapped = [
            "ip", "netns", "exec", self.netns,
            "unshare", "--uts", "--pid", "--fork", "--mount-proc", "--kill-child",
            "sh", "-c", 'hostname "$0" && exec "$@"', self.name, *argv,
        ]  # fmt: skip
        proc = subprocess.Popen(
            wrapped, stdout=log.open("ab"), stderr=subprocess.STDOUT, env=env, cwd=cwd
        )
        self.procs.append(proc)
        return proc

    @staticmethod
    def signal(proc: subprocess.Popen[bytes], signum: int) -> None:
        """Send ``signum`` to the program itself (under ``unshare``), not to the wrapper."""
        try:
            kids = psutil.Process(proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return
        for kid in kids:
            if kid.name() not in {"ip", "unshare", "sh"}:
                kid.send_signal(signum)

    def stop(self, proc: subprocess.Popen[bytes], timeout: float = 20) -> int:
        if proc.poll() is None:
            self.signal(proc, signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(5)

    def cut(self) -> None:
        _run("ip", "link", "set", self.outer_if, "down")

    def restore(self) -> None:
        _run("ip", "link", "set", self.outer_if, "up")

    def destroy(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()  # unshare --kill-child takes the program with it
                proc.wait(5)
        _run("ip", "link", "del", self.outer_if)
        _run("ip", "netns", "del", self.netns)


def reachable_from(cluster: PgCluster, hosts: Sequence[SimHost]) -> None:
    """Make ``cluster`` (not yet initialised) listen on every host's link, trusting them."""
    cluster.listen_addresses = ",".join(["127.0.0.1", *(h.server_address for h in hosts)])
    cluster.hba.append(f"host all all {SUBNET} trust")


def sim_cluster(hosts: Sequence[SimHost]) -> PgCluster:
    """A throwaway cluster reachable from every host (see the module docstring)."""
    bin_dir = server_bin_dir()
    if bin_dir is None:
        raise RuntimeError("no initdb found (set LIRUN_TEST_PG_BIN)")
    base = Path(tempfile.mkdtemp(prefix="lirun-simhosts-", dir="/tmp"))
    cluster = PgCluster(bin_dir, base, kept_port())
    reachable_from(cluster, hosts)
    try:
        cluster.init()
        cluster.start()
    except BaseException:
        cluster.destroy()
        raise
    return cluster


def url_from(host: SimHost, cluster: PgCluster, url: str) -> str:
    """``url`` (on 127.0.0.1) as ``host`` reaches it: the host side of its veth."""
    return url.replace(f"@127.0.0.1:{cluster.port}/", f"@{host.server_address}:{cluster.port}/")


@contextmanager
def simulated_hosts(*hosts: tuple[str, int]) -> Iterator[tuple[list[SimHost], PgCluster]]:
    """``(name, index)`` hosts and a cluster they all reach; skips the test (with the
    reason) where namespaces are not allowed. Everything is removed afterwards."""
    reason = namespaces_unavailable()
    if reason:
        pytest.skip(reason)
    made = [SimHost(name, index) for name, index in hosts]
    cluster = None
    try:
        for host in made:
            host.create()
        cluster = sim_cluster(made)
        yield made, cluster
    finally:
        for host in made:
            host.destroy()
        if cluster is not None:
            cluster.destroy()

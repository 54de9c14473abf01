"""Several machines on one PostgreSQL: serving processes on simulated hosts (their own
UTS, PID and network namespaces, reaching the server over a veth pair), one host's link
cut mid-run and restored (``support.simhosts``; skipped where namespaces are not allowed).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.pgcluster import PgCluster
from support.queuekit import (
    TESTS_DIR,
    add_runs,
    new_queue_url,
    query,
    server_argv,
    server_env,
    wait_until,
)
from support.simhosts import SimHost, simulated_hosts, url_from

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture
def hosts() -> Iterator[tuple[list[SimHost], PgCluster]]:
    with simulated_hosts(("alpha", 1), ("beta", 2)) as made:
        yield made


def winners(url: str) -> dict[str, list[str]]:
    got: dict[str, list[str]] = {}
    for run_id, owner, won in query(url, "SELECT run_id, owner, won FROM qevents ORDER BY n"):
        got.setdefault(str(run_id), [])
        if won:
            got[str(run_id)].append(str(owner))
    return got


def deliveries(url: str, run_id: str) -> list[tuple[object, ...]]:
    return query(url, "SELECT owner, won FROM qevents WHERE run_id = %s ORDER BY n", [run_id])


def test_a_cut_host_runs_nothing_twice_while_cut_or_after(
    hosts: tuple[list[SimHost], PgCluster], tmp_path: Path
) -> None:
    from lirun.schedules.pgqueue import ProcrastinateTransport

    (alpha, beta), cluster = hosts
    for url in new_queue_url(cluster.url):
        add_runs(url, ["held"], hold=12)
        during = [f"during-{i}" for i in range(5)]
        after = [f"after-{i}" for i in range(8)]
        add_runs(url, [*during, *after], hold=0.2)
        queue = ProcrastinateTransport(url)
        logs = {h.name: tmp_path / f"{h.name}.log" for h in (alpha, beta)}

        def start(
            host: SimHost, url: str = url, logs: dict[str, Path] = logs
        ) -> subprocess.Popen[bytes]:
            argv = server_argv(url_from(host, cluster, url), host.name)
            return host.start(argv, log=logs[host.name], env=server_env(), cwd=TESTS_DIR)

        try:
            a = start(alpha)
            queue.enqueue("held")
            assert wait_until(lambda: winners(url).get("held") == ["alpha"], 30), (  # noqa: B023
                logs["alpha"].read_text()
            )
            b = start(beta)
            alpha.cut()
            cut_at = time.monotonic()
            # alpha's heartbeat stops: beta takes the job over, and loses the run's CAS
            assert wait_until(lambda: len(deliveries(url, "held")) == 2, 20)  # noqa: B023
            assert deliveries(url, "held") == [("alpha", True), ("beta", False)]
            for run_id in during:
                queue.enqueue(run_id)
            assert wait_until(lambda: all(winners(url).get(r) == ["beta"] for r in during), 20)  # noqa: B023
            assert time.monotonic() - cut_at < 12  # all of it while alpha was still cut
            alpha.restore()
            # alpha's run ends on alpha once its link is back; the queue doubles nothing
            done = "SELECT state, owner FROM qruns WHERE run_id = 'held'"
            assert wait_until(lambda: query(url, done) == [("done", "alpha")], 40), (  # noqa: B023
                logs["alpha"].read_text()
            )
            for run_id in after:
                queue.enqueue(run_id)
            assert wait_until(lambda: all(winners(url).get(r) for r in after), 30), (  # noqa: B023
                logs["alpha"].read_text(),
                logs["beta"].read_text(),
            )
            assert a.poll() is None
            assert b.poll() is None
        finally:
            queue.close()
            codes = [host.stop(proc) for host in (alpha, beta) for proc in host.procs]
        got = winners(url)
        assert all(len(owners) == 1 for owners in got.values()), got
        assert sorted(got) == sorted(["held", *during, *after])
        assert codes == [0, 0], (logs["alpha"].read_text(), logs["beta"].read_text())
        for host in (alpha, beta):  # its own host name, and pid 1 of its own PID namespace
            assert f"serving on {host.name} as pid 1" in logs[host.name].read_text()

"""A fleet on one PostgreSQL that fails over: simulated hosts, flapping links, one failover.

    .venv/bin/python bench/bench_fleet.py [--runs 1000] [--hosts 4] [--workers 2]
        [--concurrency 4] [--rate 60] [--lease 60s] [--seed N] [--no-failover] [--no-flaps]

Needs root (network namespaces, as the ``lease_cut_link`` fault kind) and PostgreSQL's
server binaries. ``--hosts`` simulated machines (their own network, UTS and PID
namespaces, reaching the database over a veth pair, ``tests/support/simhosts.py``) each
run ``--workers`` ``li worker --concurrency N --lease L`` over one database: a primary
and its streaming standby, started here on free ports, with synchronous replication (an
acknowledged commit is on both), reached through one URL naming both servers. The bench
submits ``--runs`` runs (``li submit``'s library call, ``--retries 1``, paced at
``--rate`` per second, each with a key so a submit retried across the failover queues
once) while a schedule fires every second. Every run's work appends
``<its session id> <time>`` to a ledger. Meanwhile one host at a time loses its link for
1 to 20 s (``--no-flaps``: none), and once, at a random moment of the submitting, the
primary is killed (SIGKILL of every server process) and the standby promoted 0 to 5 s
later (``--no-failover``: none).

It reports (``name: value`` lines):

- ``fleet.runs_per_s``: submitted runs finished / (the last one's end - the first
  submit); ``fleet.submit_to_start_p50_s`` / ``_p99_s``: a submission to its work
  starting (the ledger's time of its first start).
- ``fleet.doubled``: submissions or due times whose work started more than once, by the
  ledger [must be 0]. With a lease shorter than a cut it can happen: a cut host's run
  ends, its outcome waits for the link, its lease lapses and the retry runs the work
  again (the record then says both ran); the default lease (60 s) outlasts every flap.
  ``fleet.lost``: submissions acknowledged and then missing on the database, or never
  run and not failed [0]; ``fleet.stuck``: runs not ended 120 s after the last submit [0].
- ``fleet.failed``, ``fleet.retried``: runs that ended failed (their reasons on stderr)
  and the retries made.
- ``fleet.after_failover_gap_s``: the longest time without any work starting, from the
  kill of the primary on; ``fleet.promotion_to_first_start_s``: from the promotion to
  the first work started after it.
- ``fleet.schedule_fires``, ``fleet.schedule_doubled``: the 1 s schedule's runs and its
  due times run twice [0].
- ``fleet.worker_cpu_ms_per_run`` / ``fleet.postgres_cpu_ms_per_run``: CPU of the
  workers (with their children) and of both servers, per finished run.
- ``fleet.workers_hung``: workers not ended 30 s after SIGTERM [0].
- ``fleet.pg_connections_max``: the most connections lirun held at once (the servers
  allow 400 here; PostgreSQL's default is 100).

Figures: docs/queue.md, "Figures".
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))

from benchkit import out  # noqa: E402
from support.pgcluster import PgCluster, new_cluster  # noqa: E402
from support.pgreplica import ReplicaPair  # noqa: E402
from support.simhosts import SimHost, namespaces_unavailable, reachable_from  # noqa: E402

LI = str(Path(sys.executable).parent / "li")
SCHEMA = "fleet"
MAX_CONNECTIONS = 400
WORK = 'echo "$LIRUN_PARENT_RUN_ID $(date +%s.%N)" >> {ledger}'


@dataclass
class Chaos:
    """What the chaos thread did, in wall time."""

    flaps: list[tuple[str, float, float]] = field(default_factory=list)
    killed_at: float | None = None
    promoted_at: float | None = None
    server_cpu_lost: float = 0.0  # the killed primary's CPU, read just before the kill


def server_cpu(cluster: PgCluster) -> float:
    """CPU seconds of a server: the postmaster's reaped children and the live processes."""
    import psutil

    total = 0.0
    for index, pid in enumerate(cluster.server_pids()):
        with contextlib.suppress(psutil.Error):
            times = psutil.Process(pid).cpu_times()
            total += times.user + times.system
            if index == 0:
                total += times.children_user + times.children_system
    return total


def tree_cpu(proc: subprocess.Popen[bytes]) -> float:
    """CPU seconds of the program under ``unshare`` and the children it reaped."""
    import psutil

    total = 0.0
    with contextlib.suppress(psutil.Error):
        for kid in psutil.Process(proc.pid).children(recursive=True):
            if kid.name() in {"ip", "unshare", "sh"}:
                continue
            times = kid.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
    return total


def host_url(pair: ReplicaPair, host: SimHost) -> str:
    """The URL naming both servers as ``host`` reaches them."""
    ports = ",".join(f"{host.server_address}:{node.port}" for node in pair.nodes)
    return f"postgresql://postgres@{ports}/postgres?schema={SCHEMA}"


def make_pair(hosts: list[SimHost]) -> ReplicaPair:
    primary, why = new_cluster()
    standby, why_not = new_cluster() if primary is not None else (None, why)
    if primary is None or standby is None:
        raise SystemExit(f"bench_fleet: no throwaway cluster: {why or why_not}")
    for node in (primary, standby):
        reachable_from(node, hosts)
    # Synchronous replication: a commit is acknowledged once the standby has it, so a
    # failover loses no acknowledged outcome (only the primary's start options: the
    # promoted standby has no standby of its own to wait for).
    primary.settings["synchronous_standby_names"] = "walreceiver"
    for node in (primary, standby):  # a worker at concurrency 4 holds up to ~20
        node.settings["max_connections"] = str(MAX_CONNECTIONS)
    pair = ReplicaPair(primary, standby)
    try:
        pair.start()
    except BaseException:
        pair.destroy()
        raise
    return pair


class Submitter:
    """Submits ``runs`` runs at ``rate`` per second from ``THREADS`` clients (one client
    takes about 10 ms a submit); a submit the database could not take is tried again with
    the same key (queued once)."""

    THREADS = 4

    def __init__(self, url: str, runs: int, rate: float, action: list[str], cwd: Path) -> None:
        self.url, self.runs, self.rate, self.action, self.cwd = url, runs, rate, action, cwd
        self.ids: dict[str, str] = {}  # key -> run id
        self.retried_submits = 0
        self.first_at = self.last_at = 0.0
        self.threads = [
            threading.Thread(target=self._run, args=(k,), daemon=True) for k in range(self.THREADS)
        ]

    def run(self) -> None:
        self.first_at = time.time()
        for thread in self.threads:
            thread.start()
        for thread in self.threads:
            thread.join()
        self.last_at = time.time()

    def _run(self, k: int) -> None:
        from lirun import Client
        from lirun.errors import LirunError

        client = Client(self.url)
        try:
            for n in range(k, self.runs, self.THREADS):
                time.sleep(max(0.0, self.first_at + n / self.rate - time.time()))
                key = f"fleet-{n}"
                while True:
                    try:
                        queued = client.submit(
                            self.action, key=key, cwd=self.cwd, retries=1, start_deadline="10m"
                        )
                    except LirunError:
                        self.retried_submits += 1
                        client.close()
                        time.sleep(0.2)
                        continue
                    self.ids[key] = queued.run_id
                    break
        finally:
            client.close()


def chaos(
    hosts: list[SimHost],
    pair: ReplicaPair,
    rng: random.Random,
    until: threading.Event,
    kill_after: float | None,
    flaps: bool,
    did: Chaos,
) -> None:
    """Flap one host's link at a time; kill the primary once, ``kill_after`` s in."""
    begun = time.monotonic()

    def fail_over() -> None:
        did.server_cpu_lost = server_cpu(pair.primary)
        did.killed_at = time.time()
        pair.primary.crash()
        time.sleep(rng.uniform(0.0, 5.0))
        assert pair.standby is not None
        pair.standby.promote()
        did.promoted_at = time.time()
        pair.primary, pair.standby = pair.standby, None

    while not until.is_set():
        due = kill_after is not None and did.killed_at is None
        if due and time.monotonic() - begun >= kill_after:  # type: ignore[operator]
            fail_over()
            continue
        if not flaps:
            until.wait(0.2)
            continue
        host = rng.choice(hosts)
        seconds = rng.uniform(1.0, 20.0)
        if kill_after is not None and did.killed_at is None:
            seconds = min(seconds, max(0.5, kill_after - (time.monotonic() - begun)))
        cut_at = time.time()
        host.cut()
        until.wait(seconds)
        host.restore()
        did.flaps.append((host.name, cut_at, time.time()))
        until.wait(rng.uniform(1.0, 4.0))


def count_connections(pair: ReplicaPair, until: threading.Event, most: list[int]) -> None:
    """Keep in ``most[0]`` the most lirun connections seen at once on the primary."""
    import psycopg

    while not until.wait(1.0):
        with (
            contextlib.suppress(psycopg.Error),
            psycopg.connect(
                pair.url(), autocommit=True, connect_timeout=2, target_session_attrs="read-write"
            ) as conn,
        ):
            sql = "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'lirun%'"
            row = conn.execute(sql).fetchone()
            most[0] = max(most[0], int(row[0]) if row else 0)


def read_records(pair: ReplicaPair) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Every schedule run (as dicts) and ``session id -> schedule run id``, read from
    whichever server is the primary now."""
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(
        pair.url(), autocommit=True, row_factory=dict_row, connect_timeout=5,
        target_session_attrs="read-write",
    ) as conn:  # fmt: skip
        conn.execute(f'SET search_path TO "{SCHEMA}"')
        rows = conn.execute(
            "SELECT id, schedule_id, status, status_reason_code, status_reason_summary, attempt,"
            " retry_of, worker_id,"
            " session_id, idempotency_key, due_at, created_at, started_at, ended_at"
            " FROM schedule_runs"
        ).fetchall()
    return rows, {str(r["session_id"]): str(r["id"]) for r in rows if r["session_id"]}


def root_of(run_id: str, by_id: dict[str, dict[str, Any]]) -> str:
    while by_id.get(run_id, {}).get("retry_of"):
        run_id = str(by_id[run_id]["retry_of"])
    return run_id


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2, help="per host")
    parser.add_argument("--concurrency", type=int, default=4, help="per worker")
    parser.add_argument("--rate", type=float, default=60.0, help="submits per second")
    parser.add_argument("--lease", default="60s", help="li worker --lease (its default)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--no-failover", action="store_true")
    parser.add_argument("--no-flaps", action="store_true")
    args = parser.parse_args()
    why = namespaces_unavailable()
    if why:
        print(f"bench_fleet: {why}", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.randrange(10**6)
    rng = random.Random(seed)
    print(f"bench_fleet: seed {seed}", file=sys.stderr)
    hosts = [SimHost(f"host{i}", 40 + i) for i in range(1, args.hosts + 1)]
    work = Path(tempfile.mkdtemp(prefix="lirun-fleet-"))
    pair = None
    try:
        for host in hosts:
            host.create()
        pair = make_pair(hosts)
        hung = bench(args, rng, hosts, pair, work)
        if not hung:
            shutil.rmtree(work, ignore_errors=True)
        return 1 if hung else 0
    finally:
        for host in hosts:
            host.destroy()
        if pair is not None:
            pair.destroy()


def bench(
    args: argparse.Namespace, rng: random.Random, hosts: list[SimHost], pair: ReplicaPair,
    work: Path,
) -> int:  # fmt: skip
    from lirun.store import open_store

    ledger = work / "ledger.txt"
    action = ["run", "sh", "-c", WORK.format(ledger=ledger)]
    url = pair.url(schema=SCHEMA)
    open_store(url).close()  # the schema, before any worker starts
    cpu_before = sum(server_cpu(node) for node in pair.nodes)
    subprocess.run(
        [LI, "schedule", "add", "tick", "--every", "1s", "--db", url, "--", *action],
        check=True, capture_output=True, cwd=work,
    )  # fmt: skip
    workers: list[tuple[SimHost, subprocess.Popen[bytes]]] = []
    logs: list[Path] = []
    for host in hosts:
        home = work / host.name
        home.mkdir()
        env = {"PATH": "/usr/bin:/bin", "LIRUN_HOME": str(home), "HOME": str(home),
               "PYTHONFAULTHANDLER": "1"}  # fmt: skip
        for n in range(args.workers):
            argv = [LI, "worker", "--concurrency", str(args.concurrency), "--lease", args.lease,
                    "--grace", "10s", "--db", host_url(pair, host)]  # fmt: skip
            logs.append(work / f"{host.name}-{n}.log")
            workers.append((host, host.start(argv, log=logs[-1], env=env, cwd=work)))
    submitter = Submitter(url, args.runs, args.rate, action, work)
    span = args.runs / args.rate
    stop_chaos = threading.Event()
    did = Chaos()
    kill_after = None if args.no_failover else rng.uniform(0.2 * span, 0.6 * span)
    chaos_thread = threading.Thread(
        target=chaos,
        args=(hosts, pair, rng, stop_chaos, kill_after, not args.no_flaps, did),
        daemon=True,
    )
    print(f"bench_fleet: {len(workers)} workers on {len(hosts)} hosts; submitting", file=sys.stderr)
    connections = [0]
    counter = threading.Thread(
        target=count_connections, args=(pair, stop_chaos, connections), daemon=True
    )
    chaos_thread.start()
    counter.start()
    submitter.run()
    settle_until = time.monotonic() + 120
    rows: list[dict[str, Any]] = []
    while True:
        try:
            rows, _ = read_records(pair)
        except Exception as exc:  # no primary yet: read again
            print(f"bench_fleet: reading: {exc}", file=sys.stderr)
        submitted = [r for r in rows if r["schedule_id"] is None]
        open_ = [r for r in submitted if r["status"] in ("queued", "running")]
        ended = len(submitted) >= len(submitter.ids) and not open_
        if ended or time.monotonic() > settle_until:
            break
        time.sleep(0.5)
    stop_chaos.set()
    chaos_thread.join(30)
    cpu_workers = sum(tree_cpu(proc) for _, proc in workers)
    cpu_servers = sum(server_cpu(node) for node in pair.nodes if node.is_up())
    hung = 0
    for host, proc in workers:
        host.signal(proc, signal.SIGTERM)
    for n, (host, proc) in enumerate(workers):
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            hung += 1
            host.signal(proc, signal.SIGABRT)  # its fault handler prints every thread
            time.sleep(2)
            host.stop(proc, timeout=1)
            print(f"bench_fleet: worker {n} hung after SIGTERM; its threads: {logs[n]}",
                  file=sys.stderr)  # fmt: skip
    rows, by_session = read_records(pair)
    out("fleet.pg_connections_max", connections[0])
    report(args, rows, by_session, ledger, submitter, did, hung,
           cpu_workers, cpu_servers + did.server_cpu_lost - cpu_before)  # fmt: skip
    return hung


def report(
    args: argparse.Namespace, rows: list[dict[str, Any]], by_session: dict[str, str],
    ledger: Path, submitter: Submitter, did: Chaos, hung: int, cpu_workers: float,
    cpu_servers: float,
) -> None:  # fmt: skip
    by_id = {str(r["id"]): r for r in rows}
    starts: dict[str, list[float]] = {}  # root schedule run -> its work's starts
    unknown = 0
    all_starts: list[float] = []
    for line in ledger.read_text().splitlines() if ledger.exists() else []:
        session, at = line.split()
        all_starts.append(float(at))
        run_id = by_session.get(session)
        if run_id is None:
            unknown += 1  # work whose session no schedule run names: counted as lost
            continue
        starts.setdefault(root_of(run_id, by_id), []).append(float(at))
    submitted_ids = set(submitter.ids.values())
    missing = [i for i in submitted_ids if i not in by_id]
    roots = [by_id[i] for i in submitted_ids if i in by_id]
    chains = {i: [r for r in rows if root_of(str(r["id"]), by_id) == i] for i in submitted_ids}
    last = {i: max(chain, key=lambda r: r["attempt"]) for i, chain in chains.items() if chain}
    # Done twice: the work started more than once, whatever the record says. A lease
    # shorter than a cut makes it happen: the cut host's run ends, its outcome waits for
    # the link, the lease lapses, the retry runs the work again (the record then says
    # both ran: the late outcome corrects the inferred failure).
    doubled = [i for i in submitted_ids if len(starts.get(i, [])) > 1]
    for i in doubled:
        print(f"bench_fleet: done twice: {i}, started at {starts[i]}", file=sys.stderr)
        for r in sorted(chains[i], key=lambda r: r["attempt"]):
            print(f"  {r}", file=sys.stderr)
    stuck = sum(1 for r in last.values() if r["status"] in ("queued", "running"))
    never_ran = [i for i, r in last.items() if not starts.get(i) and r["status"] not in ("failed",)]
    lost = len(missing) + len(never_ran) + unknown
    ends = [float(r["ended_at"]) for r in last.values() if r["ended_at"]]
    finished = sum(1 for r in last.values() if r["status"] == "completed")
    waits = [
        min(starts[str(r["id"])]) - float(r["created_at"])
        for r in roots
        if starts.get(str(r["id"]))
    ]
    retried = sum(1 for r in rows if r["retry_of"] and r["schedule_id"] is None)
    failed = sum(1 for r in last.values() if r["status"] == "failed")
    why = collections.Counter(
        str(r["status_reason_code"]) for r in last.values() if r["status"] != "completed"
    )
    for reason, count in why.most_common():
        print(f"bench_fleet: {count} not completed: {reason}", file=sys.stderr)
        said = {
            str(r["status_reason_summary"])
            for r in last.values()
            if str(r["status_reason_code"]) == reason
        }
        for summary in sorted(said)[:3]:
            print(f"  {summary[:300]}", file=sys.stderr)
    ticks = [r for r in rows if r["schedule_id"] is not None]
    tick_roots = {root_of(str(r["id"]), by_id) for r in ticks}
    out("fleet.hosts", args.hosts)
    out("fleet.workers", args.hosts * args.workers)
    out("fleet.submitted", len(submitted_ids))
    out("fleet.finished", finished)
    span = (max(ends) - submitter.first_at) if ends else float("nan")
    out("fleet.runs_per_s", finished / span if span else float("nan"))
    out(
        "fleet.submit_rate_per_s",
        len(submitted_ids) / max(1e-9, submitter.last_at - submitter.first_at),
    )
    out("fleet.submit_to_start_p50_s", percentile(waits, 0.5))
    out("fleet.submit_to_start_p99_s", percentile(waits, 0.99))
    out("fleet.doubled", len(doubled))
    out("fleet.lost", lost)
    out("fleet.stuck", stuck)
    out("fleet.failed", failed)
    out("fleet.retried", retried)
    out("fleet.submits_tried_again", submitter.retried_submits)
    out("fleet.flaps", len(did.flaps))
    out("fleet.flap_seconds", sum(end - begin for _, begin, end in did.flaps))
    if did.killed_at is not None and did.promoted_at is not None:
        later = sorted(s for s in all_starts if s >= did.killed_at)
        gaps = [b - a for a, b in itertools.pairwise([did.killed_at, *later])]
        out("fleet.promote_after_s", did.promoted_at - did.killed_at)
        out("fleet.after_failover_gap_s", max(gaps) if gaps else float("nan"))
        first = next((s for s in later if s >= did.promoted_at), None)
        out("fleet.promotion_to_first_start_s", first - did.promoted_at if first else float("nan"))
    out("fleet.schedule_fires", len(tick_roots))
    out("fleet.schedule_doubled", sum(1 for i in tick_roots if len(starts.get(i, [])) > 1))
    out("fleet.worker_cpu_ms_per_run", 1000 * cpu_workers / max(1, len(all_starts)))
    out("fleet.postgres_cpu_ms_per_run", 1000 * cpu_servers / max(1, len(all_starts)))
    out("fleet.workers_hung", hung)


if __name__ == "__main__":
    sys.exit(main())

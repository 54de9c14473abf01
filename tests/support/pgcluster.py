"""A throwaway PostgreSQL cluster the tests start, stop and restart themselves.

Never the machine's own server: the cluster lives in a fresh directory under /tmp (which
the ``postgres`` user can traverse, unlike root's home or a 0700 temp dir), listens on a
port of 127.0.0.1 it keeps across restarts (``kept_port``), and is removed at the end of the
session. ``initdb`` refuses to run as root, so every server binary runs as ``postgres``
through ``setpriv``.

``pg_cluster`` is a session-scoped fixture (loaded as a plugin by ``conftest.py``): one
cluster per session, started on first use; a test restarts it as it needs and the fixture
makes sure it is up again. ``pg_password_cluster`` is a second one that requires a
password (scram-sha-256 for every connection, TCP and socket): its ``url`` carries
``PASSWORD``, which holds the characters a URL and a libpq passfile must escape. Where a
cluster cannot be made the test skips, unless ``LIRUN_TEST_REQUIRE_PG=1``, where that
fails instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from urllib.parse import quote

import pytest

REQUIRE_PG = os.environ.get("LIRUN_TEST_REQUIRE_PG") == "1"
AS_POSTGRES = ["setpriv", "--reuid=postgres", "--regid=postgres", "--clear-groups"]
MACHINE_PORT = 5432
# The superuser's password on ``pg_password_cluster``: ``:`` and ``\\`` are what a passfile
# escapes, ``@``, ``/`` and the space what a URL does.
PASSWORD = "s3cr:et\\pw/@x y"


def server_bin_dir() -> Path | None:
    """``$LIRUN_TEST_PG_BIN``, else the newest /usr/lib/postgresql/*/bin with initdb."""
    given = os.environ.get("LIRUN_TEST_PG_BIN")
    if given:
        return Path(given)
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4])
    )
    return Path(found[-1]).parent if found else None


def free_port() -> int:
    """A port nobody listens on now (from the kernel's ephemeral range: not one to keep)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port != MACHINE_PORT:
            return port


# Ports a server keeps across restarts: below the kernel's ephemeral range, so no client's
# outgoing connection is given one as its source port while the server is down (a port from
# ``bind(0)`` is such a port, and a restart on it failed "Address already in use"), and each
# held by a lock file for the life of the test process, so a second pytest process (the fault
# suite runs beside the rest) never picks a port whose server is only down for a restart.
KEPT_PORTS = range(20000, 30000)
_PORT_LOCK_DIR = Path("/tmp/lirun-test-ports")
_held_ports: dict[int, int] = {}  # port -> the descriptor of its lock file


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def kept_port(among: Iterable[int] = KEPT_PORTS) -> int:
    """A free port below the ephemeral range, held by this process until it exits."""
    _PORT_LOCK_DIR.mkdir(mode=0o1777, exist_ok=True)
    low = _ephemeral_low()
    candidates = [p for p in among if p < low and p not in _held_ports]
    random.shuffle(candidates)
    for port in candidates:
        fd = os.open(_PORT_LOCK_DIR / f"{port}.lock", os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                os.close(fd)  # someone outside the tests listens there
                continue
        _held_ports[port] = fd
        return port
    raise RuntimeError("no free port to keep")


class PgCluster:
    """One throwaway cluster: ``start``, ``stop``, ``restart``, ``url`` and ``new_url``."""

    def __init__(
        self, bin_dir: Path, base: Path, port: int, *, password: str | None = None
    ) -> None:
        self.bin_dir = bin_dir
        self.password = password
        self.base = base
        self.data = base / "data"
        self.log = base / "server.log"
        self.port = port
        self.schemas: list[str] = []
        # Addresses the server listens on (a test may add others, e.g. a veth's host side).
        self.listen_addresses = "127.0.0.1"
        # More ``-c name=value`` settings for every start (``pgreplica``: replication).
        self.settings: dict[str, str] = {}
        # Lines appended to pg_hba.conf by ``init`` (a standby made from it copies them).
        self.hba: list[str] = []

    @property
    def url(self) -> str:
        secret = f":{quote(self.password, safe='')}" if self.password is not None else ""
        return f"postgresql://postgres{secret}@127.0.0.1:{self.port}/postgres"

    def new_url(self) -> str:
        """A URL with a schema of its own (lirun creates it on first use)."""
        schema = f"t_{uuid.uuid4().hex[:16]}"
        self.schemas.append(schema)
        return f"{self.url}?schema={schema}"

    def _as_postgres(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*AS_POSTGRES, *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.base,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"},
        )

    def init(self) -> None:
        self.base.chmod(0o755)
        shutil.chown(self.base, "postgres", "postgres")
        auth = ["-A", "trust"]
        if self.password is not None:
            pwfile = self.base / "pwfile"
            pwfile.write_text(self.password + "\n")
            pwfile.chmod(0o600)
            shutil.chown(pwfile, "postgres", "postgres")
            auth = ["--auth=scram-sha-256", f"--pwfile={pwfile}"]
        done = self._as_postgres(
            str(self.bin_dir / "initdb"),
            "-D", str(self.data),
            "-U", "postgres",
            *auth,
            "-E", "UTF8",
            "--no-sync",
        )  # fmt: skip
        if self.password is not None:
            (self.base / "pwfile").unlink()
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr.strip() or done.stdout.strip()}")
        if self.hba:
            with (self.data / "pg_hba.conf").open("a", encoding="utf-8") as hba:
                hba.writelines(f"{line}\n" for line in self.hba)

    def start(self) -> None:
        # fsync off only risks an OS crash, which no test makes; synchronous_commit stays
        # on, because `pg_ctl stop -m immediate` must not lose a commit already acknowledged.
        options = (
            f"-p {self.port} -c listen_addresses={self.listen_addresses} -k {self.base} "
            "-c fsync=off -c full_page_writes=off -c max_connections=100"
        )
        options += "".join(f" -c {name}={value}" for name, value in self.settings.items())
        done = self._as_postgres(
            str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log),
            "-o", options, "-w", "-t", "60", "start",
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {done.stderr.strip()}\n{self.log_tail()}")

    def stop(self, mode: str = "fast") -> None:
        """``fast`` closes the sessions cleanly; ``immediate`` is a crash (recovery on start)."""
        done = self._as_postgres(
            str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "60",
            "stop",
        )  # fmt: skip
        if done.returncode != 0 and self.is_up():
            raise RuntimeError(f"pg_ctl stop failed: {done.stderr.strip()}")

    def configure(self, settings: dict[str, str]) -> None:
        """Settings for every start from now on, written to ``postgresql.conf`` too, so a
        server started without lirun's options (``pg_rewind``'s single-user recovery,
        a standby made from this one) has them as well."""
        self.settings.update(settings)
        with (self.data / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.writelines(f"{name} = '{value}'\n" for name, value in settings.items())

    def crash(self) -> None:
        """SIGKILL the postmaster and every server process (a host gone, not a shutdown).

        Its children are not in its process group, so they are found by parent."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return
        doomed = [pid, *_children(pid)]
        for victim in doomed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while any(_alive(v) for v in doomed) and time.monotonic() < deadline:
            time.sleep(0.02)
        # The postmaster's parent (init here) may leave it a zombie for a while, and a
        # zombie's pid passes the lock file's liveness check: the next start (or
        # pg_rewind's recovery) would refuse. Every server process is dead: as on a host
        # that rebooted, the lock files name nobody.
        for lock in (self.data / "postmaster.pid", self.base / f".s.PGSQL.{self.port}.lock"):
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()

    def basebackup_from(self, source: PgCluster) -> None:
        """Make this (not yet initialised) cluster a streaming standby of ``source``
        (``-R``: ``standby.signal`` and ``primary_conninfo`` written for it)."""
        self.base.chmod(0o755)
        shutil.chown(self.base, "postgres", "postgres")
        done = self._as_postgres(
            str(self.bin_dir / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(source.port),
            "-U", "postgres", "-D", str(self.data), "-R", "-X", "stream", "-c", "fast",
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"pg_basebackup failed: {done.stderr.strip()}")

    def promote(self) -> None:
        """End recovery: this standby becomes a primary (``pg_ctl -w promote``)."""
        done = self._as_postgres(
            str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60", "promote"
        )
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl promote failed: {done.stderr.strip()}")

    def rewind_from(self, source: PgCluster) -> None:
        """Turn this stopped former primary into a standby of ``source`` (``pg_rewind -R``:
        the WAL it wrote after the timelines parted is undone)."""
        done = self._as_postgres(
            str(self.bin_dir / "pg_rewind"), "-D", str(self.data), "-R",
            f"--source-server=host=127.0.0.1 port={source.port} user=postgres dbname=postgres",
            timeout=120,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"pg_rewind failed: {done.stderr.strip() or done.stdout}")

    def query(self, sql: str) -> list[tuple[object, ...]]:
        """``sql``'s rows on this server (autocommit, a connection of its own)."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
            cursor = conn.execute(sql.encode())
            return list(cursor.fetchall()) if cursor.description else []

    def restart(self, down_for: float = 0.0, mode: str = "fast") -> None:
        self.stop(mode)
        time.sleep(down_for)
        self.start()

    def is_up(self) -> bool:
        done = self._as_postgres(
            str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "status", timeout=30
        )
        return done.returncode == 0

    def ensure_up(self) -> None:
        if not self.is_up():
            self.start()

    def server_pids(self) -> list[int]:
        """The postmaster and every process it started (they are not in its process
        group, so a signal to the group would miss them)."""
        try:
            first = (self.data / "postmaster.pid").read_text().split("\n", 1)[0]
        except OSError:
            return []
        postmaster = int(first)
        children = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[1]) == postmaster:
                children.append(int(entry.name))
        return [postmaster, *children]

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """Every process of the server stopped (SIGSTOP): its kernel still answers TCP, so
        only a client-side limit ends a wait for it. Thawed (SIGCONT) on the way out."""
        pids = self.server_pids()
        assert pids, "the server is not running"
        try:
            for pid in pids:
                # A backend that ended since it was listed (a client's just closed) needs
                # no freezing; the postmaster, stopped too, forks no new one.
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
            yield
        finally:
            for pid in pids:
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def destroy(self) -> None:
        if self.data.exists():
            self._as_postgres(
                str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w",
                "stop",
            )  # fmt: skip
        shutil.rmtree(self.base, ignore_errors=True)


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from ``/proc``)."""
    found = []
    for entry in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(entry).read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if fields and int(fields[1]) == pid:
            found.append(int(entry.split("/")[2]))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def unavailable(reason: str) -> None:
    """Skip the test (fail it under ``LIRUN_TEST_REQUIRE_PG=1``): no cluster here."""
    if REQUIRE_PG:
        pytest.fail(f"PostgreSQL is required (LIRUN_TEST_REQUIRE_PG=1) but: {reason}")
    pytest.skip(f"no throwaway PostgreSQL cluster: {reason}")


def new_cluster(password: str | None = None) -> tuple[PgCluster | None, str | None]:
    """A cluster not yet initialised, in a fresh ``/tmp/lirun-pgcluster-*`` directory on a
    kept port, or None and why none can be made here."""
    bin_dir = server_bin_dir()
    if bin_dir is None or not (bin_dir / "initdb").exists():
        return None, "no initdb found (set LIRUN_TEST_PG_BIN)"
    if shutil.which("setpriv") is None:
        return None, "setpriv (util-linux) is needed to run initdb as postgres"
    base = Path(tempfile.mkdtemp(prefix="lirun-pgcluster-", dir="/tmp"))
    return PgCluster(bin_dir, base, kept_port(), password=password), None


def _made(password: str | None) -> tuple[PgCluster | None, str | None]:
    """A started cluster, or None and why it cannot be made."""
    cluster, why = new_cluster(password)
    if cluster is None:
        return None, why
    try:
        cluster.init()
        cluster.start()
    except (OSError, RuntimeError, subprocess.SubprocessError, LookupError) as exc:
        cluster.destroy()
        return None, f"{type(exc).__name__}: {exc}"
    return cluster, None


_cluster: PgCluster | None = None
_cluster_error: str | None = None


@pytest.fixture(scope="session")
def pg_cluster_session() -> Iterator[PgCluster | None]:
    """The session's cluster, made on first use (None, with the reason kept, if it cannot)."""
    global _cluster, _cluster_error
    _cluster, _cluster_error = _made(None)
    try:
        yield _cluster
    finally:
        if _cluster is not None:
            _cluster.destroy()
            _cluster = None


@pytest.fixture
def pg_cluster(pg_cluster_session: PgCluster | None) -> PgCluster:
    """The throwaway cluster, up when the test starts (a test may stop and start it)."""
    if pg_cluster_session is None:
        unavailable(_cluster_error or "unknown error")
    assert pg_cluster_session is not None
    pg_cluster_session.ensure_up()
    return pg_cluster_session


@pytest.fixture(scope="session")
def pg_password_session() -> Iterator[tuple[PgCluster | None, str | None]]:
    made = _made(PASSWORD)
    try:
        yield made
    finally:
        if made[0] is not None:
            made[0].destroy()


@pytest.fixture
def pg_password_cluster(pg_password_session: tuple[PgCluster | None, str | None]) -> PgCluster:
    """A throwaway cluster that requires the password ``PASSWORD`` (its ``url`` has it)."""
    cluster, error = pg_password_session
    if cluster is None:
        unavailable(error or "unknown error")
    assert cluster is not None
    cluster.ensure_up()
    return cluster

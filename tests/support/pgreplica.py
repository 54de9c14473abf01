"""Two throwaway PostgreSQL clusters with streaming replication: a primary and a
standby, for tests of a database that fails over.

Both are ``pgcluster.PgCluster`` clusters (``/tmp/lirun-pgcluster-*``, kept ports, every
server binary run as ``postgres``), started with the settings replication and
``pg_rewind`` need. ``ReplicaPair`` knows which is the primary now: ``failover()`` kills
it (SIGKILL of every server process, as a lost host) and promotes the standby;
``rejoin()`` rewinds the old primary and starts it as the new primary's standby, so a
test can fail over again, back the other way. Set up in about 3 s.

``make_pair()`` is a context manager (the pair is destroyed with ``pg_ctl -m immediate
stop`` at its end); ``pg_pair`` is a fixture that yields one per test.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from support.pgcluster import PgCluster, new_cluster, unavailable

REPLICATION_SETTINGS = {
    "wal_level": "replica",
    "max_wal_senders": "5",
    "wal_keep_size": "128MB",
    "hot_standby": "on",
    "wal_log_hints": "on",  # pg_rewind needs it (or data checksums)
    "full_page_writes": "on",  # and this, on the server it rewinds from
}


class ReplicaPair:
    """A primary and its streaming standby; the roles swap on ``failover``."""

    def __init__(self, primary: PgCluster, standby: PgCluster) -> None:
        self.primary = primary
        self.standby: PgCluster | None = standby
        self.nodes = (primary, standby)
        self._down: PgCluster | None = None  # the primary a failover killed

    def start(self) -> None:
        """initdb and start the primary, base-backup and start the standby, and wait
        until it streams."""
        assert self.standby is not None
        self.primary.init()
        self.primary.configure(REPLICATION_SETTINGS)  # the standby's copy has them too
        self.standby.settings.update(REPLICATION_SETTINGS)
        self.primary.start()
        self.standby.basebackup_from(self.primary)
        self.standby.start()
        self.wait_streaming()

    def url(self, *, standby_first: bool = False, schema: str | None = None) -> str:
        """A URL naming both servers, the primary first (or last), no session attrs."""
        other = self.nodes[1] if self.nodes[0] is self.primary else self.nodes[0]
        first, second = (other, self.primary) if standby_first else (self.primary, other)
        hosts = f"127.0.0.1:{first.port},127.0.0.1:{second.port}"
        return f"postgresql://postgres@{hosts}/postgres" + (f"?schema={schema}" if schema else "")

    def wait_streaming(self, timeout: float = 30) -> None:
        """Until the standby receives the primary's WAL (both sides say so)."""
        assert self.standby is not None
        deadline = time.monotonic() + timeout
        while True:
            sending = self.primary.query(
                "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'"
            )
            receiving = self.standby.query("SELECT status FROM pg_stat_wal_receiver")
            if sending[0][0] and receiving and receiving[0][0] == "streaming":
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the standby does not stream after {timeout}s: {sending} {receiving}\n"
                    f"{self.standby.log_tail()}"
                )
            time.sleep(0.05)

    def wait_replayed(self, timeout: float = 30) -> None:
        """Until the standby has replayed everything the primary wrote so far (before a
        kill that must lose no acknowledged commit)."""
        deadline = time.monotonic() + timeout
        target = self.primary.query("SELECT pg_current_wal_lsn()")[0][0]
        while time.monotonic() < deadline:
            rows = self.primary.query(
                f"SELECT count(*) FROM pg_stat_replication WHERE replay_lsn >= '{target}'"
            )
            if rows[0][0]:
                return
            time.sleep(0.02)
        raise RuntimeError(f"the standby did not replay up to {target} in {timeout}s")

    def is_in_recovery(self, node: PgCluster) -> bool:
        return bool(node.query("SELECT pg_is_in_recovery()")[0][0])

    def failover(self, promote_after: float = 0.0) -> PgCluster:
        """Kill the primary, wait ``promote_after`` seconds, promote the standby; the new
        primary (the old one is down until ``rejoin``)."""
        assert self.standby is not None, "no standby to promote: rejoin first"
        old = self.primary
        old.crash()
        time.sleep(promote_after)
        self.standby.promote()
        self.primary, self.standby = self.standby, None
        self._down = old
        return self.primary

    def rejoin(self) -> PgCluster:
        """Rewind the old primary onto the new one's timeline and start it as its
        standby; the standby, streaming."""
        old = self._down
        assert old is not None, "no failover to rejoin from"
        # pg_rewind reads the source's timeline from its control file, which shows the
        # promotion only after a checkpoint ("same timeline; no rewind required").
        self.primary.query("CHECKPOINT")
        old.rewind_from(self.primary)
        old.start()
        self.standby, self._down = old, None
        self.wait_streaming()
        return old

    def destroy(self) -> None:
        for node in self.nodes:
            node.destroy()  # pg_ctl -m immediate stop, then its directory removed


@contextmanager
def make_pair() -> Iterator[ReplicaPair]:
    """A started pair, destroyed at the end; the test is skipped (failed under
    ``LIRUN_TEST_REQUIRE_PG=1``) where none can be made."""
    primary, why = new_cluster()
    standby, why_not = new_cluster() if primary is not None else (None, why)
    if primary is None or standby is None:
        if primary is not None:
            primary.destroy()
        unavailable(why_not or why or "unknown error")
    assert primary is not None
    assert standby is not None
    pair = ReplicaPair(primary, standby)
    try:
        try:
            pair.start()
        except (OSError, RuntimeError) as exc:
            unavailable(f"{type(exc).__name__}: {exc}")
        yield pair
    finally:
        pair.destroy()


@pytest.fixture
def pg_pair() -> Iterator[ReplicaPair]:
    """A primary and its streaming standby of this test's own (see ``make_pair``)."""
    with make_pair() as pair:
        yield pair

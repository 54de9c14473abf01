"""StorePool: open stores lent to one thread at a time (a worker's run threads, li ui's
webhook intake), on both backends; a kept store outlives its connections being dropped.
A closed store's use is a DatabaseError."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import pytest

from lirun.errors import DatabaseError, DatabaseUnavailableError
from lirun.store.pool import StorePool
from support.pg import make_pg_url


def test_a_store_is_lent_again_and_never_to_two_threads_at_once(db_url: str) -> None:
    pool = StorePool(db_url, keep=4)
    try:
        with pool.store() as first:
            first.sessions.create(id="s-1")
            with pool.store() as second:  # lent out at once: another store
                assert second is not first
                assert second.get_entity("session", "s-1") is not None
        with pool.store() as again:
            assert again is first  # the most recently returned comes back first
        assert pool.lent == 0
    finally:
        pool.close()


def test_a_store_whose_block_raised_is_closed_not_kept(db_url: str) -> None:
    pool = StorePool(db_url, keep=4)
    try:
        with pytest.raises(RuntimeError), pool.store() as broken:
            raise RuntimeError("mid-work")
        with pytest.raises(DatabaseError):
            broken.get_entity("session", "s-1")  # closed
        with pool.store() as fresh:
            assert fresh is not broken
            assert fresh.get_entity("session", "s-1") is None
    finally:
        pool.close()


def test_only_keep_idle_stores_are_kept_and_trim_closes_the_idle(db_url: str) -> None:
    pool = StorePool(db_url, keep=1, idle_seconds=0.0)
    try:
        with pool.store() as a, pool.store() as b:
            pass
        with pool.store() as kept:
            assert kept is b  # a came back second, past keep=1: closed
        with pytest.raises(DatabaseError):
            a.get_entity("session", "x")
        time.sleep(0.01)
        assert pool.trim() == 1
        with pytest.raises(DatabaseError):
            b.get_entity("session", "x")
    finally:
        pool.close()


def test_close_closes_idle_and_lent_stores_and_lends_no_more(db_url: str) -> None:
    pool = StorePool(db_url, keep=4)
    with pool.store() as lent:
        with pool.store() as idle:
            assert idle is not lent
        pool.close()
        with pytest.raises(DatabaseError):
            idle.get_entity("session", "x")
        assert lent.get_entity("session", "x") is None  # still usable until returned
    with pytest.raises(DatabaseError):
        lent.get_entity("session", "x")
    with pytest.raises(DatabaseUnavailableError), pool.store():
        pass


def test_limit_makes_a_borrower_wait_for_a_store(db_url: str) -> None:
    pool = StorePool(db_url, keep=2, limit=1)
    got = threading.Event()

    def borrow() -> None:
        with pool.store():
            got.set()

    try:
        with pool.store():
            thread = threading.Thread(target=borrow)
            thread.start()
            assert not got.wait(0.3)  # the one slot is taken
            assert pool.lent == 1
        assert got.wait(10)
        thread.join()
    finally:
        pool.close()


@pytest.fixture
def victim_url() -> Iterator[str]:
    for url in make_pg_url():
        yield f"{url}&application_name=lirun-pool-victim-{os.getpid()}"


@pytest.mark.postgres
def test_a_kept_store_replaces_connections_the_server_dropped(victim_url: str) -> None:
    import psycopg

    from support.pg import PG_URL

    pool = StorePool(victim_url, keep=2)
    try:
        with pool.store() as store:
            store.sessions.create(id="s-1")
            assert store.get_entity("session", "s-1") is not None
        with psycopg.connect(PG_URL, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s",
                [f"lirun-pool-victim-{os.getpid()}"],
            ).fetchall()
        assert len(killed) == 2  # the kept store's write and read connections
        with pool.store() as again:
            assert again is store
            assert again.get_entity("session", "s-1") is not None
            again.sessions.create(id="s-2")
            assert again.get_entity("session", "s-2") is not None
    finally:
        pool.close()

"""Helpers for teardown tests: real git repositories and a second, competing writer."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from lirun.store import Store, open_store
from support.gitkit import GIT_ENV, git, make_repo

__all__ = ["GIT_ENV", "finalize_as", "git", "make_repo", "other_writer"]


@contextmanager
def other_writer(db_url: str) -> Iterator[Store]:
    """A second connection to the same database, as another process would have."""
    store = open_store(db_url)
    try:
        yield store
    finally:
        store.close()


def finalize_as(db_url: str, session_id: str, status: str, reason: str, **kw: Any) -> bool:
    """Another writer's guarded terminal write (as ``li reap`` would do it)."""
    with other_writer(db_url) as store:
        return store.update_status(
            "session",
            session_id,
            new_status=status,
            reason_code=reason,
            source="system",
            expected_statuses={"running"},
            **kw,
        )

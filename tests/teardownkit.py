"""Helpers for teardown tests: real git repositories and a second, competing writer."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lirun.store import Store, open_store

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout.strip()


def make_repo(path: Path) -> Path:
    """A clean repository with one commit on ``main`` (HEAD is the base: nothing ahead)."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "base.txt").write_text("base\n", encoding="utf-8")
    git(path, "add", "base.txt")
    git(path, "commit", "-q", "-m", "base")
    return path


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

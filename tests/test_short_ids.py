"""Short ids (issue 9, item 7): a unique prefix or a run id's random suffix names a record
wherever an id is taken; an ambiguous one lists at most ten candidates and counts the rest.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from lirun.errors import AmbiguousIdError, NotFoundError
from lirun.store import Store
from support.cli import li_command
from support.storekit import row_of
from support.waitkit import complete, parse_line, run_wait

RUN = "20260709T120000-2b5dd3"


def li(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        li_command(*args), env=env, capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _runs(store: Store, count: int, stamp: str = "20260709T1200") -> list[str]:
    ids = [f"{stamp}{i:02d}-{i:06x}" for i in range(count)]
    for ident in ids:
        store.sessions.create(id=ident)
        time.sleep(0.002)  # distinct created_at: candidates are listed newest first
    return ids


def test_store_resolves_exact_prefix_and_suffix(store: Store) -> None:
    store.sessions.create(id=RUN)
    store.sessions.create(id="20260709T120001-aaaaaa")
    assert store.resolve_id("session", RUN) == RUN
    assert store.resolve_id("session", "2b5dd3") == RUN
    assert store.resolve_id("session", "5dd3") == RUN
    assert store.resolve_id("session", "20260709T120000") == RUN
    with pytest.raises(NotFoundError):
        store.resolve_id("session", "2B5DD3")  # ids are case-sensitive
    with pytest.raises(NotFoundError):
        store.resolve_id("session", "%dd3")  # LIKE metacharacters are literal
    with pytest.raises(AmbiguousIdError) as info:
        store.resolve_id("session", "20260709T12000")
    assert info.value.total == 2
    assert info.value.candidates == ("20260709T120001-aaaaaa", RUN)  # newest first
    with pytest.raises(NotFoundError):
        store.resolve_id("invocation", "2b5dd3")  # per entity type


def test_ambiguous_lists_ten_and_counts_the_rest(store: Store) -> None:
    ids = _runs(store, 13)
    found, total = store.match_ids("session", "20260709T")
    assert total == 13
    assert found == ids[::-1][:10]
    with pytest.raises(AmbiguousIdError, match="and 3 more") as info:
        store.resolve_id("session", "20260709T")
    assert len(info.value.candidates) == 10


def test_li_wait_takes_the_suffix_and_lists_ambiguous_candidates(
    store: Store, li_env: dict[str, str]
) -> None:
    store.sessions.create(id=RUN)
    complete(store, RUN)
    code, out, err = run_wait(li_env, "2b5dd3")
    assert code == 0, err
    assert parse_line(out.strip())["id"] == RUN
    _runs(store, 12, stamp="20260710T1200")
    code, out, err = run_wait(li_env, "20260710T")
    assert (code, out) == (2, "")
    assert "ambiguous" in err
    assert "and 2 more" in err
    assert err.count("20260710T") == 1 + 10  # the input, then ten candidates


def test_li_status_takes_the_suffix(store: Store, li_env: dict[str, str]) -> None:
    store.sessions.create(id=RUN)
    store.sessions.create(id="20260709T120001-aaaaaa")
    proc = li(li_env, "status", "2b5dd3", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["id"] == RUN
    _runs(store, 11, stamp="20260711T1200")
    proc = li(li_env, "status", "20260711T")
    assert proc.returncode == 2
    assert "and 1 more" in proc.stderr


def test_li_override_takes_a_unique_suffix_and_refuses_an_ambiguous_one(
    store: Store, li_env: dict[str, str]
) -> None:
    store.sessions.create(id=RUN)
    store.sessions.create(id="20260709T120001-aaaaaa")
    complete(store, RUN, status="failed")
    repair = ["--to", "completed", "--reason", "run.completed.admin", "--actor", "a"]
    repair += ["--justification", "checked"]
    proc = li(li_env, "override", "session", "20260709T12000", *repair)
    assert proc.returncode == 2
    assert "ambiguous" in proc.stderr
    assert store.list_admin_events(RUN) == []
    proc = li(li_env, "override", "session", "2b5dd3", *repair)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"session {RUN}: failed -> completed")
    assert row_of(store, "session", RUN)["status"] == "completed"


def test_li_invoke_end_takes_a_prefix_or_suffix(store: Store, li_env: dict[str, str]) -> None:
    ident = "0f1e2d3c-aaaa-4bbb-8ccc-123456789abc"
    store.invocations.create(skill="review", id=ident)
    proc = li(li_env, "invoke", "end", "789abc", "--status", "completed")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(ident)
    assert row_of(store, "invocation", ident)["status"] == "completed"
    proc = li(li_env, "invoke", "end", "nope", "--status", "completed")
    assert proc.returncode == 2
    assert "no invocation" in proc.stderr

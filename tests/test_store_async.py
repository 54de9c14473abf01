"""The async StateDB facade, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from lirun import StateDB, TransitionRejectedError
from lirun.async_twin import to_thread
from support.storekit import write_lock_held


def test_round_trip(db_url: str) -> None:
    async def scenario() -> None:
        async with StateDB(db_url) as db:
            row = await db.create_session(id="s-1", cwd="/tmp")
            assert row["status"] == "running"
            await db.append_message("s-1", role="assistant", content="done")
            assert await db.update_status(
                "session",
                "s-1",
                new_status="completed",
                reason_code="run.completed.ok",
                evidence_refs=[{"kind": "commit", "ref": "abc"}],
                expected_statuses={"running"},
                extra_fields={"exit_code": 0},
            )
            got = await db.get_session("s-1")
            assert got is not None
            assert got["status"] == "completed"
            assert got["exit_code"] == 0
            assert not await db.update_status(
                "run", "s-1", new_status="failed", reason_code="run.failed.exception",
                expected_statuses={"running"},
            )  # fmt: skip
            with pytest.raises(TransitionRejectedError):
                await db.update_status(
                    "session", "s-1", new_status="failed", reason_code="run.failed.exception"
                )
            history = await db.list_transitions("sessions", "s-1")
            assert [t["status"] for t in history] == ["running", "completed"]
            events = await db.list_admin_events("s-1")
            assert [e["event_type"] for e in events] == ["status_transition_rejected"]
            assert [m["content"] for m in await db.list_messages("s-1")] == ["done"]
            for create, get in (
                (db.create_invocation(skill="review", id="i-1"), db.get_invocation("i-1")),
                (db.create_show(topic="t", id="sh-1"), db.get_show("sh-1")),
                (db.create_play(show_id="sh-1", name="p", id="p-1"), db.get_play("p-1")),
                (db.create_schedule_run(action_kind="agent", id="q-1"), db.get_schedule_run("q-1")),
                (db.create_team(name="crew", id="t-1"), db.get_team("t-1")),
            ):
                created = await create
                assert await get == created
        # Closed by the context manager; a closed handle reopens on next use.
        assert db._store is None

    asyncio.run(scenario())


def test_event_loop_and_reads_run_while_a_write_waits_for_the_lock(db_url: str) -> None:
    """A write blocked by another process's lock blocks neither the loop nor a read."""

    async def scenario() -> None:
        async with StateDB(db_url) as db:
            await db.create_session(id="s-1")
            with write_lock_held(db_url):
                write = asyncio.create_task(
                    db.update_status(
                        "session", "s-1", new_status="completed", reason_code="run.completed.ok"
                    )
                )
                ticks = 0
                start = time.monotonic()
                while time.monotonic() - start < 0.5:
                    await asyncio.sleep(0.01)
                    ticks += 1
                assert ticks >= 10, f"event loop starved: {ticks} ticks in 0.5 s"
                assert not write.done()
                read_start = time.monotonic()
                row = await asyncio.wait_for(db.get_session("s-1"), timeout=2)
                assert time.monotonic() - read_start < 1.0
                assert row is not None
                assert row["status"] == "running"
            assert await asyncio.wait_for(write, timeout=20) is True
            done = await db.get_session("s-1")
            assert done is not None
            assert done["status"] == "completed"

    asyncio.run(scenario())


def test_every_public_method_is_documented_and_has_the_store_signature() -> None:
    """The async face is generated from Store: one signature, one docstring, per method."""
    import inspect

    from lirun.store import Store

    public = [n for n, v in vars(StateDB).items() if not n.startswith("_") and callable(v)]
    assert len(public) >= 20
    for name in public:
        method = getattr(StateDB, name)
        assert method.__doc__, f"StateDB.{name} has no docstring"
        assert method.__doc__.strip(), f"StateDB.{name} has no docstring"
        core = getattr(Store, name, None)
        if core is None or name in ("close", "open"):
            continue
        assert inspect.iscoroutinefunction(method), name
        face, own = inspect.signature(method), inspect.signature(core)
        assert face.parameters == own.parameters, name
        if face.return_annotation != own.return_annotation:  # typed rows, given as dicts
            assert face.return_annotation in (
                "list[dict[str, Any]]",
                "dict[str, Any]",
                "dict[str, Any] | None",
            )
            assert "as_dict()" in method.__doc__, name
        assert core.__doc__, name
        assert core.__doc__.strip() in method.__doc__, name
    for name, method in vars(Store).items():
        if not name.startswith("_") and inspect.isfunction(method) and name != "sql":
            assert method.__doc__, f"Store.{name} has no docstring"


def test_update_status_parameters_are_declared_once() -> None:
    import inspect

    from lirun.store import Store
    from lirun.store.transitions import validate_status_write

    public = list(inspect.signature(Store.update_status).parameters)
    assert public == ["self", *inspect.signature(validate_status_write).parameters]
    assert public[:5] == ["self", "entity_type", "entity_id", "new_status", "reason_code"]
    assert list(inspect.signature(StateDB.update_status).parameters) == public


def test_the_one_declaration_costs_no_inspect_import_at_start_up() -> None:
    """``li wait`` imports the store: the signature is built only when someone asks."""
    import subprocess
    import sys

    code = "import sys, lirun.store; print('inspect' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_every_call_runs_in_a_worker_thread_and_a_held_lock_never_blocks_the_loop(
    tmp_path: Path,
) -> None:
    """StateDB is a thin face: each call is one ``asyncio.to_thread``; the loop runs on
    while a write waits for a lock held elsewhere."""
    ran_on: list[str] = []

    async def scenario() -> None:
        async with StateDB(str(tmp_path / "state.db")) as db:
            await db.create_session(id="s-1")
            await db.create_session(id="s-2")
            lock = db.sync.connector._write_lock
            held, release = threading.Event(), threading.Event()

            def hold() -> None:
                with lock:
                    held.set()
                    release.wait(10)

            holder = threading.Thread(target=hold)
            holder.start()
            held.wait(5)
            write = asyncio.create_task(
                db.update_status(
                    "session", "s-2", new_status="completed", reason_code="run.completed.ok"
                )
            )
            ticks = 0
            for _ in range(10):  # the loop runs while the write waits in a worker
                await asyncio.sleep(0.02)
                ticks += 1
            assert ticks == 10
            assert not write.done()
            release.set()
            assert await asyncio.wait_for(write, timeout=10) is True
            holder.join(5)
            row = await db.get_session("s-2")
            assert row is not None
            assert row["status"] == "completed"
            assert len(await db.list_transitions("session", "s-2")) == 2  # written once
            ran_on.append(await to_thread(lambda: threading.current_thread().name))

    asyncio.run(scenario())
    assert ran_on != [threading.main_thread().name]

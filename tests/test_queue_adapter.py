"""The procrastinate adapter: the one module that imports procrastinate, through its public
API only, and the queue tests run against the newest procrastinate release as well as the
pinned one.

The newest release is asked of the package index (``pip index versions``); when it is not
the installed one, it is installed into a cache outside the clone
(``$LIRUN_PROCRASTINATE_CACHE``, default ``~/.cache/lirun/procrastinate/<version>``, its
dependencies taken from the test venv) and ``tests/test_pgqueue.py`` with the adapter
tests here runs again in a subprocess with it first on ``sys.path``. When the newest is
the installed one, this suite's own run is that run, and the test checks the pin in
pyproject.toml admits it (widen the pin when a newer release passes).
``LIRUN_TEST_PROCRASTINATE=X.Y.Z`` runs the queue tests against that release instead.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from support.queuekit import new_queue_url

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "lirun"
ADAPTER = SRC / "schedules" / "procrastinate_adapter.py"
# procrastinate's documented modules (its docs/reference.rst) the adapter may import.
PUBLIC_MODULES = {
    "procrastinate",
    "procrastinate.exceptions",
    "procrastinate.jobs",
    "procrastinate.schema",
}
# What the subprocess runs against another release: the queue on real PostgreSQL.
QUEUE_TESTS = ["tests/test_pgqueue.py", "tests/test_queue_adapter.py"]


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_only_the_adapter_imports_procrastinate() -> None:
    importers = sorted(
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if any(n.split(".")[0] == "procrastinate" for n in _imports(p))
    )
    assert importers == ["schedules/procrastinate_adapter.py"]


def test_the_adapter_uses_procrastinate_public_api_only() -> None:
    tree = ast.parse(ADAPTER.read_text(encoding="utf-8"))
    assert {n for n in _imports(ADAPTER) if n.startswith("procrastinate")} <= PUBLIC_MODULES
    private = sorted(
        f"{ast.unparse(node)} (line {node.lineno})"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id == "self")
    )
    assert not private, private  # no private attribute of procrastinate's objects
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):  # no subclass of a procrastinate class
            bases = {ast.unparse(b) for b in node.bases}
            assert not any("procrastinate" in b or b.startswith("p") for b in bases), node.name


def test_schedules_hold_no_sql_text() -> None:
    sql = re.compile(
        r"\b(SELECT \w|INSERT INTO|UPDATE \w+ SET|DELETE FROM|CREATE (SCHEMA|TABLE)|COMMENT ON|"
        r"LISTEN [\w{]|pg_\w+\()"
    )
    found = [
        f"{p.name}: {m.group(0)}"
        for p in (SRC / "schedules").glob("*.py")
        for m in sql.finditer(p.read_text(encoding="utf-8"))
    ]
    assert not found, found


def test_the_queue_sql_binds_values_and_fills_only_identifiers_and_the_stamp() -> None:
    from lirun.store.queue_records import queue_queries

    queries = queue_queries()
    assert set(queries) == {
        "lock_queue_schema",
        "create_queue_schema",
        "queue_schema_state",
        "stamp_queue_schema",
        "lift_statement_timeout",
    }
    for name, text in queries.items():
        assert set(re.findall(r"\{(\w*)\}", text)) <= {"schema", "stamp"}, name
        assert "%s" not in text, name
        assert "?" not in text, name


def test_a_failed_handle_is_retried_a_bounded_number_of_times() -> None:
    from lirun.schedules.procrastinate_adapter import QueueJob
    from lirun.schedules.queue_worker import JOB_RETRIES, retry_after

    def job(attempts: int) -> QueueJob:
        return QueueJob(id=1, run_id="r", attempts=attempts)

    assert retry_after(job(0), failed=False) is None
    assert retry_after(job(0), failed=True) is not None
    assert retry_after(job(JOB_RETRIES - 1), failed=True) is not None
    assert retry_after(job(JOB_RETRIES), failed=True) is None


def test_a_stamp_of_another_minor_version_is_a_conflict() -> None:
    from lirun.store.queue_records import stamp_conflict

    assert stamp_conflict("q", "procrastinate 3.10.2", "3.10.0") is None
    assert stamp_conflict("q", "", "3.10.0") is None  # made before stamps: left as it is
    why = stamp_conflict("q", "procrastinate 3.9.0", "3.10.0")
    assert why is not None
    assert "3.9.0" in why
    assert "migrations" in why


@pytest.fixture
def pg_url() -> Iterator[str]:
    yield from new_queue_url()


@pytest.mark.postgres
@pytest.mark.slow
def test_the_adapter_defers_once_per_run_id_and_fetches_the_job(pg_url: str) -> None:
    """Against the procrastinate on ``sys.path`` (the pinned one, or the newest in the
    subprocess): the queueing lock, a fetch, a close, and the version stamp."""
    import asyncio

    from lirun.schedules.pgqueue import prepare_queue_schema
    from lirun.schedules.procrastinate_adapter import Deferrer, WorkerQueue
    from lirun.store.queue_records import queue_conninfo

    conninfo, schema = queue_conninfo(pg_url)
    prepare_queue_schema(conninfo, schema)
    deferrer = Deferrer(conninfo, schema, connect_seconds=5)
    try:
        assert deferrer.defer("run-1") is True
        assert deferrer.defer("run-1") is False  # one job waits for run-1 already
    finally:
        deferrer.close()

    async def serve_one() -> tuple[str, int]:
        queue = WorkerQueue(conninfo, schema, max_connections=2)
        await queue.open()
        try:
            worker_id = await queue.register(stalled_after=30)
            await queue.heartbeat(worker_id)
            job = await queue.fetch(worker_id)
            assert job is not None
            assert await queue.fetch(worker_id) is None
            await queue.finish(job, succeeded=True)
            assert await queue.retry_stalled(stalled_after=30) == 0
            await queue.unregister(worker_id)
            return job.run_id, job.attempts
        finally:
            await queue.close()

    assert asyncio.run(serve_one()) == ("run-1", 0)


def _newest_release() -> str:
    asked = os.environ.get("LIRUN_TEST_PROCRASTINATE")
    if asked:
        return asked
    asked_index = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "procrastinate"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    found = re.search(r"^procrastinate \(([^)]+)\)", asked_index.stdout, re.MULTILINE)
    if asked_index.returncode or not found:
        pytest.fail(
            "could not ask the package index for procrastinate's releases "
            f"({asked_index.stderr.strip()[-500:]}); LIRUN_TEST_PROCRASTINATE=X.Y.Z names one"
        )
    return found.group(1)


def _cached_release(version: str) -> Path:
    """procrastinate ``version`` alone (no dependencies) in a directory outside the clone."""
    cache = Path(
        os.environ.get("LIRUN_PROCRASTINATE_CACHE")
        or Path.home() / ".cache" / "lirun" / "procrastinate"
    )
    target = cache / version
    if not (target / "procrastinate").is_dir():
        partial = cache / f".{version}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
             str(partial), f"procrastinate=={version}"],
            check=True, timeout=300,
        )  # fmt: skip
        partial.rename(target)  # whole, so an interrupted install never looks cached
    return target


def _unmet_requirements(target: Path, version: str) -> list[str]:
    """What the release needs that the test venv does not have (its extras aside)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    (info,) = target.glob(f"procrastinate-{version}.dist-info")
    unmet = []
    for line in (info / "METADATA").read_text(encoding="utf-8").splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.removeprefix("Requires-Dist:").strip())
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        try:
            have = installed(req.name)
        except PackageNotFoundError:
            unmet.append(f"{req} (missing)")
            continue
        if not req.specifier.contains(have, prereleases=True):
            unmet.append(f"{req} (have {have})")
    return unmet


def _pinned() -> Requirement:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (pin,) = [
        Requirement(r)
        for r in project["optional-dependencies"]["postgres"]
        if r.startswith("procrastinate")
    ]
    return pin


@pytest.mark.postgres
@pytest.mark.slow
def test_the_queue_works_on_the_newest_procrastinate_release() -> None:
    from importlib.metadata import version as installed

    newest = _newest_release()
    if newest == installed("procrastinate"):
        # this suite's own run is the run against the newest release
        assert _pinned().specifier.contains(Version(newest)), (
            f"procrastinate {newest} passes the queue tests but pyproject.toml pins "
            f"{_pinned()}: widen the pin"
        )
        return
    target = _cached_release(newest)
    unmet = _unmet_requirements(target, newest)
    assert not unmet, f"procrastinate {newest} needs what the test venv lacks: {unmet}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(ROOT / "tests")])}
    probe = "import importlib.metadata as m; print(m.version('procrastinate'))"
    seen = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert seen == newest
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *QUEUE_TESTS,
         "-k", "not newest_procrastinate_release"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, (
        f"the queue tests fail on procrastinate {newest} (pinned: {_pinned()}):\n"
        f"{run.stdout[-4000:]}{run.stderr[-2000:]}"
    )
    if not _pinned().specifier.contains(Version(newest)):
        pytest.fail(
            f"procrastinate {newest} passes the queue tests: widen the pin {_pinned()} "
            "in pyproject.toml to admit it"
        )

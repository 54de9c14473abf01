from __future__ import annotations

import json
import multiprocessing
import re
import threading
from pathlib import Path

import pytest

from lirun.errors import LirunError, ValidationError
from lirun.paths import runs_root
from lirun.record.rundir import RunDir, RunDirError, allocate_run, new_run_id, safe_component
from support.userkit import run_as_nobody


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LIRUN_HOME", str(tmp_path / "lirun-home"))
    monkeypatch.delenv("LIRUN_RUN_ID", raising=False)
    monkeypatch.delenv("LIONAGI_RUN_ID", raising=False)
    return tmp_path / "lirun-home"


def test_generated_id_format_and_layout(home: Path) -> None:
    run = allocate_run()
    assert re.fullmatch(r"\d{8}T\d{6}-[0-9a-f]{6}", run.run_id)
    assert run.state_root == runs_root() / run.run_id
    assert run.state_root == home / "runs" / run.run_id
    assert run.artifact_dir == run.state_root / "artifacts"
    assert run.branches_dir.is_dir()
    assert run.stream_dir.is_dir()
    assert not run.artifact_dir.exists()


def test_generated_ids_differ() -> None:
    assert len({new_run_id() for _ in range(50)}) == 50


def test_id_precedence(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIONAGI_RUN_ID", "from-lionagi")
    assert allocate_run().run_id == "from-lionagi"
    monkeypatch.setenv("LIRUN_RUN_ID", "from-lirun")
    assert allocate_run().run_id == "from-lirun"
    assert allocate_run(run_id="explicit").run_id == "explicit"


def test_empty_env_id_is_ignored(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIRUN_RUN_ID", "")
    monkeypatch.setenv("LIONAGI_RUN_ID", "fallback")
    assert allocate_run().run_id == "fallback"


@pytest.mark.parametrize(
    "bad", ["", ".", "..", "../x", "a/b", "-lead", ".hidden", "a b", "x" * 129, "é", "a\x00", "a\n"]
)
def test_unsafe_run_id_rejected(home: Path, bad: str) -> None:
    with pytest.raises(ValidationError, match="use 1-128 characters"):
        allocate_run(run_id=bad)
    assert not (home / "runs").exists() or list((home / "runs").iterdir()) == []


def test_unsafe_env_run_id_rejected(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIRUN_RUN_ID", "../../etc")
    with pytest.raises(ValueError):
        allocate_run()


def test_safe_component_accepts_and_names_what() -> None:
    assert safe_component("a.b_c-1", "branch id") == "a.b_c-1"
    with pytest.raises(ValidationError, match="invalid branch id"):
        safe_component("..", "branch id")
    with pytest.raises(ValidationError):
        safe_component(5, "branch id")


def test_save_dir_is_expanded_and_resolved(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    run = allocate_run(save_dir="~/out/../deliver")
    assert run.artifact_dir == (tmp_path / "user" / "deliver").resolve()
    assert run.state_root == runs_root() / run.run_id
    assert not run.artifact_dir.exists()
    run.ensure_artifact_dir()
    assert run.artifact_dir.is_dir()


def test_path_properties(home: Path) -> None:
    run = allocate_run(run_id="r1")
    s, a = run.state_root, run.artifact_dir
    assert run.manifest_path == s / "run.json"
    assert run.checkpoint_path == s / "checkpoint.json"
    assert run.synthesis_path == a / "synthesis.md"
    assert run.flow_log_path == a / "flow.log"
    assert run.dag_image_path == a / "flow_dag.png"
    assert run.branch_path("b1").parent == run.branches_dir
    assert run.stream_buffer_path("b1") == run.stream_dir / "b1.jsonl"
    with pytest.raises(ValueError):
        run.branch_path("../b1")
    with pytest.raises(ValueError):
        run.stream_buffer_path("x/y")


def test_rundir_is_frozen(home: Path) -> None:
    run = allocate_run(run_id="r1")
    with pytest.raises(AttributeError):
        run.run_id = "other"  # type: ignore[misc]  # frozen: the write must raise


def test_agent_artifact_dir(home: Path, tmp_path: Path) -> None:
    run = allocate_run(run_id="r1")
    assert run.agent_artifact_dir("coder") == run.artifact_dir / "coder"
    assert not run.artifact_dir.exists()
    for bad in ("..", "a/b", "", "/abs"):
        with pytest.raises(ValueError):
            run.agent_artifact_dir(bad)


def test_agent_artifact_dir_symlink_escape(home: Path, tmp_path: Path) -> None:
    run = allocate_run(run_id="r1")
    run.ensure_artifact_dir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (run.artifact_dir / "evil").symlink_to(outside)
    with pytest.raises(ValueError, match="outside"):
        run.agent_artifact_dir("evil")


def test_manifest_roundtrip(home: Path) -> None:
    run = allocate_run(run_id="r1")
    assert run.read_manifest() == {}
    run.write_manifest({"cwd": "/w", "run_id": "spoofed", "n": 3})
    data = run.read_manifest()
    assert data == {
        "run_id": "r1",
        "state_root": str(run.state_root),
        "artifact_dir": str(run.artifact_dir),
        "artifact_root": str(run.artifact_dir),  # the old name, deprecated
        "cwd": "/w",
        "n": 3,
    }
    assert list(data)[:3] == ["run_id", "state_root", "artifact_dir"]
    assert [p.name for p in run.state_root.iterdir() if p.name.endswith(".tmp")] == []


def test_manifest_unserializable_leaves_old_file(home: Path) -> None:
    run = allocate_run(run_id="r1")
    run.write_manifest({"v": 1})
    with pytest.raises(TypeError):
        run.write_manifest({"v": object()})
    assert run.read_manifest()["v"] == 1
    assert sorted(p.name for p in run.state_root.iterdir()) == ["branches", "run.json", "stream"]


def test_read_manifest_propagates_errors(home: Path) -> None:
    run = allocate_run(run_id="r1")
    run.manifest_path.write_text("{torn", encoding="utf-8")
    with pytest.raises(json.JSONDecodeError):
        run.read_manifest()
    run.manifest_path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ValueError):
        run.read_manifest()
    run.manifest_path.unlink()
    run.manifest_path.mkdir()
    with pytest.raises(OSError):
        run.read_manifest()


def test_unwritable_runs_root_is_typed(home: Path) -> None:
    home.mkdir(parents=True)
    (home / "runs").write_text("not a directory", encoding="utf-8")
    with pytest.raises(RunDirError) as info:
        allocate_run(run_id="r1")
    err = info.value
    assert isinstance(err, LirunError)
    assert isinstance(err, OSError)
    assert str(home / "runs") in str(err)
    assert "LIRUN_HOME" in str(err)


_ALLOCATE_AS_USER = """
from lirun.record.rundir import RunDirError, allocate_run
try:
    allocate_run(run_id="r1")
    print("ok")
except RunDirError as exc:
    print(f"RunDirError: {exc}")
"""


def test_read_only_runs_root_is_typed(shared_dir: Path) -> None:
    writable = shared_dir / "rw"
    (writable / "runs").mkdir(parents=True)
    (writable / "runs").chmod(0o777)
    assert run_as_nobody(_ALLOCATE_AS_USER, home=writable) == "ok"  # the control case

    readonly = shared_dir / "ro"
    (readonly / "runs").mkdir(parents=True, mode=0o755)
    result = run_as_nobody(_ALLOCATE_AS_USER, home=readonly)
    assert result.startswith("RunDirError:"), result
    assert "LIRUN_HOME" in result, result
    assert list((readonly / "runs").iterdir()) == []


def test_existing_run_dir_is_reused(home: Path) -> None:
    first = allocate_run(run_id="same")
    first.write_manifest({"k": 1})
    second = allocate_run(run_id="same")
    assert second == first
    assert second.read_manifest()["k"] == 1


def test_concurrent_thread_writers(home: Path) -> None:
    run = allocate_run(run_id="threads")
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(100):
                run.write_manifest({"writer": n, "i": i, "pad": "x" * (n * 500)})
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert run.read_manifest()["i"] == 99


def _process_writer(state_root: str, artifact_dir: str, n: int, count: int) -> None:
    run = RunDir("procs", Path(state_root), Path(artifact_dir))
    for i in range(count):
        run.write_manifest({"writer": n, "i": i, "pad": "y" * (1000 + n * 3000)})


def test_concurrent_process_writers_never_tear(home: Path) -> None:
    run = allocate_run(run_id="procs")
    run.write_manifest({"writer": -1, "i": -1})
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(
            target=_process_writer, args=(str(run.state_root), str(run.artifact_dir), n, 200)
        )
        for n in range(4)
    ]
    for p in procs:
        p.start()
    reads = 0
    while any(p.is_alive() for p in procs) or reads == 0:
        data = run.read_manifest()
        assert data["run_id"] == "procs"
        assert len(data.get("pad", "")) in {0, 1000, 4000, 7000, 10000}
        reads += 1
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert run.read_manifest()["i"] == 199
    leftovers = [p.name for p in run.state_root.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_run_state_is_private_to_its_owner(home: Path) -> None:
    run = allocate_run(run_id="private")
    for path in (run.state_root, run.branches_dir, run.stream_dir):
        assert path.stat().st_mode & 0o077 == 0, path

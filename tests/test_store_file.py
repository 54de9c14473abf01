"""The SQLite database file: URL forms, creation, an empty or misplaced file, read-only
directories (issue 8, items 9 and 10)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from lirun.store import open_store
from support.cli import li_command
from support.userkit import AS_NOBODY, _readable_source, run_as_nobody


def test_the_four_slash_absolute_url_form(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = open_store(f"sqlite:///{path}")  # sqlite:// + /abs/path: four slashes
    store.sessions.create(id="s-1")
    store.close()
    reader = open_store(f"sqlite:///{path}", readonly=True)
    try:
        assert reader.get_entity("session", "s-1") is not None
    finally:
        reader.close()
    assert path.is_file()


def test_a_path_with_uri_characters_opens_read_only(tmp_path: Path) -> None:
    path = tmp_path / "odd?name#1.db"
    open_store(path).close()
    open_store(path, readonly=True).close()


def test_an_empty_file_is_set_aside_and_said(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(b"")
    reader = subprocess.run(
        li_command("--db", str(path), "status"), capture_output=True, text=True, timeout=60
    )
    assert reader.returncode == 2
    assert "is empty (0 bytes)" in reader.stderr
    assert path.stat().st_size == 0  # a reader changes nothing
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from lirun.store import open_store; open_store(sys.argv[1]).close()",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    kept = [p for p in tmp_path.iterdir() if p.name.startswith("state.db.empty-")]
    assert len(kept) == 1
    assert kept[0].stat().st_size == 0
    assert f"{path} was empty" in result.stderr
    assert str(kept[0]) in result.stderr
    assert path.stat().st_size > 0


def test_a_new_database_file_is_never_empty_nor_left_in_pieces(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    open_store(path).close()
    assert path.stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "state.db"]


def test_li_status_on_a_directory_is_an_error(tmp_path: Path) -> None:
    target = tmp_path / "db-dir"
    target.mkdir()
    result = subprocess.run(
        li_command("--db", str(target), "status"), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "is a directory" in result.stderr
    assert "no runs" not in result.stdout


# -- a database directory the reader cannot write --------------------------------------

_STATUS_AND_WAIT = """
import sys
from lirun.cli.main import main
print(main(["--db", sys.argv[1], "status", "--json"]))
print(main(["--db", sys.argv[1], "wait", "done", "--timeout", "5"]))
"""


def _read_only_database(shared_dir: Path) -> Path:
    folder = shared_dir / "ro"
    folder.mkdir()
    path = folder / "state.db"
    store = open_store(path)
    store.sessions.create(id="done")
    store.update_status(
        "session",
        "done",
        new_status="completed",
        reason_code="run.completed.ok",
        extra_fields={"exit_code": 0},
    )
    store.sessions.create(id="later")
    store.close()
    path.chmod(0o644)
    folder.chmod(0o555)
    assert sorted(os.listdir(folder)) == ["state.db"]
    return path


def test_read_only_commands_work_in_a_directory_they_cannot_write(shared_dir: Path) -> None:
    path = _read_only_database(shared_dir)
    out = run_as_nobody(_STATUS_AND_WAIT, str(path), home=shared_dir)
    assert '"id": "done"' in out
    assert '"id": "later"' in out
    assert "done\tstatus=completed" in out
    assert out.splitlines()[-1] == "0"


def test_a_waiter_in_a_read_only_directory_sees_later_commits(shared_dir: Path) -> None:
    path = _read_only_database(shared_dir)
    source = _readable_source(shared_dir)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(source), "HOME": str(shared_dir)}
    env["LIRUN_HOME"] = str(shared_dir)
    waiter = subprocess.Popen(
        [
            *AS_NOBODY,
            sys.executable,
            "-m",
            "lirun",
            "--db",
            str(path),
            "wait",
            "later",
            "--interval",
            "0.2",
            "--timeout",
            "30",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=source,
    )
    time.sleep(1.5)
    assert waiter.poll() is None, waiter.communicate()
    store = open_store(path)  # root may write where nobody may not
    store.update_status(
        "session",
        "later",
        new_status="failed",
        reason_code="run.failed.exception",
        extra_fields={"exit_code": 1},
    )
    store.close()
    out, err = waiter.communicate(timeout=30)
    assert waiter.returncode == 1, err
    assert out.startswith("later\tstatus=failed"), err

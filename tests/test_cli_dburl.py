"""Database URLs and homes that are wrong: one clear line, exit 2, no traceback, no secret
(issue 8, items 8 and 9)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from support.cli import li_command
from support.userkit import run_as_nobody

SECRET = "s3cret-pw"


def li(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    done = subprocess.run(
        li_command(*args), capture_output=True, text=True, timeout=60, cwd=cwd, env=env
    )
    return done.returncode, done.stdout, done.stderr


def assert_clean_refusal(code: int, out: str, err: str, needle: str) -> None:
    assert code == 2, (out, err)
    assert "Traceback" not in err, err
    assert needle in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_a_query_password_is_redacted_by_db_path() -> None:
    code, out, err = li("db", "path", "--db", f"postgresql://u@h/db?password={SECRET}&x=1")
    assert code == 0, err
    assert SECRET not in out
    assert "password=***" in out


def test_a_query_password_is_redacted_in_connection_errors() -> None:
    url = f"postgresql://u@127.0.0.1:1/db?connect_timeout=2&password={SECRET}"
    code, out, err = li("--db", url, "status")
    assert_clean_refusal(code, out, err, "password=***")
    assert SECRET not in err + out


@pytest.mark.parametrize("command", [["status"], ["wait", "x"], ["run", "--", "true"]])
def test_a_path_too_long_for_the_filesystem(tmp_path: Path, command: list[str]) -> None:
    code, out, err = li("--db", str(tmp_path / ("a" * 300)), *command)
    assert_clean_refusal(code, out, err, "File name too long")


@pytest.mark.parametrize("command", [["status"], ["db", "path"], ["run", "--", "true"]])
def test_a_broken_ipv6_host(command: list[str]) -> None:
    code, out, err = li("--db", f"postgresql://u:{SECRET}@[::1:5432/db", *command)
    assert_clean_refusal(code, out, err, "Invalid IPv6 URL")
    assert SECRET not in err + out


@pytest.mark.parametrize("command", [["status"], ["wait", "x"], ["run", "--", "true"]])
def test_an_unknown_scheme_is_refused(tmp_path: Path, command: list[str]) -> None:
    code, out, err = li("--db", "mysql://u@h/db", *command, cwd=tmp_path)
    assert_clean_refusal(code, out, err, "unsupported database URL scheme mysql://")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]


def test_db_without_a_value() -> None:
    code, out, err = li("--db")
    assert_clean_refusal(code, out, err, "--db needs a value")


def test_a_home_that_is_a_regular_file(tmp_path: Path) -> None:
    home = tmp_path / "home-file"
    home.write_text("")
    env = {**os.environ, "LIRUN_HOME": str(home)}
    code, out, err = li("run", "--", "true", env=env)
    assert_clean_refusal(code, out, err, f"cannot create the directory {home}")
    for command in (["status"], ["wait", "x"]):
        code, out, err = li(*command, env=env)
        assert code in (0, 2), err
        assert "Traceback" not in err, err


def test_a_home_under_an_immutable_directory(tmp_path: Path) -> None:
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    if subprocess.run(["chattr", "+i", str(frozen)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here")
    try:
        env = {**os.environ, "LIRUN_HOME": str(frozen / "home")}
        code, out, err = li("run", "--", "true", env=env)
        assert_clean_refusal(code, out, err, "Operation not permitted")
    finally:
        subprocess.run(["chattr", "-i", str(frozen)], check=True)


_RUN_AS_USER = """
import contextlib, io, sys
from lirun.cli.main import main
err = io.StringIO()
with contextlib.redirect_stderr(err):
    code = main(["run", "--", "true"])
print(code, err.getvalue().strip())
"""


def test_a_home_under_an_unwritable_directory(shared_dir: Path) -> None:
    locked = shared_dir / "locked"
    locked.mkdir(mode=0o555)
    out = run_as_nobody(_RUN_AS_USER, home=locked / "home")
    assert out.startswith("2 li run") or out.startswith("2 "), out
    assert "Permission denied" in out
    assert "Traceback" not in out

"""`li ui` as a person runs it: the install hint without the extra, refusing another
address than this machine's without a token, printing its URL, stopping on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from support.cli import li_command

TOKEN = "abcdefghijklmnop-0123"


def li_ui(*args: str, env: dict[str, str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        li_command("ui", *args), env=env, capture_output=True, text=True, timeout=timeout
    )


def test_without_the_extra_it_says_how_to_install_it(
    tmp_path: Path, li_env: dict[str, str]
) -> None:
    shim = tmp_path / "shim" / "starlette"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('not installed')\n")
    env = {**li_env, "PYTHONPATH": str(shim.parent)}
    result = li_ui(env=env)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert "pip install 'lirun[ui]'" in lines[0]


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.1", "::"])
def test_another_address_without_a_token_is_refused(li_env: dict[str, str], host: str) -> None:
    env = {k: v for k, v in li_env.items() if k != "LIRUN_UI_TOKEN"}
    result = li_ui("--host", host, "--port", "0", env=env)
    assert result.returncode == 2
    assert "--token" in result.stderr
    assert "LIRUN_UI_TOKEN" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("token", "message"), [("short", "at least 16"), ("spaces are not ok here!", "only letters")]
)
def test_a_weak_or_unsafe_token_is_refused(
    li_env: dict[str, str], token: str, message: str
) -> None:
    result = li_ui("--token", token, env=li_env)
    assert result.returncode == 2
    assert message in result.stderr


def test_a_port_in_use_is_a_clear_error(li_env: dict[str, str]) -> None:
    from support.uikit import free_socket

    sock = free_socket()
    sock.listen()
    try:
        result = li_ui("--port", str(sock.getsockname()[1]), env=li_env)
    finally:
        sock.close()
    assert result.returncode == 2
    assert "(0 picks a free one)" in result.stderr


def test_the_default_database_is_created_for_a_first_look(lirun_home: Path) -> None:
    import os

    env = {**os.environ, "LIRUN_HOME": str(lirun_home)}  # no LIRUN_DB_URL: the default
    proc, url = serve_li_ui(env)
    try:
        with urllib.request.urlopen(url, timeout=10) as page:
            assert b'id="no-runs"' in page.read()
    finally:
        assert stop(proc) == 0
    assert (lirun_home / "state.db").exists()


def test_a_missing_database_is_an_error_not_a_new_one(
    tmp_path: Path, li_env: dict[str, str]
) -> None:
    missing = tmp_path / "typo.db"
    result = li_ui("--db", str(missing), "--port", "0", env=li_env)
    assert result.returncode == 2
    assert "no lirun database" in result.stderr
    assert result.stdout == ""
    assert not missing.exists()


def serve_li_ui(env: dict[str, str], *args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        li_command("ui", "--port", "0", *args),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    return proc, url


def stop(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=15)


def test_it_prints_its_url_serves_and_stops_on_sigterm(store: Any, li_env: dict[str, str]) -> None:
    proc, url = serve_li_ui(li_env)
    try:
        assert url.startswith("http://127.0.0.1:")
        assert url.endswith("/")
        with urllib.request.urlopen(url, timeout=10) as page:
            assert page.status == 200
            assert b"<title>Runs" in page.read()
    finally:
        code = stop(proc)
    assert code == 0


def test_a_token_bind_refuses_requests_without_it(store: Any, li_env: dict[str, str]) -> None:
    env = {**li_env, "LIRUN_UI_TOKEN": TOKEN}
    proc, url = serve_li_ui(env, "--host", "0.0.0.0")
    try:
        local = url.replace("0.0.0.0", "127.0.0.1")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(local + "api/runs", timeout=10)
        assert refused.value.code == 401
        request = urllib.request.Request(local + "api/runs")
        request.add_header("Authorization", f"Bearer {TOKEN}")
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 200
    finally:
        assert stop(proc) == 0

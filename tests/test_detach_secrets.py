"""Issue 19 item 5: no password in any process's arguments.

A detached owner (``li run|flow run|flow resume|show run --detach --db URL``) runs for as
long as its work does, and every user of the machine can read its command line in ``ps``.
The database URL, which may hold a password, reaches it through its environment instead.
Each path is started against PostgreSQL with a password in the URL (the test server trusts
local connections, so the password is sent nowhere), and while the detached worker and
its child run, no process on the machine has the password in its arguments.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psutil
import pytest

from support.cli import li_command
from support.gitkit import GIT_ENV
from support.pg import make_pg_url
from support.showfilekit import write_show

pytestmark = [pytest.mark.postgres]

PASSWORD = "Pw-5ecret-19"
TIMEOUT = 60


@pytest.fixture
def secret_url() -> Iterator[str]:
    """A fresh schema's URL with a password in it."""
    for url in make_pg_url():
        parts = urlsplit(url)
        netloc = f"{parts.username or 'postgres'}:{PASSWORD}@{parts.hostname}"
        if parts.port:
            netloc += f":{parts.port}"
        yield urlunsplit(parts._replace(netloc=netloc))


def _env(lirun_home: Path) -> dict[str, str]:
    env = {**os.environ, **GIT_ENV, "LIRUN_HOME": str(lirun_home), "PYTHONUNBUFFERED": "1"}
    env.pop("LIRUN_DB_URL", None)
    return env


def _li(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        li_command(*args),
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def _script(folder: Path, name: str) -> str:
    """A shell command that marks itself started, then waits for ``go`` (at most 30 s)."""
    started, go = folder / f"{name}.started", folder / "go"
    return (
        f"touch {started}; i=0; while [ ! -e {go} ] && [ $i -lt 600 ]; "
        "do sleep 0.05; i=$((i+1)); done"
    )


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def _argv_with_password() -> list[str]:
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(proc.info.get("cmdline") or [])
        if PASSWORD in cmdline:
            found.append(f"{proc.info['pid']}: {cmdline}")
    return found


def _lirun_processes() -> int:
    count = 0
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        count += any("lirun" in part for part in cmdline[:4])
    return count


def _check_then_finish(env: dict[str, str], url: str, cwd: Path, marker: str, entity: str) -> None:
    _wait_for(cwd / f"{marker}.started")
    assert _lirun_processes() >= 1
    leaked = _argv_with_password()
    (cwd / "go").touch()
    waited = _li({**env, "LIRUN_DB_URL": url}, cwd, "wait", entity, "--timeout", "60")
    assert not leaked, f"the password is in a command line: {leaked}"
    assert waited.returncode == 0, waited.stdout + waited.stderr


def test_run_detach(tmp_path: Path, lirun_home: Path, secret_url: str) -> None:
    env = _env(lirun_home)
    script = _script(tmp_path, "run")
    started = _li(env, tmp_path, "run", "--detach", "--db", secret_url, "--", "sh", "-c", script)
    assert started.returncode == 0, started.stderr
    _check_then_finish(env, secret_url, tmp_path, "run", started.stdout.strip())


def test_flow_run_and_resume_detach(tmp_path: Path, lirun_home: Path, secret_url: str) -> None:
    env = _env(lirun_home)
    flow = tmp_path / "flow.yaml"
    flow.write_text(
        "legs:\n"
        f"  - {{id: a, run: [sh, -c, {_script(tmp_path, 'a')!r}]}}\n"
        f"  - {{id: b, depends_on: [a], run: [sh, -c, 'test -f ok || exit 4; "
        f"{_script(tmp_path, 'b')}']}}\n",
        encoding="utf-8",
    )
    started = _li(env, tmp_path, "flow", "run", str(flow), "--detach", "--db", secret_url)
    assert started.returncode == 0, started.stderr
    invocation = started.stdout.strip()
    _wait_for(tmp_path / "a.started")
    leaked = _argv_with_password()
    (tmp_path / "go").touch()
    waited = _li({**env, "LIRUN_DB_URL": secret_url}, tmp_path, "wait", invocation)
    assert not leaked, f"the password is in a command line: {leaked}"
    assert waited.returncode == 1, waited.stdout + waited.stderr  # b exits 4
    (tmp_path / "go").unlink()
    (tmp_path / "ok").touch()
    resumed = _li(env, tmp_path, "flow", "resume", invocation, "--detach", "--db", secret_url)
    assert resumed.returncode == 0, resumed.stderr
    _check_then_finish(env, secret_url, tmp_path, "b", resumed.stdout.strip())


def test_show_run_detach(tmp_path: Path, lirun_home: Path, secret_url: str) -> None:
    env = _env(lirun_home)
    play = _script(tmp_path, "play") + "; echo x >> x.txt && git add x.txt && git commit -qm x"
    text = (
        "topic: secret\nrepo: repo\nbase: main\nintegration: show/secret\n"
        f'gate: "true"\nplays:\n  - name: one\n    run: {play!r}\n'
    )
    path = write_show(tmp_path, text)
    started = _li(env, tmp_path, "show", "run", str(path), "--detach", "--db", secret_url)
    assert started.returncode == 0, started.stderr
    _check_then_finish(env, secret_url, tmp_path, "play", started.stdout.strip())


def test_agent_detach(tmp_path: Path, lirun_home: Path, secret_url: str, fake_bin: Path) -> None:
    from support.providerkit import env_with_fake_bin

    env = env_with_fake_bin(
        "claude/success.jsonl", base=_env(lirun_home), fake_bin=fake_bin, delay=0.5
    )
    started = _li(env, tmp_path, "agent", "claude", "fix", "--detach", "--db", secret_url)
    assert started.returncode == 0, started.stderr
    leaked = _argv_with_password()  # the worker and its provider are running now
    waited = _li({**env, "LIRUN_DB_URL": secret_url}, tmp_path, "wait", started.stdout.strip())
    assert not leaked, f"the password is in a command line: {leaked}"
    assert waited.returncode == 0, waited.stdout + waited.stderr

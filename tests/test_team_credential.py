"""Teams on a PostgreSQL that requires a password (scram-sha-256): a team's agent gets the
password in a 0600 credential file its ``LIRUN_DB_URL`` names, never in its environment
or arguments, and the file goes when the run ends, also when its owner was killed. A
child with no credential gets one line saying why it cannot connect."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from lirun.errors import DatabaseConnectionLostError, DatabaseUnavailableError
from lirun.exec.task import Task
from lirun.flows.engine import FlowOptions, run_flow
from lirun.flows.spec import FlowSpec, LegSpec
from lirun.record.credential import CREDENTIAL_NAME, child_url
from lirun.shows.engine import run_show
from lirun.store.pg_connect import passfile_entry
from lirun.store.pg_errors import translate
from lirun.store.urls import url_password, with_passfile
from lirun.teams.membership import TeamSetting
from support.cli import li_command
from support.execkit import poll
from support.pgcluster import PASSWORD, PgCluster
from support.providerkit import FAKE_PROVIDER
from support.showkit import play, script, show_repo, spec
from support.storekit import opened
from support.teamkit import chatty_agent

# The password as it may be written anywhere: as is, and quoted as in its URL.
SPELLINGS = (PASSWORD, quote(PASSWORD, safe=""), quote(PASSWORD))


def _leaks(text: str | bytes) -> list[str]:
    data = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    return [s for s in SPELLINGS if s in data]


def _files_with_password(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and _leaks(p.read_bytes())]


def _li(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        li_command(*args), env=env, capture_output=True, text=True, timeout=timeout
    )


def test_a_team_flow_on_a_password_server_talks_and_leaks_no_password(
    pg_password_cluster: PgCluster, tmp_path: Path, lirun_home: Path, monkeypatch: Any
) -> None:
    url = pg_password_cluster.new_url()
    seen = tmp_path / "seen"
    seen.mkdir()
    monkeypatch.setenv("LIRUN_CLAUDE_BIN", str(chatty_agent(seen)))
    spec = FlowSpec(
        legs=(
            LegSpec("api", Task(agent="claude", prompt="change the api")),
            LegSpec("web", Task(agent="claude", prompt="change the web page")),
        ),
        cwd=str(tmp_path),
        parallel=2,
        team=TeamSetting(None),
    )
    report = run_flow(spec, db_url=url, options=FlowOptions(retry_delay=0.0))
    assert report.status == "completed", report.reason_summary
    with opened(url) as store:
        [team] = store.teams.of_owner("invocation", report.invocation_id)
        bodies = sorted(m.body for m in store.teams.conversation(team.id))
        sessions = store.sessions.list_recent(limit=10)
    assert bodies == ["hello from api", "hello from web"]
    assert "web -> all: hello from web" in (seen / "api.seen").read_text()
    for member in ("api", "web"):
        environ = (seen / f"{member}.environ").read_bytes()
        assert not _leaks(environ), "the password is in the child's environment"
        assert not _leaks((seen / f"{member}.cmdline").read_bytes())
        assert b"passfile=" in environ  # named, not given
        assert (seen / f"{member}.passfile").read_text().strip() == "600"
        mine = json.loads((seen / f"{member}.status").read_text())  # li status, from inside
        assert mine["status"] == "running"
    # Gone with the run; nothing it recorded holds the password.
    for session in sessions:
        assert session.run_dir is not None
        assert not (Path(session.run_dir) / CREDENTIAL_NAME).exists()
        shown = _li({**os.environ, "LIRUN_DB_URL": url}, "status", session.id, "--json")
        assert shown.returncode == 0, shown.stderr
        assert not _leaks(shown.stdout)
        assert not _leaks(repr(session))
    assert not _files_with_password(lirun_home)


def test_a_shows_play_on_a_password_server_talks_to_its_team(
    pg_password_cluster: PgCluster, tmp_path: Path, lirun_home: Path
) -> None:
    url = pg_password_cluster.new_url()
    li = shlex.join(li_command())
    body = (
        f'{li} team send "$LIRUN_TEAM" --to all "hello from $LIRUN_MEMBER" >/dev/null || exit 9; '
        "echo one > a.txt && git add -A && "
        "git -c user.name=t -c user.email=t@example.invalid commit -qm solo"
    )
    show_spec = dataclasses.replace(
        spec(show_repo(tmp_path), [play("solo", script(body))]), team=TeamSetting(None)
    )
    report = run_show(show_spec, db_url=url)
    assert report.status == "completed", report.to_dict()
    with opened(url) as store:
        [team] = store.teams.of_owner("show", report.show_id)
        said = [(m.sender, m.body) for m in store.teams.conversation(team.id)]
    assert ("solo", "hello from solo") in said
    assert not list(lirun_home.rglob(CREDENTIAL_NAME))
    assert not _files_with_password(lirun_home)


def test_a_run_whose_child_is_not_in_a_team_gets_no_credential(
    pg_password_cluster: PgCluster, tmp_path: Path, lirun_home: Path
) -> None:
    url = pg_password_cluster.new_url()
    env = {**os.environ, "LIRUN_DB_URL": url}
    script = f'echo "$LIRUN_DB_URL"; {shlex.join(li_command("status"))} 2>&1; echo "rc=$?"'
    done = _li(env, "run", "--json", "--", "sh", "-c", script)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    out = (Path(result["run_dir"]) / "stream" / "stdout.log").read_text()
    child_url_line, said, rc = out.splitlines()[-3:]
    assert "passfile" not in child_url_line
    assert not _leaks(child_url_line)
    assert rc == "rc=2"
    assert said.startswith("li status: error: cannot use PostgreSQL at ")
    assert "the server asks for a password and none was given" in said
    assert not (Path(result["run_dir"]) / CREDENTIAL_NAME).exists()


@pytest.mark.parametrize(
    ("passfile", "expected"),
    [
        (None, "none was given (not in the URL, PGPASSWORD, ~/.pgpass or PGPASSFILE)"),
        ("gone", "is missing or unreadable (a run's credential file exists only while"),
        ("open", "is readable by others, so libpq ignores it: chmod 600"),
    ],
)
@pytest.mark.parametrize("command", [("team", "list"), ("wait", "r-1", "--timeout", "30")])
def test_no_password_is_one_line_and_no_retry(
    pg_password_cluster: PgCluster,
    tmp_path: Path,
    passfile: str | None,
    expected: str,
    command: tuple[str, ...],
) -> None:
    bare = child_url(pg_password_cluster.url, None)
    assert bare is not None
    if passfile is not None:
        path = tmp_path / "db.pgpass"
        if passfile == "open":
            path.write_text(passfile_entry(PASSWORD))
            path.chmod(0o644)
        bare = with_passfile(bare, str(path))
    env = {**os.environ, "LIRUN_DB_URL": bare}
    env.pop("PGPASSWORD", None)
    env.pop("PGPASSFILE", None)
    done = _li(env, *command, timeout=20)  # li wait would retry a lost connection for 30 s
    assert done.returncode == 2
    *libpq, line = done.stderr.splitlines()  # libpq warns of an open file itself
    assert all(said.startswith("WARNING: password file") for said in libpq)
    assert len(libpq) == (passfile == "open")
    assert "the server asks for a password" in line
    assert expected in line


def _kill_a_team_flow_owner(url: str, tmp_path: Path, *, guard: bool) -> Path:
    """Start ``li flow run`` of a team whose agent sleeps, SIGKILL it once the agent
    runs; the credential file the agent's URL named."""
    said = tmp_path / "said"
    agent = tmp_path / "claude"
    agent.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = --version ]; then exec {sys.executable} {FAKE_PROVIDER} --version; fi\n'
        'pf="${LIRUN_DB_URL##*passfile=}"\n'
        f'echo "${{pf%%&*}}" > {said}.tmp && mv {said}.tmp {said}\n'
        "exec sleep 60\n"
    )
    agent.chmod(0o755)
    flow = tmp_path / "slow.yaml"
    flow.write_text("team: true\nlegs:\n  - {id: slow, agent: claude, prompt: wait}\n")
    env = {**os.environ, "LIRUN_DB_URL": url, "LIRUN_CLAUDE_BIN": str(agent)}
    env["LIRUN_GUARD"] = "on" if guard else "off"
    owner = subprocess.Popen(
        li_command("flow", "run", str(flow)), env=env, cwd=tmp_path,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        poll(said.exists, timeout=30, what="the agent started")
        passfile = Path(said.read_text().strip())
        assert passfile.exists()
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(timeout=10)
    finally:
        if owner.poll() is None:
            owner.kill()
    return passfile


def test_a_killed_owners_credential_goes_with_its_record(
    pg_password_cluster: PgCluster, tmp_path: Path, lirun_home: Path
) -> None:
    url = pg_password_cluster.new_url()
    # No guard: the reaper is what must remove the file (a guard removes it first).
    passfile = _kill_a_team_flow_owner(url, tmp_path, guard=False)
    # A crash leaves it only in the run's private directory, for its user alone.
    assert passfile.name == CREDENTIAL_NAME
    assert stat.S_IMODE(passfile.stat().st_mode) == 0o600
    assert stat.S_IMODE(passfile.parent.stat().st_mode) == 0o700
    reaped = _li({**os.environ, "LIRUN_DB_URL": url}, "reap")
    assert reaped.returncode == 0, reaped.stderr
    assert not passfile.exists()
    with opened(url) as store:
        [session] = store.sessions.list_recent(limit=5)
        assert session.status == "failed"
        assert session.run_dir == str(passfile.parent)


def test_the_guard_removes_the_credential_when_the_owner_dies(
    pg_password_cluster: PgCluster, tmp_path: Path, lirun_home: Path
) -> None:
    passfile = _kill_a_team_flow_owner(pg_password_cluster.new_url(), tmp_path, guard=True)
    poll(lambda: not passfile.exists(), timeout=10, what="the guard removed the credential")


def test_the_passfile_line_escapes_and_the_url_names_it() -> None:
    assert passfile_entry("a:b\\c") == "*:*:*:*:a\\:b\\\\c\n"
    with pytest.raises(ValueError, match="line break"):
        passfile_entry("a\nb")
    url = "postgresql://u:p%3Aw+1@h:5/db?schema=s&passfile=/old"
    assert url_password(url) == "p:w+1"
    assert url_password("postgresql://u@h/db?password=a+b%26") == "a+b&"
    assert url_password("postgresql://u@h/db") is None
    assert url_password("/tmp/state.db") is None
    assert child_url(url, Path("/r/db.pgpass")) == (
        "postgresql://u@h:5/db?schema=s&passfile=/r/db.pgpass"
    )
    assert child_url(url, None) == "postgresql://u@h:5/db?schema=s&passfile=/old"  # as given


@pytest.mark.parametrize(
    "said",
    [
        'connection to server at "h" failed: fe_sendauth: no password supplied',
        'connection to server at "h" failed: FATAL:  password authentication failed for user "u"',
    ],
)
def test_a_password_problem_is_not_a_lost_connection(said: str) -> None:
    error = translate(None, said, "postgresql://u:pw@h/db", operational=True)
    assert isinstance(error, DatabaseUnavailableError)
    assert not isinstance(error, DatabaseConnectionLostError)  # nothing retries it
    assert "pw@" not in str(error)

"""``li logs ID``: a run's own output from its stream files, on both backends: real runs
of ``li run`` and ``li agent`` (the fake provider), --stdout/--stderr, --tail, --follow
while another process writes, a pruned run, an unknown id, a closed pipe; and ``li
status`` of a failed run showing its stderr's last lines and both exit codes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lirun.exec.log_reader import Cursor
from lirun.liveness import boot_id, host_name
from lirun.record.retention import GcOptions, collect_garbage
from lirun.record.retention_rules import RetentionPolicy
from lirun.run_output import last_lines, tail_offset
from lirun.store import Store, open_store
from support.cli import li_command
from support.providerkit import fake_env

FAILING = "echo out; echo err >&2; exit 3"


def li(env: dict[str, str], *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        li_command(*args), env=env, capture_output=True, text=True, timeout=60, **kw
    )


def last_id(env: dict[str, str]) -> str:
    rows = json.loads(li(env, "status", "--json", "--limit", "1").stdout)
    return str(rows[0]["id"])


def run_cmd(env: dict[str, str], script: str, cwd: Path) -> str:
    li(env, "run", "--", "sh", "-c", script, cwd=cwd)
    return last_id(env)


def test_a_commands_streams_each_alone_and_both_headed(li_env: dict[str, str], tmp_path: Path):
    run_id = run_cmd(li_env, FAILING, tmp_path)
    both = li(li_env, "logs", run_id)
    assert both.returncode == 0, both.stderr
    assert both.stdout == "==> stdout <==\nout\n\n==> stderr <==\nerr\n"
    assert li(li_env, "logs", run_id, "--stdout").stdout == "out\n"
    assert li(li_env, "logs", run_id[-6:], "--stderr").stdout == "err\n"  # a suffix will do
    assert li(li_env, "logs", run_id, "--stdout", "--stderr").returncode == 2


def test_li_status_of_a_failed_run_shows_its_stderr_and_both_exit_codes(
    li_env: dict[str, str], tmp_path: Path
) -> None:
    script = "echo out; for i in 1 2 3 4 5 6 7; do echo e$i >&2; done; printf 'x\\033[2Jy\\n' >&2"
    run_id = run_cmd(li_env, script + "; exit 3", tmp_path)
    shown = li(li_env, "status", run_id).stdout
    assert "exit code     3 (lirun: 1)" in shown, shown
    section = shown.split(f"li logs {run_id} --stderr)\n", 1)[1].split("\n\n", 1)[0]
    assert section.split("\n") == ["  e4", "  e5", "  e6", "  e7", "  x\\x1b[2Jy"]
    ok = run_cmd(li_env, "echo fine >&2", tmp_path)
    assert "li logs" not in li(li_env, "status", ok).stdout  # only a failed run's


def test_tail_gives_the_last_lines_of_each(li_env: dict[str, str], tmp_path: Path) -> None:
    run_id = run_cmd(li_env, "seq 1 5000; echo a >&2; printf 'b\\nno newline' >&2", tmp_path)
    assert li(li_env, "logs", run_id, "--stdout", "--tail", "3").stdout == "4998\n4999\n5000\n"
    assert li(li_env, "logs", run_id, "--stderr", "--tail", "2").stdout == "b\nno newline\n"
    assert li(li_env, "logs", run_id, "--tail", "0").stdout == ""
    assert li(li_env, "logs", run_id, "--tail", "-1").returncode == 2


def test_tail_offset_and_last_lines_read_backwards(tmp_path: Path, monkeypatch) -> None:
    import lirun.run_output as run_output

    monkeypatch.setattr(run_output, "BLOCK", 4)  # lines across many blocks
    path = tmp_path / "f"
    for content in (b"", b"a\n", b"one\ntwo\nthree", b"one\ntwo\nthree\n", b"\n\n"):
        path.write_bytes(content)
        for n in range(4):
            expected = b"".join(content.splitlines(keepends=True)[-n:]) if n else b""
            if n == 0 and not content.endswith(b"\n"):
                expected = content.splitlines(keepends=True)[-1] if content else b""
            assert content[tail_offset(str(path), n) :] == expected, (content, n)
    path.write_bytes(b"1\n\n2\n3")
    assert last_lines(str(path), 2) == ["2", "3"]
    assert last_lines(str(tmp_path / "missing"), 2) == []


def test_follow_prints_what_another_process_writes_until_the_run_ends(
    li_env: dict[str, str], tmp_path: Path
) -> None:
    gate = tmp_path / "go"
    script = f"echo first; while [ ! -e {gate} ]; do sleep 0.05; done; echo second; echo bye >&2"
    started = li(li_env, "run", "--detach", "--", "sh", "-c", script + "; exit 2", cwd=tmp_path)
    run_id = started.stdout.strip()
    follower = subprocess.Popen(
        li_command("logs", run_id, "--follow", "--stdout"),
        env=li_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert follower.stdout is not None
    assert follower.stdout.readline() == "first\n"  # printed while the run still runs
    assert follower.poll() is None
    gate.touch()
    out, err = follower.communicate(timeout=30)
    assert (out, follower.returncode) == ("second\n", 0), err
    assert json.loads(li(li_env, "status", run_id, "--json").stdout)["status"] == "failed"


def test_ctrl_c_ends_a_follow_with_130_and_no_traceback(
    li_env: dict[str, str], tmp_path: Path
) -> None:
    run_id = li(li_env, "run", "--detach", "--", "sleep", "30", cwd=tmp_path).stdout.strip()
    follower = subprocess.Popen(
        li_command("logs", run_id, "-f"), env=li_env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(1.5)
    follower.send_signal(signal.SIGINT)
    _, err = follower.communicate(timeout=30)
    assert follower.returncode == 130
    assert err == "li logs: interrupted\n"
    assert "Traceback" not in err
    row = json.loads(li(li_env, "status", run_id, "--json").stdout)
    assert row["status"] == "running"  # following never touched the run
    os.kill(int(row["owner_pid"]), signal.SIGTERM)
    assert li(li_env, "wait", run_id).returncode == 1


def test_an_agents_transcript_is_readable_text(
    li_env: dict[str, str], fake_bin: Path, tmp_path: Path
) -> None:
    env = fake_env("claude/success.jsonl", base=li_env)
    env["PATH"] = f"{fake_bin}{os.pathsep}{env['PATH']}"
    li(env, "agent", "claude", "fix the test", cwd=tmp_path)
    run_id = last_id(env)
    text = li(env, "logs", run_id, "--stdout")
    assert text.stdout == (
        "Fixing the test.\n"
        'tool call Bash: {"command": "pytest -q"}\n'
        "tool result: 1 passed\n"
        "Done: test fixed.\n"
    )
    raw = li(env, "logs", run_id, "--stdout", "--raw").stdout
    assert raw.splitlines()[0].startswith('{"type":"system"')
    assert li(env, "logs", run_id, "--stdout", "--tail", "1").stdout == "Done: test fixed.\n"


def test_a_failed_agents_errors_are_one_line_each(tmp_path: Path) -> None:
    fixture = Path(__file__).parent / "fixtures" / "claude" / "auth_401_result.jsonl"
    path = tmp_path / "b.jsonl"
    path.write_bytes(fixture.read_bytes())
    lines = [
        line for batch in Cursor(str(path), provider="claude").batches(final=True) for line in batch
    ]
    assert lines[-1] == "error: Invalid API key · Fix external API key"
    assert sum(line.startswith("retry: API retry") for line in lines) == 10


def test_a_cursor_gives_each_line_once_and_whole(tmp_path: Path) -> None:
    path = tmp_path / "stdout.log"
    path.write_bytes(b"one\ntw")
    cursor = Cursor(str(path))
    assert list(cursor.batches(final=False)) == [["one"]]
    with path.open("ab") as file:
        file.write(b"o\n\x1b[1mthree" + "\u202e".encode())
    assert list(cursor.batches(final=False)) == [["two"]]
    assert list(cursor.batches(final=True)) == [["\\x1b[1mthree\\u202e"]]
    assert list(cursor.batches(final=True)) == []


def test_a_pruned_run_says_so_with_exit_3(li_env: dict[str, str], db_url: str, tmp_path: Path):
    run_id = run_cmd(li_env, FAILING, tmp_path)
    store = open_store(db_url)
    try:
        options = GcOptions(now=time.time() + 10 * 86400, actor="tester")
        collect_garbage(store, RetentionPolicy(older_than=86400), options)
    finally:
        store.close()
    gone = li(li_env, "logs", run_id)
    assert gone.returncode == 3
    assert gone.stdout == ""
    [line] = gone.stderr.splitlines()
    assert line.startswith(f"li logs: error: run {run_id} was pruned by tester on ")
    assert "(li gc): its output files are gone" in line


def test_an_unknown_id_is_exit_2_as_li_status(li_env: dict[str, str], tmp_path: Path) -> None:
    run_cmd(li_env, "true", tmp_path)
    logs, status = li(li_env, "logs", "no-such-run"), li(li_env, "status", "no-such-run")
    assert logs.returncode == status.returncode == 2
    assert logs.stderr.startswith("li logs: error: no execution or record with id")


def test_a_closed_pipe_ends_quietly(li_env: dict[str, str], tmp_path: Path) -> None:
    run_id = run_cmd(li_env, "seq 1 200000", tmp_path)
    shell = f"{' '.join(li_command('logs', run_id, '--stdout'))} | head -1"
    done = subprocess.run(
        ["sh", "-c", shell],
        env=li_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.stdout.splitlines()[0] == "1"
    assert "Traceback" not in done.stderr
    assert "BrokenPipe" not in done.stderr


def test_a_run_that_wrote_nothing_says_so_on_stderr(li_env: dict[str, str], tmp_path: Path):
    run_id = run_cmd(li_env, "true", tmp_path)
    quiet = li(li_env, "logs", run_id)
    assert (quiet.returncode, quiet.stdout) == (0, "")
    assert quiet.stderr == f"li logs: run {run_id} wrote nothing\n"


@pytest.mark.parametrize("flag", ["--stdout", "--stderr"])
def test_help_names_the_streams_and_exit_codes(flag: str) -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "lirun", "logs", "--help"], capture_output=True, text=True
    ).stdout
    assert flag in shown
    assert "exit codes:\n  0 " in shown


GATED_SHOW = """
topic: t1
repo: repo
base: main
integration: show/t1
gate: "echo 'the gate says no' >&2; exit 1"
plays:
  - name: one
    run: "echo working && echo one >> one.txt && git add one.txt && git commit -q -m one"
    attempts: 1
"""


def test_a_failed_gate_is_read_with_li_logs_as_the_board_says(
    li_env: dict[str, str], tmp_path: Path
) -> None:
    from support.showfilekit import write_show

    show = write_show(tmp_path / "s", GATED_SHOW)
    board = li(li_env, "show", "run", str(show), cwd=show.parent).stdout
    hint = board.split("its last gate's output: li logs ", 1)[1]
    gate_id = hint.split()[0]
    gate = li(li_env, "logs", gate_id)
    assert gate.stdout == "==> stderr <==\nthe gate says no\n", gate.stderr
    assert "\n  the gate says no\n" in li(li_env, "status", gate_id).stdout
    play_id = board.split("play one (", 1)[1].split(")", 1)[0]
    assert li(li_env, "logs", play_id, "--stdout").stdout == "working\n"  # its work session
    show_id = board.split()[1]
    refused = li(li_env, "logs", show_id)
    assert refused.returncode == 2
    assert f"li show status {show_id}" in refused.stderr


def test_a_flows_legs_are_each_headed_by_leg_and_run(
    li_env: dict[str, str], tmp_path: Path
) -> None:
    flow = tmp_path / "f.yaml"
    flow.write_text(
        "legs:\n"
        "  - id: a\n    run: [sh, -c, 'echo from-a; echo a-err >&2']\n"
        "  - id: b\n    depends_on: [a]\n    run: [sh, -c, 'echo from-b; exit 5']\n"
    )
    li(li_env, "flow", "run", str(flow), cwd=tmp_path)
    [row] = json.loads(li(li_env, "flow", "list", "--json").stdout)
    shown = li(li_env, "logs", row["id"], "--stdout").stdout
    parts = shown.split("\n\n")
    assert [p.split("\n")[1:] for p in parts] == [["from-a"], ["from-b", ""]]
    assert parts[0].startswith("==> leg a ")
    assert parts[0].split("\n")[0].endswith(" stdout <==")
    assert parts[1].startswith("==> leg b ")


def test_follow_stops_when_the_runs_owner_died_unreaped(
    store: Store, li_env: dict[str, str], tmp_path: Path
) -> None:
    """Nobody would end the record: following it stops, saying why and what reaps it."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    run_dir = tmp_path / "runs" / "orphan"
    (run_dir / "stream").mkdir(parents=True)
    (run_dir / "stream" / "stdout.log").write_text("hi\n")
    store.sessions.create(
        id="orphan", run_dir=str(run_dir), owner_pid=gone.pid, owner_host=host_name(),
        owner_boot_id=boot_id(), owner_start_time=time.time(), heartbeat_at=time.time(),
    )  # fmt: skip
    followed = li(li_env, "logs", "orphan", "--follow", "--stdout")
    assert (followed.returncode, followed.stdout) == (0, "hi\n")
    assert followed.stderr.startswith(f"li logs: stopped following: owner pid {gone.pid} ")
    assert "li reap" in followed.stderr


def test_a_schedule_run_is_followed_from_queued_to_its_runs_end(
    li_env: dict[str, str], tmp_path: Path
) -> None:
    queued = li(li_env, "submit", "--", "run", "sh", "-c", "echo from-queue", cwd=tmp_path)
    run_id = queued.stdout.strip()
    waiting = li(li_env, "logs", run_id)
    assert (waiting.returncode, waiting.stdout) == (0, "")
    assert waiting.stderr == f"li logs: schedule_run {run_id} has started no run yet\n"
    follower = subprocess.Popen(
        li_command("logs", run_id, "--follow", "--stdout"),
        env=li_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    worker = subprocess.Popen(
        li_command("worker", "--allow-root", str(tmp_path)), env=li_env, cwd=tmp_path,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        out, err = follower.communicate(timeout=60)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    assert (out, follower.returncode) == ("from-queue\n", 0), err


@pytest.mark.parametrize(
    ("host", "said"),
    [("elsewhere", "ran on host elsewhere: its output files are there"), (None, "is gone")],
)
def test_output_not_on_this_host_or_removed_is_exit_3(
    store: Store, li_env: dict[str, str], tmp_path: Path, host: str | None, said: str
) -> None:
    store.sessions.create(id="far", run_dir=str(tmp_path / "nowhere"))
    with store.connector.write() as tx:  # create records this host as the owner's
        tx.execute("UPDATE sessions SET owner_host = :h WHERE id = 'far'", {"h": host})
    gone = li(li_env, "logs", "far")
    assert (gone.returncode, gone.stdout) == (3, "")
    assert gone.stderr.startswith("li logs: error: run far")
    assert said in gone.stderr

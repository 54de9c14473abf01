"""The supervisor, stream sinks, signal trap, heartbeat and recorder, with real processes.

No database here: these are the pieces under ``li run`` / ``li agent``. The end-to-end
behaviour on both backends is in test_cli_run.py and test_cli_agent.py.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from lirun.exec.agent_legs import judge_agent
from lirun.exec.capture import ChunkSink, LineSink, open_buffer
from lirun.exec.heartbeat import Heartbeat
from lirun.exec.legs import judge_command, stop_status
from lirun.exec.recorder import Recorder
from lirun.exec.supervisor import Limits, ProcessResult, SpawnError, supervise
from lirun.exec.verdict import StreamStatus, StreamVerdict
from lirun.provider_errors import ProviderError
from lirun.signals import SignalTrap

# --- sinks ---------------------------------------------------------------------------------


def test_chunk_sink_copies_to_file_and_keeps_a_bounded_tail(tmp_path: Path) -> None:
    path = tmp_path / "out.log"
    sink = ChunkSink(open_buffer(path), tail_bytes=8)
    for chunk in (b"hello ", b"wor", b"ld, this is long\n"):
        sink.feed(chunk)
    sink.close()
    assert path.read_bytes() == b"hello world, this is long\n"
    assert sink.tail_text() == " is long\n"[-8:]
    assert len(sink.tail) == 8
    assert sink.total_bytes == len(b"hello world, this is long\n")


def test_chunk_sink_buffer_appends_across_legs(tmp_path: Path) -> None:
    path = tmp_path / "out.log"
    for text in (b"leg1\n", b"leg2\n"):
        sink = ChunkSink(open_buffer(path))
        sink.feed(text)
        sink.close()
    assert path.read_bytes() == b"leg1\nleg2\n"


def test_chunk_sink_survives_a_closed_echo_target(tmp_path: Path) -> None:
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    sink = ChunkSink(open_buffer(tmp_path / "o.log"), echo_fd=write_fd, tail_bytes=64)
    sink.feed(b"first\n")
    sink.feed(b"second\n")
    os.close(write_fd)
    assert sink.echo_fd is None
    assert sink.echo_error is not None
    assert (tmp_path / "o.log").read_bytes() == b"first\nsecond\n"


def test_line_sink_splits_lines_across_chunks_and_delivers_a_truncated_tail() -> None:
    lines: list[str] = []
    sink = LineSink(None, lines.append)
    for chunk in (b'{"a":1}\n{"b"', b":2}\n\n", b'{"cut'):
        sink.feed(chunk)
    assert lines == ['{"a":1}', '{"b":2}', ""]
    sink.finish()
    assert lines[-1] == '{"cut'


def test_line_sink_hands_over_an_overlong_line_instead_of_growing() -> None:
    lines: list[str] = []
    sink = LineSink(None, lines.append, max_line_bytes=10)
    sink.feed(b"x" * 25)
    assert lines == ["x" * 25]
    assert not sink._pending


# --- pure judgement ------------------------------------------------------------------------


def _result(**kw: Any) -> ProcessResult:
    base: dict[str, Any] = {"pid": 1, "exit_code": 0}
    base.update(kw)
    return ProcessResult(**base)


@pytest.mark.parametrize(
    ("result", "signal_name", "status", "extras"),
    [
        (_result(), None, "completed", {"exit_code": 0}),
        (_result(exit_code=3), None, "failed", {"exit_code": 3}),
        (_result(exit_code=-9), None, "failed", {"exit_code": -9}),
        (_result(exit_code=-15, killed_by="timeout"), None, "timed_out", {"idle_timeout": False}),
        (_result(exit_code=-15, killed_by="idle"), None, "timed_out", {"idle_timeout": True}),
        (_result(exit_code=-2, killed_by="signal"), "SIGINT", "aborted", {"signal": "SIGINT"}),
        (_result(exit_code=-15, killed_by="signal"), "SIGTERM", "cancelled", {}),
        (_result(exit_code=0), "SIGHUP", "cancelled", {"signal": "SIGHUP"}),
        (None, "SIGTERM", "cancelled", {"signal": "SIGTERM"}),
    ],
)
def test_judge_command(
    result: ProcessResult | None, signal_name: str | None, status: str, extras: dict[str, object]
) -> None:
    outcome = judge_command(result, signal_name)
    assert outcome.status == status
    assert outcome.exception is None
    for key, value in extras.items():
        assert getattr(outcome.extras, key) == value


def test_judge_command_marks_a_command_whose_stdout_is_output_never_a_reply() -> None:
    outcome = judge_command(_result(), None, "hi\n")
    assert outcome.extras.command is True  # its exit code is its verdict at teardown
    assert outcome.extras.assistant_output is False  # stdout is output, not a reply
    assert outcome.reply == "hi\n"
    assert outcome.record["reply_text"] == "hi\n"
    assert "reply_text" not in judge_command(_result(), None, " \n").record
    assert judge_command(_result(), None, require_change=True).extras.require_change is True


def test_judge_command_records_how_li_stopped_the_child() -> None:
    killed = _result(exit_code=-9, killed_by="timeout", escalated_to_sigkill=True)
    (fact,) = judge_command(killed, None).extras.evidence
    assert fact == {
        "kind": "supervisor_stop",
        "killed_by": "timeout",
        "li_signal": None,
        "sigkill": True,
        "exit_code": -9,
    }


def _verdict(status: StreamStatus = "completed", exc: ProviderError | None = None) -> StreamVerdict:
    return StreamVerdict(
        provider="claude",
        status=status,
        exception=exc,
        reply="done",
        engine_session_uid="uid-1",
        evidence=[{"kind": "provider_exit", "exit_code": 0}],
    )


def test_judge_agent_takes_the_verdict_when_li_did_not_stop_it() -> None:
    error = ProviderError("no terminal", provider="claude")
    outcome = judge_agent(_result(exit_code=1), None, _verdict("failed", error))
    assert (outcome.status, outcome.exception) == ("failed", error)
    assert outcome.engine_session_uid == "uid-1"
    assert outcome.extras.assistant_output is True
    assert {"kind": "provider_exit", "exit_code": 0} in outcome.extras.evidence


def test_judge_agent_grace_kill_keeps_the_verdict() -> None:
    outcome = judge_agent(_result(exit_code=-15, killed_by="grace"), None, _verdict())
    assert outcome.status == "completed"
    assert outcome.exception is None


@pytest.mark.parametrize(
    ("killed_by", "signal_name", "status"),
    [("idle", None, "timed_out"), ("timeout", None, "timed_out"), ("signal", "SIGINT", "aborted")],
)
def test_judge_agent_li_stops_outrank_the_verdict(
    killed_by: str, signal_name: str | None, status: str
) -> None:
    error = ProviderError("no terminal", provider="claude")
    outcome = judge_agent(
        _result(exit_code=-15, killed_by=killed_by), signal_name, _verdict("failed", error)
    )
    assert outcome.status == status
    assert outcome.exception is None


def test_stop_status() -> None:
    assert [stop_status(s) for s in ("SIGINT", "SIGTERM", "SIGHUP")] == [
        "aborted",
        "cancelled",
        "cancelled",
    ]


# --- supervise -----------------------------------------------------------------------------


def _sinks(tmp_path: Path) -> tuple[ChunkSink, ChunkSink]:
    out = ChunkSink(open_buffer(tmp_path / "stdout.log"), tail_bytes=1024)
    err = ChunkSink(open_buffer(tmp_path / "stderr.log"))
    return out, err


def test_supervise_captures_both_streams_and_the_exit_code(tmp_path: Path) -> None:
    out, err = _sinks(tmp_path)
    result = supervise(["sh", "-c", "echo out; echo err >&2; exit 7"], stdout=out, stderr=err)
    assert result.exit_code == 7
    assert result.killed_by is None
    assert (tmp_path / "stdout.log").read_text() == "out\n"
    assert (tmp_path / "stderr.log").read_text() == "err\n"
    assert (result.stdout_bytes, result.stderr_bytes) == (4, 4)


def test_supervise_runs_in_cwd_with_env(tmp_path: Path) -> None:
    out, err = _sinks(tmp_path)
    env = {**os.environ, "LIRUN_T": "v"}
    supervise(["sh", "-c", 'pwd; echo "$LIRUN_T"'], stdout=out, stderr=err, cwd="/", env=env)
    assert out.tail_text() == "/\nv\n"


def test_wall_clock_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    out, err = _sinks(tmp_path)
    pidfile = tmp_path / "grandchild.pid"
    script = f"sleep 30 & echo $! > {pidfile}; wait"
    started = time.monotonic()
    result = supervise(["sh", "-c", script], stdout=out, stderr=err, limits=Limits(timeout=0.5))
    assert result.killed_by == "timeout"
    assert result.timed_out
    assert result.exit_code == -signal.SIGTERM
    assert time.monotonic() - started < 5
    grandchild = int(pidfile.read_text())
    assert not _alive(grandchild)


def test_idle_watchdog_fires_only_after_silence(tmp_path: Path) -> None:
    out, err = _sinks(tmp_path)
    script = "for i in 1 2 3 4; do echo $i; sleep 0.15; done; sleep 30"
    result = supervise(
        ["sh", "-c", script], stdout=out, stderr=err, limits=Limits(idle_timeout=0.5)
    )
    assert result.killed_by == "idle"
    assert out.tail_text() == "1\n2\n3\n4\n"
    assert result.timings["kill_idle"] >= 0.5 + 0.45


def test_sigterm_ignored_escalates_to_sigkill(tmp_path: Path) -> None:
    out, err = _sinks(tmp_path)
    script = "trap '' TERM; echo ready; sleep 30"
    limits = Limits(timeout=0.3, kill_grace=0.3)
    result = supervise(["sh", "-c", script], stdout=out, stderr=err, limits=limits)
    assert result.killed_by == "timeout"
    assert result.escalated_to_sigkill
    assert result.exit_code == -signal.SIGKILL


def test_terminal_event_arms_grace_and_disarms_the_other_timers(tmp_path: Path) -> None:
    out, err = _sinks(tmp_path)
    seen = {"terminal": False}

    def terminal_seen() -> bool:
        seen["terminal"] = seen["terminal"] or "RESULT" in out.tail_text()
        return seen["terminal"]

    limits = Limits(timeout=5, idle_timeout=5, grace=0.3)
    started = time.monotonic()
    result = supervise(
        ["sh", "-c", "echo RESULT; sleep 30"],
        stdout=out,
        stderr=err,
        limits=limits,
        terminal_seen=terminal_seen,
    )
    assert result.killed_by == "grace"
    assert not result.timed_out
    assert time.monotonic() - started < 3


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie waits for whoever adopted it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def test_a_background_grandchild_holding_the_pipe_does_not_hang_li(tmp_path: Path) -> None:
    out, err = _sinks(tmp_path)
    pidfile = tmp_path / "bg.pid"
    script = f"sleep 30 & echo $! > {pidfile}; echo done"
    started = time.monotonic()
    result = supervise(["sh", "-c", script], stdout=out, stderr=err, limits=Limits(drain=0.3))
    assert result.exit_code == 0
    assert result.killed_by is None
    assert time.monotonic() - started < 3
    assert out.tail_text() == "done\n"
    # The run is over, so the grandchild is too, and the result says it had to be ended.
    pid = int(pidfile.read_text())
    assert not _running(pid)
    [entry] = result.killed_descendants
    assert entry["kind"] == "killed_descendants"
    assert entry["processes"][0]["pid"] == pid


def test_spawn_error_for_a_missing_command(tmp_path: Path) -> None:
    out, err = _sinks(tmp_path)
    with pytest.raises(SpawnError, match="cannot start 'no-such-command-xyz'"):
        supervise(["no-such-command-xyz"], stdout=out, stderr=err)


@pytest.mark.parametrize(("sig", "name"), [(signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM")])
def test_a_signal_to_li_stops_the_child_and_is_recorded(
    tmp_path: Path, sig: signal.Signals, name: str
) -> None:
    out, err = _sinks(tmp_path)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), sig))
    with SignalTrap() as trap:
        timer.start()
        result = supervise(["sleep", "30"], stdout=out, stderr=err, trap=trap)
    timer.join()
    assert result.killed_by == "signal"
    assert result.signal_name == name
    assert result.exit_code == -sig  # the child got the same signal
    assert result.duration < 5


def test_a_signal_after_the_child_ended_by_itself_changes_nothing(tmp_path: Path) -> None:
    """SIGTERM reaches li while it ends what the child left behind (a grandchild that
    ignores SIGTERM): the child had exited 0 on its own, so its ending stands."""
    out, err = _sinks(tmp_path)
    pidfile = tmp_path / "child.pid"
    script = f"echo $$ > {pidfile}; (trap '' TERM; sleep 30) & echo done"
    child_gone = threading.Event()

    def signal_once_the_child_is_gone() -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not child_gone.is_set():
            with contextlib.suppress(OSError, ValueError):
                pid = int(pidfile.read_text())
                try:
                    gone = psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
                except psutil.NoSuchProcess:
                    gone = True  # reaped already: the zombie lasted less than a poll
                if gone:
                    child_gone.set()
                    os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.01)

    watcher = threading.Thread(target=signal_once_the_child_is_gone)
    with SignalTrap() as trap:
        watcher.start()
        result = supervise(
            ["sh", "-c", script], stdout=out, stderr=err, trap=trap,
            limits=Limits(drain=0.3, kill_grace=1.5),
        )  # fmt: skip
        watcher.join()
        assert trap.signal_name == "SIGTERM"  # li got it, after the child's exit
    assert child_gone.is_set()
    assert result.exit_code == 0
    assert result.killed_by is None
    assert result.signal_name is None
    assert judge_command(result, result.signal_name).status == "completed"


class _StallingSink(ChunkSink):
    """A sink whose first chunk keeps li busy until ``release`` is set: li, like a frozen
    one, wakes to the child's exit and a signal that came after it at the same moment."""

    def __init__(self, inner: ChunkSink, release: threading.Event) -> None:
        self.inner, self.release = inner, release

    def feed(self, chunk: bytes) -> None:
        self.release.wait(10)
        self.inner.feed(chunk)

    def finish(self) -> None:
        self.inner.finish()


def test_a_signal_li_finds_beside_the_exit_counts_only_if_it_came_first(tmp_path: Path) -> None:
    """li is busy while the child exits 0 and SIGTERM comes after (a worker thawed after a
    freeze): both wait for li at once, and the child's own ending stands."""
    out, err = _sinks(tmp_path)
    pidfile = tmp_path / "child.pid"
    release = threading.Event()
    sent = threading.Event()

    def signal_once_the_child_is_gone() -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not sent.is_set():
            with contextlib.suppress(OSError, ValueError, psutil.Error):
                if psutil.Process(int(pidfile.read_text())).status() == psutil.STATUS_ZOMBIE:
                    os.kill(os.getpid(), signal.SIGTERM)
                    sent.set()
            time.sleep(0.01)
        release.set()

    watcher = threading.Thread(target=signal_once_the_child_is_gone)
    with SignalTrap() as trap:
        watcher.start()
        result = supervise(
            ["sh", "-c", f"echo $$ > {pidfile}; echo done"],
            stdout=_StallingSink(out, release), stderr=err, trap=trap,
            limits=Limits(drain=0.3, kill_grace=1.5),
        )  # fmt: skip
        watcher.join()
        assert trap.signal_name == "SIGTERM"
        assert trap.after_child
    assert sent.is_set()
    assert (result.exit_code, result.killed_by, result.signal_name) == (0, None, None)
    assert judge_command(result, result.signal_name).status == "completed"


def test_a_signal_while_the_child_runs_still_stops_it(tmp_path: Path) -> None:
    out, err = _sinks(tmp_path)
    with SignalTrap() as trap:
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM)).start()
        result = supervise(["sleep", "30"], stdout=out, stderr=err, trap=trap)
        assert not trap.after_child
    assert (result.killed_by, result.signal_name) == ("signal", "SIGTERM")


def test_signal_trap_restores_the_previous_handlers() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with SignalTrap() as trap:
        assert signal.getsignal(signal.SIGTERM) != before
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.01)
        assert trap.signal_name == "SIGTERM"
        assert trap.exit_code() == 143
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_signal_before_the_child_starts_stops_it_at_once(tmp_path: Path) -> None:
    out, err = _sinks(tmp_path)
    with SignalTrap() as trap:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.01)
        result = supervise(["sleep", "30"], stdout=out, stderr=err, trap=trap)
    assert result.killed_by == "signal"
    assert result.duration < 5


def _alive(pid: int) -> bool:
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        time.sleep(0.02)
    return True


# --- heartbeat and recorder ----------------------------------------------------------------


def test_heartbeat_beats_until_stopped() -> None:
    beats: list[float] = []
    with Heartbeat(lambda: beats.append(time.monotonic()), 0.05) as hb:
        time.sleep(0.3)
    count = len(beats)
    time.sleep(0.12)
    assert count >= 3
    assert len(beats) == count == hb.beats


def test_heartbeat_failure_is_reported_and_does_not_stop_it() -> None:
    errors: list[BaseException] = []
    calls = {"n": 0}

    def beat() -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("database is locked")

    with Heartbeat(beat, 0.03, on_error=errors.append) as hb:
        time.sleep(0.2)
    assert len(errors) == 1
    assert hb.beats >= 2


def test_heartbeat_rejects_a_non_positive_interval() -> None:
    with pytest.raises(ValueError, match="positive"):
        Heartbeat(lambda: None, 0)


def test_recorder_writes_in_order_and_flush_waits() -> None:
    written: list[int] = []

    def write(i: int) -> None:
        time.sleep(0.001)
        written.append(i)

    with Recorder() as rec:
        for i in range(50):
            rec.submit(functools.partial(write, i))
        rec.flush()
        assert written == list(range(50))


def test_recorder_skips_a_failed_write_and_counts_it() -> None:
    errors: list[BaseException] = []
    written: list[str] = []
    with Recorder(on_error=errors.append) as rec:
        rec.submit(lambda: written.append("a"))
        rec.submit(lambda: 1 / 0)
        rec.submit(lambda: written.append("b"))
        rec.flush()
    assert written == ["a", "b"]
    assert rec.failures == 1
    assert isinstance(errors[0], ZeroDivisionError)


class _Progress:
    """A stream's progress as the loop sees it: fixed at the start, or asking to stop."""

    def __init__(self, started: float, *, stop_after: bytes | None = None, out: Any = None) -> None:
        self.started = started
        self.stop_after = stop_after
        self.out = out

    def progress_at(self) -> float:
        return self.started

    def must_stop(self) -> bool:
        return self.stop_after is not None and self.stop_after in self.out.tail_text().encode()


def test_a_stream_with_no_progress_is_stopped_at_the_stall_limit(tmp_path: Path) -> None:
    out, err = _sinks(tmp_path)
    # Output keeps coming (retry notices), so the idle timer never fires: only the stall one.
    script = "while true; do echo 'Reconnecting...'; sleep 0.1; done"
    limits = Limits(idle_timeout=0.5, stall_timeout=0.6)
    started = time.monotonic()
    result = supervise(
        ["sh", "-c", script], stdout=out, stderr=err, limits=limits, progress=_Progress(started)
    )
    assert result.killed_by == "stall"
    assert not result.timed_out
    assert 0.6 <= result.timings["kill_stall"] < 5


def test_without_progress_tracking_there_is_no_stall(tmp_path: Path) -> None:
    out, err = _sinks(tmp_path)
    result = supervise(
        ["sh", "-c", "sleep 0.8; echo done"],
        stdout=out,
        stderr=err,
        limits=Limits(stall_timeout=0.2),
    )
    assert result.killed_by is None
    assert result.exit_code == 0


def test_the_stream_asking_to_stop_stops_the_child_at_once(tmp_path: Path) -> None:
    out, err = _sinks(tmp_path)
    script = "echo init; sleep 0.2; echo 'status 401'; sleep 60"
    started = time.monotonic()
    progress = _Progress(started, stop_after=b"401", out=out)
    result = supervise(["sh", "-c", script], stdout=out, stderr=err, progress=progress)
    assert result.killed_by == "provider"
    assert not result.timed_out
    assert time.monotonic() - started < 5
    assert result.exit_code == -signal.SIGTERM

"""`li ui` holds its ground against a flood of connections, as a real process over real
sockets on 127.0.0.1: event streams past their caps are answered 503 with Retry-After
(memory stays flat), a slot comes back when its client goes, and past the open-file
limit the server neither spins nor logs a traceback per connection."""

from __future__ import annotations

import contextlib
import resource
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from lirun.store import Store
from lirun.ui.server import RefusedLog, connection_limit
from lirun.ui.streams import StreamCaps
from support.cli import li_command

pytestmark = pytest.mark.slow


@contextlib.contextmanager
def li_ui(
    env: dict[str, str], log: Path, *args: str, files: int | None = None
) -> Iterator[tuple[psutil.Process, int]]:
    """`li ui` on a free port (its open-file limit lowered to ``files``): its process and
    port; stopped with SIGTERM at the end. Its stderr goes to ``log``."""

    def limit() -> None:
        if files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))

    with log.open("w") as err:
        proc = subprocess.Popen(
            li_command("ui", "--port", "0", *args),
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            preexec_fn=limit,
        )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), log.read_text()
        yield psutil.Process(proc.pid), int(url.rstrip("/").rsplit(":", 1)[1])
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def ask(port: int, path: str = "/events") -> tuple[socket.socket, bytes]:
    """A GET on a fresh connection: the socket (left open) and the answer's head."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head and len(head) < 65536:
        chunk = sock.recv(4096)
        if not chunk:
            break
        head += chunk
    return sock, head


def status(head: bytes) -> int:
    return int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else 0


@pytest.mark.parametrize(
    ("total", "per_client", "why"),
    [(12, 50, b"the dashboard holds 12"), (50, 12, b"this client holds 12")],
)
def test_event_streams_past_the_cap_are_503_and_memory_stays_flat(
    store: Store, li_env: dict[str, str], tmp_path: Path, total: int, per_client: int, why: bytes
) -> None:
    caps = ("--max-streams", str(total), "--max-streams-per-client", str(per_client))
    held: list[socket.socket] = []
    with li_ui(li_env, tmp_path / "ui.log", *caps) as (server, port):
        try:
            for _ in range(12):
                sock, head = ask(port)
                held.append(sock)
                assert status(head) == 200, head
                assert b"text/event-stream" in head
            sock, head = ask(port)
            held.append(sock)
            assert status(head) == 503, head
            assert b"retry-after: 10" in head.lower()
            assert why in head + sock.recv(4096)
            before = server.memory_info().rss
            for _ in range(600):  # each would be a stream (a task, a queue) without the cap
                sock, head = ask(port)
                held.append(sock)
                assert status(head) == 503
            grown = server.memory_info().rss - before
            assert grown < 6 * 1024 * 1024, f"{grown / 1e6:.1f} MB for 600 refused streams"
            # The client goes: its slot comes back.
            held.pop(0).close()
            deadline = time.monotonic() + 10
            while True:
                sock, head = ask(port)
                held.append(sock)
                if status(head) == 200 or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert status(head) == 200, head
            # Pages still answer while the streams are full.
            page, head = ask(port, "/api/runs")
            held.append(page)
            assert status(head) == 200
        finally:
            for sock in held:
                sock.close()


def test_past_the_open_file_limit_it_neither_spins_nor_floods_its_log(
    store: Store, li_env: dict[str, str], tmp_path: Path
) -> None:
    log = tmp_path / "ui.log"
    held: list[socket.socket] = []
    try:
        with li_ui(li_env, log, files=64) as (server, port):
            for _ in range(100):  # more than it has descriptors for: accept() fails
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                sock.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                held.append(sock)
            time.sleep(0.5)
            spent = sum(server.cpu_times()[:2])
            deadline, knocks = time.monotonic() + 4, 0
            while time.monotonic() < deadline and knocks < 5000:
                with contextlib.suppress(OSError):
                    knock = socket.create_connection(("127.0.0.1", port), timeout=0.5)
                    knock.sendall(b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                    knock.close()
                    knocks += 1
                time.sleep(0.002)
            cpu = sum(server.cpu_times()[:2]) - spent
            # Stopped at once: asyncio's retry to accept, due within the second, fires
            # after shutdown closed the listener.
            for sock in held:
                sock.close()
    finally:
        for sock in held:
            sock.close()
    text = log.read_text()
    assert knocks > 100
    assert cpu < 1.5, f"{cpu:.2f} s of CPU in 4 s of knocking"
    assert "Traceback" not in text
    assert len(text.splitlines()) <= 6, text[:2000]
    assert "out of file descriptors" in text


def test_stream_caps_count_in_all_and_per_client() -> None:
    caps = StreamCaps(total=3, per_client=2)
    assert caps.take("a") is None
    assert caps.take("a") is None
    assert caps.take("a") == "this client holds 2 event streams already"
    assert caps.take("b") is None
    assert caps.take("c") == "the dashboard holds 3 event streams already"
    caps.give_back("a")
    assert caps.take("c") is None
    caps.give_back("nobody")  # never taken: nothing to give back
    assert caps.open == 3


def test_refusals_are_one_line_per_interval_and_connections_fit_the_file_limit() -> None:
    lines: list[str] = []
    log = RefusedLog(lines.append, every=10)
    for t in range(100):
        log.note("connections waited", now=t / 10)  # 100 in 10 s
    log.note("connections waited", now=10.0)
    assert len(lines) == 2
    assert lines[0].startswith("li ui: refused: 1 connections waited")
    assert lines[1].startswith("li ui: refused: 100 connections waited")
    assert connection_limit(None, 1024) == 1024 - 64
    assert connection_limit(None, 1_000_000) == 1000
    assert connection_limit(300, 1_000_000) == 300
    assert connection_limit(None, 20) == 8

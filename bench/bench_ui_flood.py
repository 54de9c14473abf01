"""`li ui` under a flood of connections, as a real process on 127.0.0.1. Prints
``name: value`` lines.

    .venv/bin/python bench/bench_ui_flood.py [--streams N] [--files N] [--seconds S]

Figures (a fresh SQLite home in a temporary directory):
- ``streams.opened`` / ``streams.refused_503``: of ``--streams`` (default 2,000) event
  streams asked for and held open from one address, how many were served and how many
  answered 503 (the caps: 200 in all, 20 per client).
- ``streams.rss_growth_mb``: the server's resident memory after those requests, less
  before them.
- ``fd_limit.cpu_seconds``: CPU the server spent during ``--seconds`` (default 5) of
  new connections every 2 ms, its open-file limit lowered to ``--files`` (default 64)
  and 100 more connections held than it has descriptors for.
- ``fd_limit.log_lines`` / ``fd_limit.tracebacks``: what it wrote to stderr meanwhile.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

from benchkit import out

LI = [sys.executable, "-m", "lirun"]


@contextlib.contextmanager
def li_ui(home: Path, log: Path, files: int | None = None) -> Iterator[tuple[psutil.Process, int]]:
    def limit() -> None:
        if files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))

    env = {**os.environ, "LIRUN_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    env.pop("LIRUN_DB_URL", None)
    with log.open("w") as err:
        proc = subprocess.Popen([*LI, "ui", "--port", "0"], env=env, stdout=subprocess.PIPE,
                                stderr=err, text=True, preexec_fn=limit)  # fmt: skip
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        yield psutil.Process(proc.pid), int(url.rstrip("/").rsplit(":", 1)[1])
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def ask(port: int) -> tuple[socket.socket, int]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head and len(head) < 65536:
        chunk = sock.recv(4096)
        if not chunk:
            break
        head += chunk
    return sock, int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else 0


def streams(tmp: Path, count: int) -> None:
    held: list[socket.socket] = []
    with li_ui(tmp / "home-a", tmp / "a.log") as (server, port):
        before = server.memory_info().rss
        codes: list[int] = []
        try:
            for _ in range(count):
                sock, code = ask(port)
                held.append(sock)
                codes.append(code)
            grown = server.memory_info().rss - before
        finally:
            for sock in held:
                sock.close()
    out("streams.asked", count)
    out("streams.opened", codes.count(200))
    out("streams.refused_503", codes.count(503))
    out("streams.rss_growth_mb", f"{grown / 1e6:.1f}")


def fd_limit(tmp: Path, files: int, seconds: float) -> None:
    log = tmp / "b.log"
    held: list[socket.socket] = []
    with li_ui(tmp / "home-b", log, files=files) as (server, port):
        try:
            for _ in range(files + 100):
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                sock.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                held.append(sock)
            time.sleep(0.5)
            spent = sum(server.cpu_times()[:2])
            deadline, knocks = time.monotonic() + seconds, 0
            while time.monotonic() < deadline:
                with contextlib.suppress(OSError):
                    knock = socket.create_connection(("127.0.0.1", port), timeout=0.5)
                    knock.sendall(b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                    knock.close()
                    knocks += 1
                time.sleep(0.002)
            cpu = sum(server.cpu_times()[:2]) - spent
        finally:
            for sock in held:
                sock.close()
    text = log.read_text()
    out("fd_limit.knocks", knocks)
    out("fd_limit.cpu_seconds", f"{cpu:.2f}")
    out("fd_limit.log_lines", len(text.splitlines()))
    out("fd_limit.tracebacks", text.count("Traceback"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=2000)
    parser.add_argument("--files", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        streams(Path(tmp), args.streams)
        fd_limit(Path(tmp), args.files, args.seconds)


if __name__ == "__main__":
    main()

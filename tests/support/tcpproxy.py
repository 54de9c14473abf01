"""A TCP proxy in front of PostgreSQL that lets through only its first ``limit``
connections: the next ones are accepted and closed at once, as a connection-limiting
pooler or a firewall does (the client sees the server close the link).

``with LimitingProxy(pg_url, limit=1) as proxy: proxy.url`` is the URL through it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType
from urllib.parse import urlsplit, urlunsplit


class LimitingProxy:
    def __init__(self, url: str, *, limit: int) -> None:
        parts = urlsplit(url)
        self._parts = parts
        self._target = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self.limit = limit
        self.accepted = 0
        self.refused = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._stopped = False
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        """The URL of the server through this proxy (user, database, query kept)."""
        user = f"{self._parts.username}@" if self._parts.username else ""
        netloc = f"{user}127.0.0.1:{self.port}"
        return urlunsplit(self._parts._replace(netloc=netloc))

    def __enter__(self) -> LimitingProxy:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._stopped = True
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.close()

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self.accepted >= self.limit:
                    self.refused += 1
                    client.close()
                    continue
                self.accepted += 1
            try:
                server = socket.create_connection(self._target, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

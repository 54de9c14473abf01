"""How many event streams the dashboard holds open: in all, and per client (and the
default cap on connections, which ``ui/server.py`` applies; here so that ``li ui`` names
it in its help without importing the server).

Each stream is a connection held for as long as its page is open, with a queue and a
task behind it; without a bound, a script opening thousands of them (any local user can,
in local mode) takes the server's memory and descriptors. Past a cap the stream is
answered 503 with ``Retry-After``; the slot is given back when the client goes.

A client is its address as the server sees it (behind a reverse proxy on this machine, the
address the proxy forwards); when the dashboard has a token, only a request that
presented it reaches a stream at all. Pure bookkeeping: the event loop's thread calls it.
"""

from __future__ import annotations

MAX_CONNECTIONS = 1000  # connections and requests at once (fewer if descriptors are short)
MAX_STREAMS = 200
MAX_STREAMS_PER_CLIENT = 20
RETRY_AFTER_SECONDS = 10


class StreamCaps:
    """Open streams counted in all and per client key."""

    def __init__(self, total: int = MAX_STREAMS, per_client: int = MAX_STREAMS_PER_CLIENT) -> None:
        self.total = total
        self.per_client = per_client
        self.open = 0
        self._by_client: dict[str, int] = {}

    def take(self, client: str) -> str | None:
        """Take a slot for ``client``: None when taken, else why not (one phrase)."""
        if self.open >= self.total:
            return f"the dashboard holds {self.total} event streams already"
        held = self._by_client.get(client, 0)
        if held >= self.per_client:
            return f"this client holds {self.per_client} event streams already"
        self.open += 1
        self._by_client[client] = held + 1
        return None

    def give_back(self, client: str) -> None:
        held = self._by_client.get(client, 0)
        if held <= 0:
            return
        self.open -= 1
        if held == 1:
            del self._by_client[client]
        else:
            self._by_client[client] = held - 1

"""Running the dashboard under uvicorn: ``li ui`` and the tests use the same server.

Event streams never end on their own, so before uvicorn waits for open connections to
finish at shutdown, the watcher ends every stream (each browser reconnects to whatever
serves next); shutting down then takes milliseconds, not the graceful timeout.
"""

from __future__ import annotations

import socket
from typing import Any

import uvicorn

GRACEFUL_SECONDS = 2


class DashboardServer(uvicorn.Server):
    def __init__(self, app: Any) -> None:
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=GRACEFUL_SECONDS,
        )
        super().__init__(config)
        self._dashboard = getattr(app, "dashboard", None)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self._dashboard is not None:
            self._dashboard.hub.end_streams()
        await super().shutdown(sockets=sockets)

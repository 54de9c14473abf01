"""``POST /hooks/NAME``: a signed webhook delivery to a ``--webhook`` schedule.

The one route the dashboard answers to a POST, and without its token: the request's
signature is its credential (``security.Guard`` lets it through; the rest of the
dashboard keeps its token and read-only rule). The body is read with a bound
(``webhooks.MAX_BODY_BYTES``: 413 past it, before anything is stored), then
``webhook_intake.receive`` checks and stores it with a store that may write (the
dashboard's own store is read-only), borrowed from a few kept open (``StorePool``): up to
``STORES`` deliveries are stored at once. Answers are JSON:
202 ``{schedule_run_id, event_key, duplicate, status}`` once the event and its queued run
are committed (200 for a redelivery, with the first delivery's run, and for GitHub's
``ping``, which stores nothing), else
``{"error": …}`` with 400, 401, 404, 409, 413 or 503, having written nothing.
"""

from __future__ import annotations

import os
import threading

from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from lirun.schedules.transport import Transport, transport_for
from lirun.schedules.webhook_intake import receive
from lirun.schedules.webhooks import MAX_BODY_BYTES, HookRefused
from lirun.store import Store
from lirun.store.pool import StorePool

# Deliveries stored at once, each with a store (two connections) of its own.
STORES = 4


class Hooks:
    """The hook route's state: the database URL and the writing stores, opened as the
    deliveries need them (a few at once: concurrent deliveries do not queue behind one
    connection, and a burst cannot take all of the server's connections)."""

    def __init__(self, db_url: str | None) -> None:
        self.db_url = db_url
        self._stores = StorePool(db_url, keep=STORES, limit=STORES, create=False)
        # The queue the runs are offered on, opened by the first delivery and kept (its
        # connections are pooled): not a queue connection and schema check per delivery.
        self._transport: Transport | None = None
        self._lock = threading.Lock()

    def transport(self, store: Store) -> Transport:
        with self._lock:
            if self._transport is None:
                self._transport = transport_for(store)
            return self._transport

    def close(self) -> None:
        self._stores.close()
        with self._lock:
            transport, self._transport = self._transport, None
        if transport is not None:
            transport.close()

    def deliver(self, name: str, body: bytes, headers: dict[str, str]) -> Response:
        """Store one delivery (in a worker thread: the store blocks)."""
        with self._stores.store() as store:
            try:
                accepted = receive(store, name, body, headers, os.environ, self.transport(store))
            except HookRefused as refused:  # a refusal: the store is as good as before
                return JSONResponse({"error": refused.message}, status_code=refused.status)
        return JSONResponse(
            accepted.as_dict(), status_code=202 if accepted.status in ("queued", "skipped") else 200
        )

    async def endpoint(self, request: Request) -> Response:
        body = await read_bounded(request, MAX_BODY_BYTES)
        if body is None:
            return JSONResponse(
                {"error": f"the body is larger than {MAX_BODY_BYTES:,} bytes"}, status_code=413
            )
        headers = {k.lower(): v for k, v in request.headers.items()}
        name = request.path_params["name"]
        return await run_in_threadpool(self.deliver, name, body, headers)


async def read_bounded(request: Request, limit: int) -> bytes | None:
    """The request's body, or None as soon as it is (or says it is) longer than
    ``limit``: never more than ``limit`` + one chunk is held."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
    except ClientDisconnect:
        return b""
    return b"".join(chunks)

"""The dashboard's Starlette application: pages, their JSON twins under ``/api``, the
OpenAPI document, artifacts, and the event stream. ``create_app`` is the one entry."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import AsyncIterator, Callable, Collection
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from lirun.errors import LirunError
from lirun.paths import resolve_db_url
from lirun.store import Store, open_store
from lirun.ui import list_views, show_views, team_views, views
from lirun.ui.artifacts import (
    ARTIFACT_HEADERS,
    ArtifactRefused,
    own_root,
    read_artifact,
    runs_dir,
)
from lirun.ui.events import Change, Hub, Notice, change_of
from lirun.ui.filters import FILTERS, shown
from lirun.ui.hooks import Hooks
from lirun.ui.jsonable import to_json
from lirun.ui.metrics import CONTENT_TYPE, render
from lirun.ui.openapi import API, openapi_document
from lirun.ui.security import Guard
from lirun.ui.streams import (
    MAX_STREAMS,
    MAX_STREAMS_PER_CLIENT,
    RETRY_AFTER_SECONDS,
    StreamCaps,
)
from lirun.ui.transcript import read_transcript, stream_signature

HERE = os.path.dirname(os.path.realpath(__file__))
KEEPALIVE_SECONDS = 15.0
BACKLOG_LIMIT = 1000
RUN_FILES_KEPT = 1000  # where the stream files of the runs being followed are


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(os.path.join(HERE, "templates")),
        autoescape=select_autoescape(default=True, default_for_string=True),
        finalize=shown,  # every value printed: invisible characters as visible escapes
    )
    env.filters.update(FILTERS)
    return env


class Dashboard:
    """The state one server shares: a Store for reads, the templates, the watcher."""

    def __init__(self, db_url: str | None, streams: StreamCaps | None = None) -> None:
        self.db_url = db_url
        self.streams = streams or StreamCaps()
        # Artifacts are served from this home's runs only (ui/artifacts.py), as it is now.
        self.runs = runs_dir()
        # Read-only, like `li status`: a mistyped path is an error, not a new empty
        # database, and the dashboard never migrates or writes what it shows.
        self.store: Store = open_store(db_url, readonly=True)
        self.env = _environment()
        self.hub = Hub(db_url)
        self.run_files: dict[str, dict[str, Any]] = {}
        self.hooks = Hooks(db_url)  # POST /hooks/NAME: the one route that writes

    def page(self, name: str, request: Request, status: int = 200, **context: Any) -> Response:
        html = self.env.get_template(name).render(request=request, path=request.url.path, **context)
        return HTMLResponse(html, status_code=status)

    async def read(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await run_in_threadpool(fn, self.store, *args)


def _not_found(dash: Dashboard, request: Request, what: str) -> Response:
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": f"no {what}"}, status_code=404)
    return dash.page("error.html", request, 404, title="Not found", message=f"No {what}.")


def _bad_request(dash: Dashboard, request: Request, message: str) -> Response:
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": message}, status_code=400)
    return dash.page("error.html", request, 400, title="Bad request", message=message)


def _json(data: Any) -> Response:
    return Response(to_json(data), media_type="application/json")


def _routes(dash: Dashboard) -> list[Any]:
    def answer(request: Request, data: dict[str, Any], template: str) -> Response:
        """The same data as JSON under /api/, else as the page."""
        if request.url.path.startswith("/api/"):
            return _json(data)
        return dash.page(template, request, **data)

    def one(view: Any, template: str, param: str, what: str) -> Any:
        """A page (and its /api twin) of one record, 404 when there is none."""

        async def handler(request: Request) -> Response:
            key = request.path_params[param]
            data = await dash.read(view, key) if views.plausible_id(key) else None
            if data is None:
                return _not_found(dash, request, f"{what} {key!r}")
            return answer(request, data, template)

        return handler

    def every(view: Any, template: str) -> Any:
        """A page (and its /api twin) over every record of a kind."""

        async def handler(request: Request) -> Response:
            return answer(request, await dash.read(view), template)

        return handler

    def listing(view: Any, template: str) -> Any:
        """A page (and its /api twin) of a list filtered by its query string."""

        async def handler(request: Request) -> Response:
            try:
                data = await dash.read(view, dict(request.query_params))
            except views.BadRequest as exc:
                return _bad_request(dash, request, str(exc))
            return answer(request, data, template)

        return handler

    every_run = listing(views.runs_view, "runs.html")
    show_runs = listing(list_views.show_runs_view, "runs.html")

    async def runs(request: Request) -> Response:
        if request.query_params.get("kind") == "show":
            return await show_runs(request)
        return await every_run(request)

    flows = listing(list_views.flows_view, "flows.html")
    shows = listing(list_views.shows_view, "shows.html")
    schedule = one(list_views.schedule_view, "schedule.html", "name", "schedule")

    async def attention(request: Request) -> Response:
        data = await dash.read(list_views.attention_view, dash.db_url)
        return answer(request, data, "attention.html")

    run = one(functools.partial(views.run_view, runs=dash.runs), "run.html", "run_id", "run")
    flow = one(views.flow_view, "flow.html", "flow_id", "flow")
    show = one(show_views.show_view, "show.html", "show_id", "show")
    schedules = every(views.schedules_view, "schedules.html")
    teams = every(team_views.teams_view, "teams.html")
    team = one(team_views.team_view, "team.html", "team_id", "team")
    workers = every(views.workers_view, "workers.html")

    async def artifact(request: Request) -> Response:
        run_id, rel = request.path_params["run_id"], request.path_params["path"]
        if not views.plausible_id(run_id) or "\x00" in rel:
            return PlainTextResponse("no such run\n", status_code=404)
        row = await run_in_threadpool(dash.store.get_entity, "session", run_id)
        if row is None:
            return PlainTextResponse("no such run\n", status_code=404)
        try:
            root = own_root(dash.runs, run_id, row.get("artifacts_path"))
            served = await run_in_threadpool(read_artifact, root, rel)
        except ArtifactRefused as exc:
            return PlainTextResponse(f"{exc}\n", status_code=404, headers=ARTIFACT_HEADERS)
        headers = dict(ARTIFACT_HEADERS)
        if served.attachment:
            name = os.path.basename(served.path).encode("ascii", "replace").decode()
            headers["Content-Disposition"] = f'attachment; filename="{name.replace(chr(34), "_")}"'
        return Response(served.body, media_type=served.media_type, headers=headers)

    async def transcript(request: Request) -> Response:
        """A running run's transcript section, read from its stream files only (where they
        are is remembered, so following a run never reads the database again); 204 while
        the files have not changed since ``since``."""

        run_id = request.path_params["run_id"]
        if not views.plausible_id(run_id):
            return PlainTextResponse("no such run\n", status_code=404)
        files = dash.run_files.get(run_id)
        if files is None:
            row = await run_in_threadpool(dash.store.get_entity, "session", run_id)
            if row is None:
                return PlainTextResponse("no such run\n", status_code=404)
            files = {k: row.get(k) for k in ("run_dir", "provider", "owner_host")}
            if files["run_dir"]:  # known for good once set; until then, ask again
                if len(dash.run_files) >= RUN_FILES_KEPT:
                    dash.run_files.clear()
                dash.run_files[run_id] = files
        signature = stream_signature(files["run_dir"])
        if signature and signature == request.query_params.get("since"):
            return Response(status_code=204)
        found = await run_in_threadpool(read_transcript, files)
        html = dash.env.get_template("transcript.html").render(transcript=found)
        return HTMLResponse(html, headers={"X-Transcript-Signature": found.signature})

    async def metrics(request: Request) -> Response:
        body = await dash.read(render, resolve_db_url(dash.db_url))
        return Response(body, media_type=CONTENT_TYPE)

    async def openapi(request: Request) -> Response:
        return JSONResponse(openapi_document())

    async def events(request: Request) -> Response:
        return _CappedStream(dash, request)

    handlers = {
        "runs": runs,
        "run": run,
        "flow": flow,
        "show": show,
        "schedules": schedules,
        "workers": workers,
        "flows": flows,
        "shows": shows,
        "schedule": schedule,
        "attention": attention,
        "teams": teams,
        "team": team,
    }
    routes: list[Any] = [
        Route("/", runs),
        Route("/runs", lambda r: RedirectResponse("/", status_code=308)),
        Route("/runs/{run_id}", run),
        Route("/runs/{run_id}/artifacts/{path:path}", artifact),
        Route("/runs/{run_id}/transcript", transcript),
        Route("/flows", flows),
        Route("/flows/{flow_id}", flow),
        Route("/shows", shows),
        Route("/shows/{show_id}", show),
        Route("/schedules", schedules),
        Route("/schedules/{name}", schedule),
        Route("/teams", teams),
        Route("/teams/{team_id}", team),
        Route("/attention", attention),
        Route("/workers", workers),
        Route("/events", events),
        Route("/api/openapi.json", openapi),
        Route("/metrics", metrics),
        Route("/hooks/{name}", dash.hooks.endpoint, methods=["POST"]),
    ]
    routes += [Route(spec.path, handlers[spec.handler]) for spec in API]
    routes.append(Mount("/static", StaticFiles(directory=os.path.join(HERE, "static"))))
    return routes


class _CappedStream(Response):
    """The event stream if a slot is free (``Dashboard.streams``), else a 503 with
    ``Retry-After``; the slot is taken and given back in the same call, so a client that
    goes (or is never served) frees it."""

    def __init__(self, dash: Dashboard, request: Request) -> None:
        super().__init__()
        self._dash, self._request = dash, request

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        client = scope.get("client")
        key = str(client[0]) if client else "?"
        caps = self._dash.streams
        refused = caps.take(key)
        if refused is not None:
            answer: Response = PlainTextResponse(
                f"{refused}: try again later\n",
                status_code=503,
                headers={"Retry-After": str(RETRY_AFTER_SECONDS), "Cache-Control": "no-store"},
            )
            await answer(scope, receive, send)
            return
        try:
            stream = StreamingResponse(
                _event_stream(self._dash, self._request),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
            )
            await stream(scope, receive, send)
        finally:
            caps.give_back(key)


async def _event_stream(dash: Dashboard, request: Request) -> AsyncIterator[str]:
    """The SSE stream of one browser: what it missed since ``Last-Event-ID``, then live."""
    queue = dash.hub.subscribe()
    try:
        last = request.headers.get("last-event-id") or request.query_params.get("last_event_id")
        yield "retry: 1000\n\n"
        seen: set[int] = set()
        last = last.strip() if last is not None else None
        if last and last.isascii() and last.isdigit() and len(last) <= 18:  # an int64 seq
            backlog = await run_in_threadpool(
                dash.store.ui.transitions_since, int(last), limit=BACKLOG_LIMIT
            )
            if len(backlog) >= BACKLOG_LIMIT:
                yield f"id: {dash.hub.cursor}\nevent: reset\ndata: {{}}\n\n"
            else:
                for row in backlog:
                    seen.add(int(row.seq))
                    yield change_of(row, min(dash.hub.cursor, int(row.seq))).to_sse()
        else:
            yield f"id: {dash.hub.cursor}\nevent: hello\ndata: {{}}\n\n"
        if dash.hub.error is not None:
            yield Notice("stale").to_sse()
        while True:
            try:
                change = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            if change is None:
                return
            if not isinstance(change, Change) or change.seq not in seen:
                yield change.to_sse()
    finally:
        dash.hub.unsubscribe(queue)


def create_app(
    db_url: str | None = None,
    *,
    token: str | None = None,
    allowed_hosts: Collection[str] | None = None,
    watch: bool = True,
    max_streams: int = MAX_STREAMS,
    max_streams_per_client: int = MAX_STREAMS_PER_CLIENT,
) -> Any:
    """The dashboard over the database at ``db_url`` (the usual default when None).

    ``token``: required on every request when set. ``allowed_hosts``: the Host names it
    answers (None: any). ``watch``: run the live watcher (off for a test that needs no
    events). ``max_streams`` / ``max_streams_per_client``: event streams open at once,
    in all and per client address (``ui/streams.py``). Raises LirunError when the
    database cannot be opened.
    """
    dash = Dashboard(db_url, StreamCaps(max_streams, max_streams_per_client))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if watch:
            await run_in_threadpool(dash.hub.start, asyncio.get_running_loop())
        try:
            yield
        finally:
            await run_in_threadpool(dash.hub.stop)
            dash.store.close()
            dash.hooks.close()

    app = Starlette(routes=_routes(dash), lifespan=lifespan)
    app.state.dashboard = dash
    guard = Guard(app, token=token, allowed_hosts=allowed_hosts)
    guard.dashboard = dash  # type: ignore[attr-defined]  # the server ends its streams
    return guard


__all__ = ["LirunError", "create_app"]

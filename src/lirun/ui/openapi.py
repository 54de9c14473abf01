"""The JSON API's routes, described once: the app mounts them from this table and the
OpenAPI document is generated from it, so the two cannot drift apart."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lirun.store.ui_reads import RUN_KINDS
from lirun.ui.api_schema_kit import ref
from lirun.ui.api_schemas import components


@dataclass(frozen=True, slots=True)
class ApiRoute:
    path: str
    handler: str  # the page whose data it returns (app._routes)
    summary: str
    params: tuple[tuple[str, str, str], ...] = ()  # (name, in, description)


# The component each page's /api twin answers with (app._routes' handler names).
RESPONSES = {
    "runs": "RunsPage",
    "run": "RunPage",
    "flow": "FlowPage",
    "show": "ShowPage",
    "flows": "FlowsPage",
    "shows": "ShowsPage",
    "schedules": "SchedulesPage",
    "schedule": "SchedulePage",
    "attention": "AttentionPage",
    "workers": "WorkersPage",
    "teams": "TeamsPage",
    "team": "TeamPage",
}

_FILTERS = (
    ("status", "query", "only runs in this status"),
    ("kind", "query", f"only this kind: {', '.join(RUN_KINDS)}, or show (the shows)"),
    ("provider", "query", "only executions of this provider (a provider name, or command)"),
    ("since", "query", "created at or after: epoch seconds or an ISO date (UTC unless given)"),
    ("until", "query", "created before: epoch seconds or an ISO date"),
    ("q", "query", "text inside the id, prompt, reason code or reason summary"),
    ("fold", "query", "schedule: each schedule's runs folded into its newest one"),
    ("cursor", "query", "the next_cursor of the previous page"),
)

_LIST_FILTERS = (
    ("status", "query", "only those in this status"),
    ("since", "query", "created at or after: epoch seconds or an ISO date"),
    ("cursor", "query", "the next_cursor of the previous page"),
)

API: tuple[ApiRoute, ...] = (
    ApiRoute("/api/runs", "runs", "Executions of every kind, newest first, 50 a page", _FILTERS),
    ApiRoute(
        "/api/runs/{run_id}",
        "run",
        "One execution: row, history, evidence, artifacts, usage, lineage, transcript",
        (("run_id", "path", "the execution's id"),),
    ),
    ApiRoute(
        "/api/flows/{flow_id}",
        "flow",
        "A flow (invocation): its row, its legs and the leg graph",
        (("flow_id", "path", "the invocation's id"),),
    ),
    ApiRoute(
        "/api/shows/{show_id}",
        "show",
        "A show and its plays by status",
        (("show_id", "path", "the show's id"),),
    ),
    ApiRoute(
        "/api/flows",
        "flows",
        "Flows (flow invocations), newest first, 50 a page",
        _LIST_FILTERS,
    ),
    ApiRoute("/api/shows", "shows", "Shows with their plays counted, newest first", _LIST_FILTERS),
    ApiRoute("/api/schedules", "schedules", "Schedules with their recent runs"),
    ApiRoute(
        "/api/schedules/{name}",
        "schedule",
        "One schedule: its definition, next fires, runs, success and cost over time",
        (("name", "path", "the schedule's name"),),
    ),
    ApiRoute(
        "/api/attention",
        "attention",
        "What needs a person now (the needs-you page; li attention --json)",
    ),
    ApiRoute("/api/workers", "workers", "Live workers"),
    ApiRoute("/api/teams", "teams", "Teams, active first, with members and messages counted"),
    ApiRoute(
        "/api/teams/{team_id}",
        "team",
        "One team: its members (unread and sent counts), its newest 500 messages (oldest "
        "first, with read receipts and the sending run) and its history",
        (("team_id", "path", "the team's id"),),
    ),
)


_UNAUTHORIZED = {
    "description": "the dashboard's token is needed (or was wrong): one line of text",
    "content": {"text/plain": {"schema": {"type": "string"}}},
}
_OPENAPI_DOCUMENT = {
    "description": "An OpenAPI 3.1 document (this one)",
    "type": "object",
    "required": ["openapi", "info", "paths"],
    "properties": {
        "openapi": {"type": "string", "pattern": "^3\\.1\\."},
        "info": {"type": "object", "required": ["title", "version"]},
        "paths": {"type": "object"},
        "components": {"type": "object"},
    },
}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": ref("Error")}}}


def _responses(route: ApiRoute) -> dict[str, Any]:
    """What ``route`` answers: its page's data, and the refusals it can make."""
    found: dict[str, Any] = {
        "200": {
            "description": "the page's data",
            "content": {"application/json": {"schema": ref(RESPONSES[route.handler])}},
        },
        "401": _UNAUTHORIZED,
    }
    if any(where == "query" for _, where, _ in route.params):
        found["400"] = _error("a query parameter the page cannot use")
    if any(where == "path" for _, where, _ in route.params):
        found["404"] = _error("no such record")
    return found


def openapi_document() -> dict[str, Any]:
    """OpenAPI 3.1 for ``API`` (and the document itself)."""
    paths: dict[str, Any] = {}
    for route in API:
        paths[route.path] = {
            "get": {
                "summary": route.summary,
                "operationId": route.handler,
                "parameters": [
                    {
                        "name": name,
                        "in": where,
                        "required": where == "path",
                        "description": text,
                        "schema": {"type": "string"},
                    }
                    for name, where, text in route.params
                ],
                "responses": _responses(route),
            }
        }
    paths["/api/openapi.json"] = {
        "get": {
            "summary": "This document",
            "operationId": "openapi",
            "responses": {
                "200": {
                    "description": "OpenAPI 3.1",
                    "content": {"application/json": {"schema": ref("OpenApiDocument")}},
                },
                "401": _UNAUTHORIZED,
            },
        }
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "lirun dashboard",
            "version": "1",
            "description": "Read-only JSON over the lirun record. Live changes: GET /events "
            "(Server-Sent Events, event `transition`, and `team` with the team's id when it "
            "has new messages; reconnect with Last-Event-ID).",
        },
        "paths": paths,
        "components": {"schemas": {**components(), "OpenApiDocument": _OPENAPI_DOCUMENT}},
    }

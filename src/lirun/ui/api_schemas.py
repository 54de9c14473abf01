"""The JSON Schemas of the dashboard's API answers: the OpenAPI document's components.

Where an answer holds a shape a ``--json`` output prints too (a flow row, a schedule, a
worker, a team, an attention item, ...), its component is derived from the schema shipped
in ``lirun.schemas`` rather than written twice. The API's answers carry no ``"schema"``
key (they are not ``--json`` outputs, docs/json.md), so a derived component is the shipped
schema without that key; the rest is what the page's view adds, written here. Every
object allows keys it does not list, as the shipped schemas do: a row carries its
record's database columns, which may grow.
"""

from __future__ import annotations

import copy
from typing import Any

from lirun.schemas import load_schema
from lirun.store.ui_reads import RUN_KINDS

Schema = dict[str, Any]

_STR: Schema = {"type": "string"}
_STR_OR_NULL: Schema = {"type": ["string", "null"]}
_NUM: Schema = {"type": "number"}
_NUM_OR_NULL: Schema = {"type": ["number", "null"]}
_INT: Schema = {"type": "integer"}
_BOOL: Schema = {"type": "boolean"}
_OBJ: Schema = {"type": "object"}
_OBJ_OR_NULL: Schema = {"type": ["object", "null"]}


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


def _object(required: dict[str, Schema], optional: dict[str, Schema] | None = None) -> Schema:
    """An object with these keys always present (``required``) and these sometimes."""
    return {
        "type": "object",
        "required": sorted(required),
        "properties": {**required, **(optional or {})},
        "additionalProperties": True,
    }


def _extended(base: str, adds: dict[str, Schema], description: str) -> Schema:
    """Component ``base`` with the keys a view adds to each of its rows."""
    return {"description": description, "allOf": [ref(base), _object(adds)]}


def shipped(
    name: str,
    *,
    replace: dict[str, Schema] | None = None,
    rename: dict[str, str] | None = None,
) -> Schema:
    """The shipped schema ``lirun.<name>`` without its ``"schema"`` key (the API's answers
    carry none), its ``$schema`` and ``x-`` annotations dropped (the OpenAPI document
    names its dialect once). ``replace``: properties the API types otherwise; ``rename``:
    keys the API names otherwise (``--json`` name → the API's)."""
    loaded = copy.deepcopy(load_schema(name))
    for old, new in (rename or {}).items():
        loaded["properties"][new] = loaded["properties"].pop(old)
        loaded["required"] = [new if k == old else k for k in loaded["required"]]
    title = loaded.pop("title")
    for key in [k for k in loaded if k == "$schema" or k.startswith("x-")]:
        del loaded[key]
    loaded["properties"].pop("schema", None)
    loaded["required"] = [k for k in loaded["required"] if k != "schema"]
    loaded["properties"].update(replace or {})
    loaded["description"] = f"{loaded.get('description', '')} ({title} without its schema key)"
    return loaded


def _property(name: str, key: str) -> Schema:
    """A property's schema inside the shipped schema ``name`` (its items for an array)."""
    found: Schema = copy.deepcopy(load_schema(name)["properties"][key])
    return found


_EVIDENCE = _array(  # what the record cites for its status (docs/outcome.md)
    {"type": "object", "properties": {"kind": _STR}, "additionalProperties": True}
)
_PAGE = {  # what every paginated list adds beside its rows
    "filters": {"type": "object", "additionalProperties": _STR},
    "next_cursor": {**_STR_OR_NULL, "description": "pass as cursor for the next page"},
    "next_query": {**_STR_OR_NULL, "description": "the next page's query string"},
    "first_page": _BOOL,
    "statuses": _array(_STR),
}


def components() -> dict[str, Schema]:
    """Every component the API's responses reference, by name."""
    team_members = _property("team_detail", "members")
    return {
        "Error": {
            "description": "Why the request was refused (4xx of /api/...)",
            "type": "object",
            "required": ["error"],
            "properties": {"error": _STR},
            "additionalProperties": False,
        },
        "Transition": _object(
            {
                "id": _STR,
                "entity_type": _STR,
                "entity_id": _STR,
                "previous_status": _STR_OR_NULL,
                "status": _STR,
                "reason_code": _STR_OR_NULL,
                "reason_summary": _STR_OR_NULL,
                "source": _STR_OR_NULL,
                "actor": _STR_OR_NULL,
                "created_at": _NUM,
                "evidence_refs": {"type": ["array", "null"]},
                "metadata": _OBJ_OR_NULL,
            }
        )
        | {"description": "One change of a record's status, oldest first (its history)"},
        # Shapes the --json outputs print too, without their schema key.
        "StatusRow": shipped("status_row"),
        "Invocation": shipped("invocation"),
        "FlowResult": shipped("flow_result"),
        "FlowRow": shipped("flow_row"),
        "ShowRow": shipped("show_row"),
        "Schedule": shipped("schedule"),
        "ScheduleRun": shipped("schedule_run"),
        "Worker": shipped("worker"),
        "Team": shipped(
            "team",
            replace={"members": {**_INT, "description": "how many members it has (/api/teams)"}},
        ),
        "TeamMember": team_members["items"],
        # The API's message is the stored row: its text is the column ``body``.
        "TeamMessage": shipped("team_message", rename={"text": "body"}),
        "AttentionItem": shipped("attention_item"),
        # What the pages add.
        "RunsRow": _object(
            {
                "kind": {"enum": [*RUN_KINDS, "show"]},
                "id": _STR,
                "status": _STR_OR_NULL,
                "reason_code": _STR_OR_NULL,
                "reason_summary": _STR_OR_NULL,
                "label": _STR_OR_NULL,
                "prompt": _STR_OR_NULL,
                "created_at": _NUM_OR_NULL,
                "ended_at": _NUM_OR_NULL,
                "duration": _NUM_OR_NULL,
                "href": _STR,
            },
            {
                "parent_id": _STR_OR_NULL,
                "made_kind": _STR_OR_NULL,
                "made_id": _STR_OR_NULL,
                "provider": _STR_OR_NULL,
                "model": _STR_OR_NULL,
                "input_tokens": {"type": ["integer", "null"]},
                "output_tokens": {"type": ["integer", "null"]},
                "cost_usd": _NUM_OR_NULL,
                "duration_s": _NUM_OR_NULL,
                "pruned_at": _NUM_OR_NULL,
            },
        )
        | {
            "description": "One execution of any kind on the runs page (kind=show: a show, "
            "without the parent, made, provider and usage keys)"
        },
        "RunsPage": _object(
            {
                "runs": _array(ref("RunsRow")),
                **_PAGE,
                "kinds": _array(_STR),
            }
        ),
        "RunPage": _object(
            {
                "run": ref("StatusRow"),
                "duration": _NUM_OR_NULL,
                "transitions": _array(ref("Transition")),
                "evidence": _EVIDENCE,
                "verification": {**_OBJ, "description": "the artifact contract's verdict"},
                "contract": {**_OBJ, "description": "the artifact contract it ran under"},
                "artifacts": _array(
                    _object(
                        {"path": _STR, "size": _INT},
                        {"href": _STR, "media_type": _STR_OR_NULL},
                    )
                ),
                "usage": {"type": "object", "additionalProperties": {"type": "number"}},
                "lineage": ref("Lineage"),
                "play_of": {
                    "oneOf": [
                        {"type": "null"},
                        _object(
                            {
                                "play_id": _STR,
                                "show_id": _STR,
                                "role": {"enum": ["work", "gate"]},
                            },
                            {"play": _STR_OR_NULL, "attempt": {"type": ["integer", "null"]}},
                        ),
                    ]
                },
                "transcript": ref("Transcript"),
                "admin_events": _array(ref("AdminEvent")),
            }
        ),
        "Lineage": _object(
            {
                "resumed_as": _array(
                    _object({"id": _STR, "status": _STR_OR_NULL, "created_at": _NUM})
                ),
                "plays": _array(
                    _object({"id": _STR, "show_id": _STR, "name": _STR, "status": _STR_OR_NULL})
                ),
                "schedule_runs": _array(
                    _object(
                        {
                            "id": _STR,
                            "schedule_id": _STR_OR_NULL,
                            "status": _STR_OR_NULL,
                            "schedule_name": {**_STR_OR_NULL, "description": "none for li submit"},
                        }
                    )
                ),
            }
        )
        | {
            "description": "What an execution is linked to besides its own columns: the "
            "executions that resumed it, the plays it backs, the schedule runs that made it"
        },
        "Transcript": _object(
            {
                "state": {"enum": ["ok", "empty", "missing", "remote"]},
                "entries": _array(
                    _object(
                        {
                            "kind": {
                                "enum": [
                                    "assistant",
                                    "tool_call",
                                    "tool_result",
                                    "error",
                                    "system",
                                    "usage",
                                    "stdout",
                                    "stderr",
                                ]
                            },
                            "title": _STR,
                            "text": _STR,
                            "folded": _BOOL,
                            "error": _BOOL,
                        }
                    )
                ),
                "host": {**_STR_OR_NULL, "description": "the run's host, when it is not this"},
                "truncated": {**_BOOL, "description": "only the latest 4 MB of a file shown"},
                "files": _array(_STR),
                "signature": {**_STR, "description": "since= of the page that follows it"},
            }
        )
        | {"description": "A run's transcript, read from its stream files"},
        "AdminEvent": _object(
            {
                "id": _STR,
                "event_type": _STR,
                "target_type": _STR_OR_NULL,
                "target_id": _STR_OR_NULL,
                "actor": _STR_OR_NULL,
                "justification": _STR_OR_NULL,
                "payload": {"description": "what the event changed (decoded JSON)"},
                "created_at": _NUM,
            }
        )
        | {"description": "An audited change an administrator made (li override)"},
        "FlowNode": _object(
            {
                "id": _STR,
                "status": _STR_OR_NULL,
                "depends_on": _array(_STR),
                "href": _STR_OR_NULL,
            }
        ),
        "FlowPage": _object(
            {
                "flow": ref("Invocation"),
                "duration": _NUM_OR_NULL,
                "report": {"oneOf": [{"type": "null"}, ref("FlowResult")]},
                "sessions": _array(ref("StatusRow")),
                "svg": {**_STR_OR_NULL, "description": "the leg graph as SVG"},
                "nodes": _array(ref("FlowNode")),
                "transitions": _array(ref("Transition")),
            }
        ),
        "FlowsRow": _extended(
            "FlowRow",
            {"name": _STR, "duration": _NUM_OR_NULL, "href": _STR},
            "A flow on the flows page: its row, its file's name, duration, link",
        ),
        "FlowsPage": _object({"flows": _array(ref("FlowsRow")), **_PAGE}),
        "ShowsRow": _extended(
            "ShowRow",
            {
                "plays_total": _INT,
                "plays_merged": _INT,
                "plays_need_you": _INT,
                "duration": _NUM_OR_NULL,
                "href": _STR,
            },
            "A show on the shows page with its plays counted",
        ),
        "ShowsPage": _object({"shows": _array(ref("ShowsRow")), **_PAGE}),
        "GateVerdict": _object(
            {
                "verdict": _STR,
                "chip": _STR,
                "reason": _STR_OR_NULL,
                "session_id": _STR_OR_NULL,
                "commit": _STR_OR_NULL,
            }
        ),
        "Show": _object(
            {
                "id": _STR,
                "topic": _STR_OR_NULL,
                "status": _STR,
                "status_reason_code": _STR_OR_NULL,
                "status_reason_summary": _STR_OR_NULL,
                "repo": _STR_OR_NULL,
                "base": _STR_OR_NULL,
                "integration": _STR_OR_NULL,
                "integration_head": {**_STR_OR_NULL, "description": "as git has it now"},
                "created_at": _NUM,
                "ended_at": _NUM_OR_NULL,
            }
        )
        | {"description": "A show's record, with its integration branch's head now"},
        "Play": _object(
            {
                "id": _STR,
                "show_id": _STR,
                "name": _STR,
                "status": _STR,
                "status_reason_code": _STR_OR_NULL,
                "status_reason_summary": _STR_OR_NULL,
                "session_id": _STR_OR_NULL,
                "created_at": _NUM,
                "ended_at": _NUM_OR_NULL,
            }
        )
        | {"description": "A play with every column the shows engine gives it"},
        "BoardPlay": {
            "allOf": [
                ref("Play"),
                _object(
                    {
                        "extras": _OBJ,
                        "gate": {"oneOf": [{"type": "null"}, ref("GateVerdict")]},
                        "provider": {"oneOf": [{"type": "null"}, ref("ProviderStop")]},
                    }
                ),
            ]
        },
        "ProviderStop": _object(
            {
                "session_id": _STR,
                "reason_code": _STR,
                "class": _STR,
                "retryable": _BOOL,
                "message": _STR_OR_NULL,
                "advice": _STR,
            }
        )
        | {
            "description": "What its provider said when it stopped a play "
            "(play.escalated.provider), and what a person does about it"
        },
        "Conversation": _object(
            {
                "team": ref("Team"),
                "members": _array(ref("TeamMember")),
                "messages": _array(
                    {
                        "allOf": [
                            ref("TeamMessage"),
                            _object({"read_by": _array(_STR), "run_href": _STR_OR_NULL}),
                        ]
                    }
                ),
                "more": {**_INT, "description": "older messages not shown"},
            }
        ),
        "ShowPage": _object(
            {
                "show": ref("Show"),
                "final_gate": {"oneOf": [{"type": "null"}, ref("GateVerdict")]},
                "plays": _array(ref("Play")),
                "board": _array(_object({"status": _STR, "plays": _array(ref("BoardPlay"))})),
                "transitions": _array(ref("Transition")),
                "team": {"oneOf": [{"type": "null"}, ref("Conversation")]},
            }
        ),
        "CostBar": _object(
            {"x": _INT, "height": _NUM, "status": _STR_OR_NULL, "cost_usd": _NUM_OR_NULL}
        ),
        "ScheduleCell": _extended(
            "ScheduleRun",
            {"href": _STR, "cost_usd": _NUM_OR_NULL},
            "A schedule run as a cell of the strip, linked to what it made, with its cost",
        ),
        "SchedulesRow": _extended(
            "Schedule",
            {
                "recent": _array(ref("ScheduleCell")),
                "strip": _array(ref("ScheduleCell")),
                "next_fire": _NUM_OR_NULL,
                "success_rate": _NUM_OR_NULL,
                "cost_usd": _NUM,
                "chart": _array(ref("CostBar")),
            },
            "A schedule with its last 30 runs, newest first (the strip: oldest first)",
        ),
        "SchedulesPage": _object({"schedules": _array(ref("SchedulesRow"))}),
        "SchedulePage": _object(
            {
                "schedule": ref("Schedule"),
                "action": _STR,
                "next_fires": _array(_INT),
                "live_workers": _INT,
                "runs": _array(
                    {
                        "allOf": [
                            ref("ScheduleCell"),
                            _object({"duration": _NUM_OR_NULL}),
                        ]
                    }
                ),
                "success_rate": _NUM_OR_NULL,
                "ended": _INT,
                "succeeded": _INT,
                "cost_total_usd": _NUM_OR_NULL,
                "cost_per_run_usd": _NUM_OR_NULL,
                "chart": _array(ref("CostBar")),
                "strip": _array(ref("ScheduleCell")),
                "history": _array(ref("Transition")),
            }
        ),
        "AttentionPage": _object({"items": _array(ref("AttentionItem")), "count": _INT}),
        "WorkersRow": _extended(
            "Worker",
            {
                "runs": _array(
                    _object(
                        {
                            "id": _STR,
                            "action_kind": _STR_OR_NULL,
                            "status": _STR_OR_NULL,
                            "href": _STR,
                        }
                    )
                )
            },
            "A live worker with the schedule runs it holds, each linked to what it made",
        ),
        "WorkersPage": _object({"workers": _array(ref("WorkersRow"))}),
        "TeamsRow": _extended("Team", {"href": _STR}, "A team on the teams page"),
        "TeamsPage": _object({"teams": _array(ref("TeamsRow"))}),
        "TeamPage": {
            "allOf": [
                ref("Conversation"),
                _object(
                    {
                        "transitions": _array(ref("Transition")),
                        "owner_href": _STR_OR_NULL,
                    }
                ),
            ]
        },
    }

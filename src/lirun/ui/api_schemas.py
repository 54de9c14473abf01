"""The JSON Schemas of the dashboard's API answers: the OpenAPI document's components.

Where an answer holds a shape a ``--json`` output prints too (a flow row, a schedule, a
worker, a team, an attention item, ...), its component is derived from the schema shipped
in ``lirun.schemas`` rather than written twice. The API's answers carry no ``"schema"``
key (they are not ``--json`` outputs, docs/json.md), so a derived component is the shipped
schema without that key; the rest is what the page's view adds, written here (the
one-record pages' in ``api_detail_schemas``, the pieces in ``api_schema_kit``). Every
object allows keys it does not list, as the shipped schemas do: a row carries its
record's database columns, which may grow.
"""

from __future__ import annotations

from lirun.store.ui_reads import RUN_KINDS
from lirun.ui.api_detail_schemas import detail_components
from lirun.ui.api_schema_kit import (
    BOOL,
    INT,
    NUM,
    NUM_OR_NULL,
    OBJ_OR_NULL,
    STR,
    STR_OR_NULL,
    Schema,
    array,
    extended,
    obj,
    ref,
    shipped,
    shipped_property,
)

_PAGE = {  # what every paginated list adds beside its rows
    "filters": {"type": "object", "additionalProperties": STR},
    "next_cursor": {**STR_OR_NULL, "description": "pass as cursor for the next page"},
    "next_query": {**STR_OR_NULL, "description": "the next page's query string"},
    "first_page": BOOL,
    "statuses": array(STR),
}


def components() -> dict[str, Schema]:
    """Every component the API's responses reference, by name."""
    team_members = shipped_property("team_detail", "members")
    return {
        "Error": {
            "description": "Why the request was refused (4xx of /api/...)",
            "type": "object",
            "required": ["error"],
            "properties": {"error": STR},
            "additionalProperties": False,
        },
        "Transition": obj(
            {
                "id": STR,
                "entity_type": STR,
                "entity_id": STR,
                "previous_status": STR_OR_NULL,
                "status": STR,
                "reason_code": STR_OR_NULL,
                "reason_summary": STR_OR_NULL,
                "source": STR_OR_NULL,
                "actor": STR_OR_NULL,
                "created_at": NUM,
                "evidence_refs": {"type": ["array", "null"]},
                "metadata": OBJ_OR_NULL,
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
            replace={"members": {**INT, "description": "how many members it has (/api/teams)"}},
        ),
        "TeamMember": team_members["items"],
        # The API's message is the stored row: its text is the column ``body``.
        "TeamMessage": shipped("team_message", rename={"text": "body"}),
        "AttentionItem": shipped("attention_item"),
        # What the pages add.
        "RunsRow": obj(
            {
                "kind": {"enum": [*RUN_KINDS, "show"]},
                "id": STR,
                "status": STR_OR_NULL,
                "reason_code": STR_OR_NULL,
                "reason_summary": STR_OR_NULL,
                "label": {
                    **STR_OR_NULL,
                    "description": "its name: a leg, a flow's file, a play, a schedule; a "
                    "gate run's play and show (gate of play P in show S)",
                },
                "prompt": {
                    **STR_OR_NULL,
                    "description": "its prompt, at most 500 characters and then … (the "
                    "whole one is in the answer prompt_href names); a team member's without "
                    "the team preamble lirun put before it",
                },
                "created_at": NUM_OR_NULL,
                "ended_at": NUM_OR_NULL,
                "duration": NUM_OR_NULL,
                "href": STR,
                "kind_label": {**STR, "description": "the kind as the list says it (flow)"},
                "label_title": {**STR_OR_NULL, "description": "the name in full"},
                "what": {
                    **STR_OR_NULL,
                    "description": "what it ran when its prompt does not say: a command as "
                    "typed, a schedule run's action (null where prompt says it)",
                },
                "command": {
                    "type": ["array", "null"],
                    "items": STR,
                    "description": "a run's argv (null for an agent run or another kind)",
                },
                "command_line": {**STR_OR_NULL, "description": "the argv as a person types it"},
            },
            {
                "origin": {
                    **STR_OR_NULL,
                    "description": "an invocation's kind (flow, manual), a schedule run's action",
                },
                "folded": {**INT, "description": "with fold=schedule: runs folded into this row"},
                "prompt_truncated": {**BOOL, "description": "whether prompt was cut"},
                "prompt_href": {
                    **STR,
                    "description": "when prompt was cut: the answer with it whole "
                    "(/api/runs/{id}, /api/flows/{id})",
                },
                "parent_id": STR_OR_NULL,
                "made_kind": STR_OR_NULL,
                "made_id": STR_OR_NULL,
                "provider": STR_OR_NULL,
                "model": STR_OR_NULL,
                "input_tokens": {"type": ["integer", "null"]},
                "output_tokens": {"type": ["integer", "null"]},
                "cost_usd": NUM_OR_NULL,
                "duration_s": NUM_OR_NULL,
                "pruned_at": NUM_OR_NULL,
            },
        )
        | {
            "description": "One execution of any kind on the runs page (kind=show: a show, "
            "without the parent, made, provider and usage keys)"
        },
        "RunsPage": obj(
            {
                "runs": array(ref("RunsRow")),
                **_PAGE,
                "kinds": array(STR),
            }
        ),
        "FlowsRow": extended(
            "FlowRow",
            {
                "name": STR,
                "duration": NUM_OR_NULL,
                "href": STR,
                "prompt_truncated": {
                    **BOOL,
                    "description": "whether prompt was cut to 500 characters and …",
                },
            },
            "A flow on the flows page: its row, its file's name, duration, link",
            {
                "prompt_href": {**STR, "description": "when cut: the answer with it whole"},
                "pruned_at": {**NUM_OR_NULL, "description": "when li gc pruned it"},
                "pruned_by": {**STR_OR_NULL, "description": "who pruned it"},
            },
        ),
        "FlowsPage": obj({"flows": array(ref("FlowsRow")), **_PAGE}),
        "ShowsRow": extended(
            "ShowRow",
            {
                "plays_total": INT,
                "plays_merged": INT,
                "plays_need_you": INT,
                "duration": NUM_OR_NULL,
                "href": STR,
            },
            "A show on the shows page with its plays counted",
        ),
        "ShowsPage": obj({"shows": array(ref("ShowsRow")), **_PAGE}),
        "Conversation": obj(
            {
                "team": ref("Team"),
                "members": array(ref("TeamMember")),
                "messages": array(
                    {
                        "allOf": [
                            ref("TeamMessage"),
                            obj({"read_by": array(STR), "run_href": STR_OR_NULL}),
                        ]
                    }
                ),
                "more": {**INT, "description": "older messages not shown"},
            }
        ),
        "CostBar": obj({"x": INT, "height": NUM, "status": STR_OR_NULL, "cost_usd": NUM_OR_NULL}),
        "ScheduleCell": extended(
            "ScheduleRun",
            {"href": STR, "cost_usd": NUM_OR_NULL},
            "A schedule run as a cell of the strip, linked to what it made, with its cost",
        ),
        "SchedulesRow": extended(
            "Schedule",
            {
                "recent": array(ref("ScheduleCell")),
                "strip": array(ref("ScheduleCell")),
                "next_fire": NUM_OR_NULL,
                "success_rate": NUM_OR_NULL,
                "overdue": {**BOOL, "description": "its next fire time is past"},
                "cost_usd": {**NUM_OR_NULL, "description": "none when no run says its cost"},
                "cost_per_run_usd": NUM_OR_NULL,
                "costed_runs": {**INT, "description": "the runs whose cost is known"},
                "chart": array(ref("CostBar")),
            },
            "A schedule with its last 30 runs, newest first (the strip: oldest first)",
        ),
        "SchedulesPage": obj(
            {
                "schedules": array(ref("SchedulesRow")),
                "live_workers": {**INT, "description": "workers live to fire what is due"},
            }
        ),
        "SchedulePage": obj(
            {
                "schedule": ref("Schedule"),
                "action": STR,
                "next_fires": array(INT),
                "live_workers": INT,
                "runs": array(
                    {
                        "allOf": [
                            ref("ScheduleCell"),
                            obj({"duration": NUM_OR_NULL}),
                        ]
                    }
                ),
                "success_rate": NUM_OR_NULL,
                "ended": INT,
                "succeeded": INT,
                "cost_total_usd": NUM_OR_NULL,
                "cost_per_run_usd": NUM_OR_NULL,
                "chart": array(ref("CostBar")),
                "strip": array(ref("ScheduleCell")),
                "history": array(ref("Transition")),
            },
            {
                "events": {
                    "description": "a poll, webhook or chain schedule's events (newest 50) and "
                    "the run each started (schedule_run_id null: the baseline of its first "
                    "poll); a chain's also name the parent run that fired each",
                    **obj(
                        {
                            "seen": INT,
                            "fired": INT,
                            "recent": array(
                                obj(
                                    {"event_key": STR},
                                    {
                                        "parent": obj(
                                            {
                                                "id": STR,
                                                "status": STR_OR_NULL,
                                                "href": STR_OR_NULL,
                                            }
                                        ),
                                        "chain_depth": {"type": ["integer", "null"]},
                                    },
                                )
                            ),
                        }
                    ),
                },
                "after": {
                    "description": "a chain schedule's trigger: the schedule whose runs' ends "
                    "fire it (href null: deleted), the outcome, and the statuses it matches",
                    **obj(
                        {
                            "schedule": STR,
                            "outcome": STR,
                            "verb": STR,
                            "statuses": array(STR),
                            "href": STR_OR_NULL,
                        }
                    ),
                },
            },
        ),
        **detail_components(),
        "AttentionPage": obj({"items": array(ref("AttentionItem")), "count": INT}),
        "WorkersRow": extended(
            "Worker",
            {
                "runs": array(
                    obj(
                        {
                            "id": STR,
                            "action_kind": STR_OR_NULL,
                            "status": STR_OR_NULL,
                            "href": STR,
                        }
                    )
                )
            },
            "A live worker with the schedule runs it holds, each linked to what it made",
        ),
        "WorkersPage": obj({"workers": array(ref("WorkersRow"))}),
        "TeamsRow": extended("Team", {"href": STR}, "A team on the teams page"),
        "TeamsPage": obj({"teams": array(ref("TeamsRow"))}),
        "TeamPage": {
            "allOf": [
                ref("Conversation"),
                obj(
                    {
                        "transitions": array(ref("Transition")),
                        "owner_href": STR_OR_NULL,
                    }
                ),
            ]
        },
    }

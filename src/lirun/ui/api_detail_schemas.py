"""The JSON Schemas of the dashboard API's one-record pages (a run, a flow, a show):
the record as stored, and what the page adds to it — its history, its links, whether
its owner still runs it (``Liveness``), its evidence said in words (``Explained``)."""

from __future__ import annotations

from lirun.ui.api_schema_kit import (
    BOOL,
    INT,
    NUM,
    NUM_OR_NULL,
    OBJ,
    STR,
    STR_OR_NULL,
    Schema,
    array,
    obj,
    ref,
)

__all__ = ["detail_components"]

# null when the record is not running (a show: not active)
_LIVENESS: Schema = {"oneOf": [{"type": "null"}, ref("Liveness")]}

_EVIDENCE = array(  # what the record cites for its status (docs/outcome.md)
    {"type": "object", "properties": {"kind": STR}, "additionalProperties": True}
)


def detail_components() -> dict[str, Schema]:
    """The components of /api/runs/{id}, /api/flows/{id} and /api/shows/{id}, by name."""
    return {
        "Liveness": obj(
            {
                "verdict": {"enum": ["alive", "dead", "none"]},
                "summary": STR,
                "reap": {**STR_OR_NULL, "description": "the command that reaps or takes it over"},
                "advice": STR_OR_NULL,
                "reason_code": STR_OR_NULL,
            }
        )
        | {"description": "Whether a running record's owner still runs it (li status's)"},
        "Explained": obj(
            {
                "kind": STR,
                "title": STR,
                "sentence": STR,
                "head": array(STR),
                "rows": array(array(STR)),
            }
        )
        | {"description": "One evidence entry said in words, with a small table or none"},
        "Work": obj(
            {
                "summary": STR,
                "reply": BOOL,
                "checked": BOOL,
                "commits": {"type": ["integer", "null"]},
                "commit_ids": array(STR),
                "files_changed": {"type": ["integer", "null"]},
                "tree_changed": {"type": ["boolean", "null"]},
                "artifacts": INT,
            }
        )
        | {
            "description": "What an ended execution's evidence says it did: 'reply only', "
            "'reply, 1 commit (abc1234), 3 files changed' (li status's evidence line); "
            "null while it runs"
        },
        "RunPage": obj(
            {
                "run": ref("StatusRow"),
                "duration": NUM_OR_NULL,
                "transitions": array(ref("Transition")),
                "evidence": _EVIDENCE,
                "verification": {**OBJ, "description": "the artifact contract's verdict"},
                "contract": {**OBJ, "description": "the artifact contract it ran under"},
                "artifacts": array(
                    obj(
                        {"path": STR, "size": INT},
                        {"href": STR, "media_type": STR_OR_NULL},
                    )
                ),
                "artifacts_served": {
                    **STR_OR_NULL,
                    "description": "null when its artifacts are served; else why not (its "
                    "record names a directory other than its own run's, as --save DIR does)",
                },
                "usage": {"type": "object", "additionalProperties": {"type": "number"}},
                "lineage": ref("Lineage"),
                "play_of": {
                    "oneOf": [
                        {"type": "null"},
                        obj(
                            {
                                "play_id": STR,
                                "show_id": STR,
                                "role": {"enum": ["work", "gate"]},
                            },
                            {"play": STR_OR_NULL, "attempt": {"type": ["integer", "null"]}},
                        ),
                    ]
                },
                "transcript": ref("Transcript"),
                "admin_events": array(ref("AdminEvent")),
                "liveness": _LIVENESS,
                "explained": array(ref("Explained")),
                "work": {"oneOf": [{"type": "null"}, ref("Work")]},
                "command_line": {**STR_OR_NULL, "description": "a command run's argv as typed"},
            },
            {"label": {**STR_OR_NULL, "description": "a gate run's play and show"}},
        ),
        "Lineage": obj(
            {
                "resumed_as": array(obj({"id": STR, "status": STR_OR_NULL, "created_at": NUM})),
                "plays": array(
                    obj({"id": STR, "show_id": STR, "name": STR, "status": STR_OR_NULL})
                ),
                "schedule_runs": array(
                    obj(
                        {
                            "id": STR,
                            "schedule_id": STR_OR_NULL,
                            "status": STR_OR_NULL,
                            "schedule_name": {**STR_OR_NULL, "description": "none for li submit"},
                        }
                    )
                ),
            }
        )
        | {
            "description": "What an execution is linked to besides its own columns: the "
            "executions that resumed it, the plays it backs, the schedule runs that made it"
        },
        "Transcript": obj(
            {
                "state": {"enum": ["ok", "empty", "missing", "remote"]},
                "entries": array(
                    obj(
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
                            "title": STR,
                            "text": STR,
                            "folded": BOOL,
                            "error": BOOL,
                        }
                    )
                ),
                "host": {**STR_OR_NULL, "description": "the run's host, when it is not this"},
                "truncated": {**BOOL, "description": "only the latest 4 MB of a file shown"},
                "files": array(STR),
                "signature": {**STR, "description": "since= of the page that follows it"},
            }
        )
        | {"description": "A run's transcript, read from its stream files"},
        "AdminEvent": obj(
            {
                "id": STR,
                "event_type": STR,
                "target_type": STR_OR_NULL,
                "target_id": STR_OR_NULL,
                "actor": STR_OR_NULL,
                "justification": STR_OR_NULL,
                "payload": {"description": "what the event changed (decoded JSON)"},
                "created_at": NUM,
            }
        )
        | {"description": "An audited change an administrator made (li override)"},
        "FlowNode": obj(
            {
                "id": STR,
                "status": STR_OR_NULL,
                "depends_on": array(STR),
                "href": STR_OR_NULL,
            }
        ),
        "FlowPage": obj(
            {
                "flow": ref("Invocation"),
                "duration": NUM_OR_NULL,
                "report": {"oneOf": [{"type": "null"}, ref("FlowResult")]},
                "runs": array(
                    {
                        "allOf": [
                            ref("StatusRow"),
                            obj(
                                {},
                                {
                                    "item": {"description": "a fan-out instance's item"},
                                    "reused_from": {
                                        **STR_OR_NULL,
                                        "description": "a leg reused from the invocation "
                                        "this one resumed: the invocation it ran in",
                                    },
                                },
                            ),
                        ]
                    }
                ),
                "sessions": {
                    **array(ref("StatusRow")),
                    "deprecated": True,
                    "description": "the old key of runs, the same list, kept for this version",
                },
                "svg": {**STR_OR_NULL, "description": "the leg graph as SVG"},
                "nodes": array(ref("FlowNode")),
                "transitions": array(ref("Transition")),
                "liveness": _LIVENESS,
                "file_name": {**STR, "description": "the flow file's name (skill: its path)"},
            }
        ),
        "GateVerdict": obj(
            {
                "verdict": STR,
                "chip": STR,
                "reason": STR_OR_NULL,
                "session_id": STR_OR_NULL,
                "commit": STR_OR_NULL,
            }
        ),
        "Show": obj(
            {
                "id": STR,
                "topic": STR_OR_NULL,
                "status": STR,
                "status_reason_code": STR_OR_NULL,
                "status_reason_summary": STR_OR_NULL,
                "repo": STR_OR_NULL,
                "base": STR_OR_NULL,
                "integration": STR_OR_NULL,
                "integration_head": {**STR_OR_NULL, "description": "as git has it now"},
                "created_at": NUM,
                "ended_at": NUM_OR_NULL,
            }
        )
        | {"description": "A show's record, with its integration branch's head now"},
        "Play": obj(
            {
                "id": STR,
                "show_id": STR,
                "name": STR,
                "status": STR,
                "status_reason_code": STR_OR_NULL,
                "status_reason_summary": STR_OR_NULL,
                "session_id": STR_OR_NULL,
                "created_at": NUM,
                "ended_at": NUM_OR_NULL,
            }
        )
        | {"description": "A play with every column the shows engine gives it"},
        "BoardPlay": {
            "allOf": [
                ref("Play"),
                obj(
                    {
                        "extras": OBJ,
                        "feedback": {
                            **STR_OR_NULL,
                            "description": "for its next attempt (none once merged)",
                        },
                        "by_hand": {
                            "oneOf": [
                                {"type": "null"},
                                obj({"actor": STR_OR_NULL, "justification": STR_OR_NULL}),
                            ],
                            "description": "who recorded a merge lirun did not make, and why",
                        },
                        "file_order": {
                            "type": ["integer", "null"],
                            "description": "its place in the show file, from 1",
                        },
                        "gate": {"oneOf": [{"type": "null"}, ref("GateVerdict")]},
                        "depends_on": array(
                            obj({"name": STR, "id": STR_OR_NULL})
                            | {"description": "id null: no play of that name in the show"}
                        ),
                        "no_attempt_left": {
                            **BOOL,
                            "description": "every attempt used and not merged: no feedback "
                            "goes to another",
                        },
                        "provider": {"oneOf": [{"type": "null"}, ref("ProviderStop")]},
                    }
                ),
            ]
        },
        "ProviderStop": obj(
            {
                "session_id": STR,
                "reason_code": STR,
                "class": STR,
                "retryable": BOOL,
                "message": STR_OR_NULL,
                "advice": STR,
            }
        )
        | {
            "description": "What its provider said when it stopped a play "
            "(play.escalated.provider), and what a person does about it"
        },
        "ShowPage": obj(
            {
                "show": ref("Show"),
                "final_gate": {"oneOf": [{"type": "null"}, ref("GateVerdict")]},
                "head_gate": {
                    "oneOf": [{"type": "null"}, ref("GateVerdict")],
                    "description": "the gate last run on a head a person moved: not the final gate",
                },
                "has_final_gate": {**BOOL, "description": "the show file has a final gate"},
                "liveness": _LIVENESS,
                "plays": array(ref("Play")),
                "board": array(obj({"status": STR, "plays": array(ref("BoardPlay"))})),
                "transitions": array(ref("Transition")),
                "team": {"oneOf": [{"type": "null"}, ref("Conversation")]},
            }
        ),
    }

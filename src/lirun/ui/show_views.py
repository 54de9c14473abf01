"""The show page and its JSON twin: a show's facts and its plays as a board by status,
saying only what the record says (a moved head's gate is not the final gate; a play
merged by hand says who recorded it, without the feedback of its failed attempt)."""

from __future__ import annotations

from typing import Any

from lirun.lifecycle import PLAY_STATUS_ORDER
from lirun.shows.gitwork import current_head
from lirun.shows.report import provider_failure
from lirun.store import Store
from lirun.store.rows import PlayRow
from lirun.ui.liveness_view import liveness
from lirun.ui.team_views import show_team

__all__ = ["gate_verdict", "show_view"]


# A play row's columns since 0001; the shows engine adds its own (attempt, merge commit,
# gate verdict, worktree, ...), shown as they come.
PLAY_BASE_COLUMNS = frozenset(
    (
        "id",
        "show_id",
        "name",
        "session_id",
        "ended_at",
        "status",
        "status_reason_code",
        "status_reason_summary",
        "status_evidence_refs",
        "created_at",
        "updated_at",
    )
)
# The shows engine's columns the board reads as what they mean (the rest show as they come).
PLAY_READ_COLUMNS = frozenset(
    (
        "attempt",
        "attempts",
        "merge_sha",
        "merged_at",
        "gate_json",
        "candidate_sha",
        "branch",
        "worktree",
    )
)
# Columns the board says in its own words (feedback, the order in the show file).
PLAY_SAID_COLUMNS = frozenset(("feedback", "position", "depends_on_json"))
GATE_CHIPS = {"pass": "passed", "fail": "failed", "interrupted": "aborted"}


def gate_verdict(gate: Any) -> dict[str, Any] | None:
    """A gate record (``plays.gate_json``, ``shows.final_gate_json``) as the board shows
    it: the verdict, a chip status, the reason, the gate's run and the commit it judged."""
    if not isinstance(gate, dict) or not gate.get("verdict"):
        return None
    verdict = str(gate["verdict"])
    return {
        "verdict": verdict,
        "chip": GATE_CHIPS.get(verdict, verdict),
        "reason": gate.get("reason"),
        "session_id": gate.get("session_id"),
        "commit": gate.get("commit"),
    }


def _provider_stop(store: Store, play: PlayRow) -> dict[str, Any] | None:
    """For a play its provider stopped (``play.escalated.provider``): what the provider
    said on its last execution and what a person does about it."""
    if play.status_reason_code != "play.escalated.provider" or not play.session_id:
        return None
    return provider_failure(store.sessions.get(play.session_id))


def _merged_by(store: Store, play: PlayRow) -> dict[str, Any]:
    """Who recorded a merge lirun did not make, and why (the override's admin event)."""
    for event in reversed(store.list_admin_events(play.id)):
        payload = event.payload or {}
        if isinstance(payload, dict) and payload.get("new_status") == "merged":
            return {"actor": event.actor, "justification": event.justification}
    return {"actor": None, "justification": None}


def depends_on(names: Any, plays: dict[str, str]) -> list[dict[str, Any]]:
    """A play's dependencies as the board names them: each by name, with the id of the
    play of that name in the show (None: no play of that name, a typo in the file)."""
    if not isinstance(names, list):
        return []
    return [{"name": str(n), "id": plays.get(str(n))} for n in names]


def no_attempt_left(play: PlayRow) -> bool:
    """Whether a play not merged has used every attempt it was given (none comes next)."""
    if play.status == "merged" or play.attempts is None:
        return False
    return int(play.attempt or 0) >= int(play.attempts)


def show_view(store: Store, show_id: str) -> dict[str, Any] | None:
    """A show and its plays, grouped by status for the board."""
    show = store.shows.get(show_id)
    if show is None:
        return None
    row = {**show.as_dict(), "integration_head": current_head(show)}  # git's, not the record's
    rows = store.ui.show_plays(show_id)
    plays = [play.as_dict() for play in rows]
    columns: dict[str, list[dict[str, Any]]] = {}
    by_name = {play.name: play.id for play in rows}
    for play, fields in zip(rows, plays, strict=True):
        extras = {
            k: v
            for k, v in fields.items()
            if k not in PLAY_BASE_COLUMNS | PLAY_READ_COLUMNS | PLAY_SAID_COLUMNS
            and v not in (None, "", [], {})
        }
        merged = play.status == "merged"
        card = {
            **fields,
            "extras": extras,
            # a merged play's last feedback was for an attempt that is over: not shown
            "feedback": None if merged else play.feedback,
            "by_hand": _merged_by(store, play) if merged and not play.merge_sha else None,
            "file_order": play.position + 1 if play.position is not None else None,
            "depends_on": depends_on(play.depends_on_json, by_name),
            "no_attempt_left": no_attempt_left(play),
            "gate": gate_verdict(play.gate_json),
            "provider": _provider_stop(store, play),
        }
        columns.setdefault(play.status, []).append(card)
    order = [s for s in PLAY_STATUS_ORDER if s in columns]
    order += [s for s in columns if s not in order]
    recorded = show.final_gate_json
    head_gate = isinstance(recorded, dict) and recorded.get("role") == "head_gate"
    spec = show.spec_json
    return {
        "show": row,
        "liveness": liveness("show", show),
        # the last gate on the head may be a moved head's: that is not the final gate
        "final_gate": None if head_gate else gate_verdict(recorded),
        "head_gate": gate_verdict(recorded) if head_gate else None,
        "has_final_gate": not isinstance(spec, dict) or spec.get("final_gate") is not None,
        "plays": plays,
        "board": [{"status": s, "plays": columns[s]} for s in order],
        "transitions": [t.as_dict() for t in store.list_transitions("show", show_id)],
        "team": show_team(store, show_id),
    }

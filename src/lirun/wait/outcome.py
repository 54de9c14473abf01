"""What `li wait` reports for one target: the outcome dict, its line, the exit code.

Pure functions over the rows ``store.waits.fetch_rows`` returns (``WaitFetchRow``,
read by attribute) (design.md §5, D6 projection); the outcome itself is a dict, the
document ``--json`` prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from lirun.errors import listed_candidates
from lirun.hints import Any
from lirun.lifecycle import policy_for, shown_kind
from lirun.reasons import display_reason
from lirun.store.rows import WaitFetchRow
from lirun.wait.resolve import AMBIGUOUS, NOT_FOUND, Target

UNKNOWN = "unknown"
PENDING = "pending"  # never read: the wait ended before its first successful read
PROBLEM_STATUSES = frozenset({NOT_FOUND, AMBIGUOUS, UNKNOWN})

# Keys of a ``--json`` line, in the order a reader sees them.
JSON_FIELDS = (
    "run_id",
    "kind",
    "status",
    "reason",
    "reason_summary",
    "run_dir",
    "artifact_dir",
    "artifacts_path",  # artifact_dir's old name, deprecated (docs/json.md): one more version
    "exit_code",
    "success",
)


# A target with no row (not found, ambiguous, deleted since): every column unknown.
_NO_ROW = WaitFetchRow._make((None,) * len(WaitFetchRow._fields))


def _outcome(
    target: Target, *, status: str, terminal: bool, row: WaitFetchRow | None
) -> dict[str, Any]:
    kind = target.kind
    success = bool(kind and terminal and status in policy_for(kind).success)
    read = row if row is not None else _NO_ROW
    # design.md §4.1: artifact_dir is the stored artifact dir (of the backing run for an
    # invocation, play or schedule run), never the run directory, never synthesized.
    artifact_dir = read.artifact_dir or None
    outcome: dict[str, Any] = {
        "run_id": target.id or target.input,
        "input": target.input,
        "kind": shown_kind(kind) if kind else kind,  # a session row is a run
        "status": status,
        "terminal": terminal,
        "reason": display_reason(read.reason_code),
        "reason_summary": read.reason_summary or "",
        "artifact_dir": artifact_dir,
        "run_dir": read.run_dir or None,
        "artifacts_path": artifact_dir,
        "exit_code": read.exit_code,
        "success": success,
    }
    if target.candidates:
        outcome["candidates"] = list(target.candidates)
        outcome["candidates_total"] = target.total
    return outcome


def is_terminal_row(kind: str, row: WaitFetchRow) -> bool:
    return row.status in policy_for(kind).terminal


def project(target: Target, row: WaitFetchRow | None) -> dict[str, Any]:
    """The outcome for a resolved target: its row, or ``unknown`` when the row is gone."""
    if target.problem is not None:
        return _outcome(target, status=target.problem, terminal=False, row=None)
    if row is None:
        return _outcome(target, status=UNKNOWN, terminal=False, row=None)
    assert target.kind is not None
    status = str(row.status)
    return _outcome(target, status=status, terminal=is_terminal_row(target.kind, row), row=row)


def unfinished(target: Target, row: WaitFetchRow | None) -> dict[str, Any]:
    """A target still waiting when the wait ends (stop or timeout): its last seen status."""
    status = str(row.status) if row and row.status else PENDING
    return _outcome(target, status=status, terminal=False, row=row)


def is_final(outcome: Mapping[str, Any]) -> bool:
    """True once an outcome ends its wait: terminal, deleted, not found or ambiguous."""
    return bool(outcome["terminal"]) or outcome["status"] in PROBLEM_STATUSES


def prints_line(outcome: Mapping[str, Any]) -> bool:
    """Terminal and deleted targets print a contract line; unresolved ones only a diagnostic."""
    return bool(outcome["terminal"]) or outcome["status"] == UNKNOWN


def format_wait_line(outcome: Mapping[str, Any]) -> str:
    """``<id>\\tstatus=<s>\\treason=<r>\\tartifact_dir=<p|->\\texit_code=<n|->`` (design.md D6)."""
    artifact_dir = outcome.get("artifact_dir") or "-"
    exit_code = outcome.get("exit_code")
    return (
        f"{outcome['run_id']}\tstatus={outcome['status']}"
        f"\treason={display_reason(outcome.get('reason'))}"
        f"\tartifact_dir={artifact_dir}"
        f"\texit_code={'-' if exit_code is None else int(exit_code)}"
    )


def json_record(outcome: Mapping[str, Any]) -> dict[str, Any]:
    return {key: outcome.get(key) for key in JSON_FIELDS}


def describe_problem(outcome: Mapping[str, Any]) -> str:
    """The stderr diagnostic for a target that prints no contract line."""
    text = outcome["input"]
    if outcome["status"] == AMBIGUOUS:
        candidates = list(outcome.get("candidates", ()))
        listed = listed_candidates(candidates, int(outcome.get("candidates_total") or 0))
        return f"{text!r} is ambiguous: it matches {listed}; give more of the id"
    if outcome["status"] == NOT_FOUND:
        return f"no run, invocation, play, show, branch or schedule run matches {text!r}"
    return f"{outcome['run_id']} is still {outcome['status']}"


def wait_exit_code(outcomes: Iterable[Mapping[str, Any]]) -> int:
    """design.md §5: 2 (not found/unknown/ambiguous) > 3 (unfinished) > 1 (unsuccessful) > 0."""
    items = list(outcomes)
    if any(o["status"] in PROBLEM_STATUSES for o in items):
        return 2
    if any(not o["terminal"] for o in items):
        return 3
    if any(not o["success"] for o in items):
        return 1
    return 0

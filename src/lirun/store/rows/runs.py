"""The store's rows for executions (sessions), the invocations that group them, their
branches and transcript messages, and every entity's status history and admin events
(see ``lirun.store.rows``)."""

from __future__ import annotations

from lirun.hints import Any
from lirun.store.rows.base import TypedRow

__all__ = [
    "AdminEventRow",
    "BranchRow",
    "InvocationRow",
    "MessageRow",
    "SessionRow",
    "TransitionRow",
]


class SessionRow(TypedRow):
    """A ``sessions`` row: one execution (an agent or a command), its owner and lease,
    what it recorded and where its files are (its JSON columns decoded)."""

    id: str
    run_id: str | None
    progression_id: str | None
    first_msg_id: str | None
    last_msg_id: str | None
    started_at: float | None
    ended_at: float | None
    invocation_id: str | None
    branch_id: str | None
    resumed_from: str | None
    run_dir: str | None
    artifacts_path: str | None
    artifact_contract_json: Any
    artifact_verification_json: Any
    exit_code: int | None
    engine_session_uid: str | None
    provider: str | None
    model: str | None
    command_json: Any
    cwd: str | None
    owner_pid: int | None
    owner_start_time: float | None
    owner_host: str | None
    owner_boot_id: str | None
    heartbeat_at: float | None
    lease_seconds: float | None
    metadata_json: Any
    status: str
    status_reason_code: str | None
    status_reason_summary: str | None
    status_evidence_refs: Any
    created_at: float
    updated_at: float
    child_pid: int | None
    child_start_time: float | None
    prompt: str | None
    provider_options_json: Any
    provider_version: str | None
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    cost_usd: float | None
    num_turns: int | None
    duration_s: float | None
    reply_text: str | None
    child_exit_code: int | None
    provider_error: str | None
    provider_retries: int | None
    flow_leg: str | None
    attempt: int | None
    retry_of: str | None
    pruned_at: float | None
    pruned_by: str | None
    files_removed_at: float | None

    @property
    def meta(self) -> dict[str, Any]:
        """Its metadata (``metadata_json``), an empty dict when it has none."""
        return self.metadata_json if isinstance(self.metadata_json, dict) else {}


class BranchRow(TypedRow):
    """A ``branches`` row: one conversation resumed across executions, its engine
    session and its first and latest execution."""

    id: str
    provider: str | None
    engine_session_uid: str | None
    first_session_id: str | None
    last_session_id: str | None
    created_at: float
    updated_at: float


class MessageRow(TypedRow):
    """A ``messages`` row: one line of an execution's transcript, numbered by ``seq``
    (``content`` as stored: text, or the JSON text of what was appended)."""

    id: str
    session_id: str
    seq: int
    role: str
    content: str
    created_at: float


class InvocationRow(TypedRow):
    """An ``invocations`` row: a manual invocation (``li invoke``) or a flow (``kind``
    ``flow``: its owner, lease, graph and summed usage), its JSON columns decoded."""

    id: str
    skill: str
    prompt: str | None
    ended_at: float | None
    exit_code: int | None
    status: str
    status_reason_code: str | None
    status_reason_summary: str | None
    status_evidence_refs: Any
    created_at: float
    updated_at: float
    kind: str | None
    owner_pid: int | None
    owner_start_time: float | None
    owner_host: str | None
    owner_boot_id: str | None
    heartbeat_at: float | None
    lease_seconds: float | None
    resumed_from: str | None
    flow_json: Any
    flow_digest: str | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    run_dir: str | None
    artifacts_path: str | None
    pruned_at: float | None
    pruned_by: str | None
    files_removed_at: float | None


class TransitionRow(TypedRow):
    """One row of an entity's status history (``status_transitions``), its evidence and
    metadata decoded."""

    id: str
    entity_type: str
    entity_id: str
    previous_status: str | None
    status: str
    reason_code: str
    reason_summary: str | None
    evidence_refs: Any
    source: str
    actor: str | None
    created_at: float
    metadata: Any


class AdminEventRow(TypedRow):
    """An ``admin_events`` row: an override, a refused status write or evidence added to a
    record after its outcome, who and why (its payload decoded)."""

    id: str
    event_type: str
    target_type: str
    target_id: str
    actor: str | None
    justification: str | None
    payload: Any
    created_at: float

"""The rules of a status write (design.md D5) as pure functions: validate the request, then decide.

``Store.update_status`` gathers the current row under a lock and does what ``decide`` says.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping

from lirun.errors import ValidationError
from lirun.hints import Any, Concatenate, Literal, NamedTuple, ParamSpec, TypeVar
from lirun.lifecycle import (
    EXIT_CODE_BY_STATUS,
    EntityPolicy,
    policy_for,
    validate_source,
    validate_status,
)
from lirun.reasons import validate_reason
from lirun.store.records import check_evidence, check_metadata, closed_fields, to_json

WriteDecision = Literal["skip", "reject", "apply"]

P = ParamSpec("P")
S = TypeVar("S")
R = TypeVar("R")
W = TypeVar("W")


class StatusWrite(NamedTuple):
    """A validated ``update_status`` request, its JSON already encoded."""

    policy: EntityPolicy
    entity_id: str
    new_status: str
    reason_code: str
    reason_summary: str
    evidence_json: str | None
    source: str
    actor: str | None
    metadata_json: str | None
    expected: frozenset[str | None] | None
    expected_updated_at: float | None
    extra: dict[str, Any]
    override: bool
    override_actor: str | None
    override_justification: str | None


class HistoryEntry(NamedTuple):
    """One row of an entity's status history, as a writer gives it (the store adds its
    id, entity type and time)."""

    entity_id: str
    previous_status: str | None
    status: str
    reason_code: str
    reason_summary: str = ""
    evidence_json: str | None = None
    source: str = "system"
    actor: str | None = None
    metadata_json: str | None = None

    @classmethod
    def of_write(cls, write: StatusWrite, previous: str | None) -> HistoryEntry:
        """The history row an applied ``write`` leaves (its previous status ``previous``)."""
        return cls(
            entity_id=write.entity_id,
            previous_status=previous,
            status=write.new_status,
            reason_code=write.reason_code,
            reason_summary=write.reason_summary,
            evidence_json=write.evidence_json,
            source=write.source,
            actor=write.actor,
            metadata_json=write.metadata_json,
        )


def expected_set(
    entity_type: str, expected_statuses: Iterable[str | None] | None
) -> frozenset[str | None] | None:
    """``expected_statuses`` as a set; a bare string or an unknown status is a mistake."""
    if expected_statuses is None:
        return None
    if isinstance(expected_statuses, str):
        raise ValidationError(
            f"expected_statuses must be a set such as {{{expected_statuses!r}}}, not a string"
        )
    expected = frozenset(expected_statuses)
    for status in expected:
        if status is not None:
            validate_status(entity_type, status)
    return expected


def validate_status_write(
    entity_type: str,
    entity_id: str,
    *,
    new_status: str,
    reason_code: str,
    reason_summary: str = "",
    evidence_refs: list[dict[str, Any]] | None = None,
    source: str = "executor",
    actor: str | None = None,
    metadata: dict[str, Any] | None = None,
    expected_statuses: Iterable[str | None] | None = None,
    expected_updated_at: float | None = None,
    extra_fields: Mapping[str, Any] | None = None,
    override: bool = False,
    override_actor: str | None = None,
    override_justification: str | None = None,
) -> StatusWrite:
    """The parameters of ``update_status`` (declared here only), checked before any I/O.

    A bad value is a ValidationError (unknown entity type or status, a reason code not
    allowed for it, a bad source, evidence or metadata, an extra field the entity does
    not have, an override without actor and justification).
    """
    policy = policy_for(entity_type)
    validate_status(policy.entity_type, new_status)
    validate_reason(reason_code, policy.entity_type, new_status)
    validate_source(source)
    extra = closed_fields(
        extra_fields, policy.extra_fields, f"extra_fields for {policy.entity_type}"
    )
    if override and not (override_actor and override_justification):
        raise ValidationError("override=True needs both override_actor and override_justification")
    check_exit_code(policy, new_status, extra)
    return StatusWrite(
        policy=policy,
        entity_id=entity_id,
        new_status=new_status,
        reason_code=reason_code,
        reason_summary=reason_summary,
        evidence_json=to_json(check_evidence(evidence_refs), "evidence_refs"),
        source=source,
        actor=actor,
        metadata_json=to_json(check_metadata(metadata), "metadata"),
        expected=expected_set(policy.entity_type, expected_statuses),
        expected_updated_at=expected_updated_at,
        extra=extra,
        override=override,
        override_actor=override_actor,
        override_justification=override_justification,
    )


def takes_validated(
    validate: Callable[P, W],
) -> Callable[[Callable[[S, W], R]], Callable[Concatenate[S, P], R]]:
    """A method whose public parameters are ``validate``'s, declared once (there).

    ``@takes_validated(validate_status_write)`` on ``Store.update_status(self, write)``:
    callers (and mypy, and ``help``) see ``update_status(entity_type, entity_id, *,
    new_status, …)``; the method receives the validated ``StatusWrite``.
    """

    def decorate(method: Callable[[S, W], R]) -> Callable[Concatenate[S, P], R]:
        @functools.wraps(method)
        def call(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
            return method(self, validate(*args, **kwargs))

        # `inspect.signature` follows __wrapped__ to the first object with a __signature__.
        call.__wrapped__ = _SignatureOf(validate, method)  # type: ignore[assignment]
        return call

    return decorate


class _SignatureOf:
    """Shows ``inspect`` (``help``) a method with ``validate``'s parameters after ``self``.

    Built on demand: importing ``inspect`` at start-up would cost ``li wait`` milliseconds.
    """

    def __init__(self, validate: Callable[..., Any], method: Callable[..., Any]) -> None:
        self._validate = validate
        self._method = method

    @property
    def __signature__(self) -> Any:
        import inspect

        public = inspect.signature(self._validate)
        me = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        return public.replace(
            parameters=[me, *public.parameters.values()],
            return_annotation=inspect.signature(self._method).return_annotation,
        )


def decide(write: StatusWrite, previous: str | None, version: float) -> WriteDecision:
    """``skip`` (a guard did not match), ``reject`` (leaves a terminal status) or ``apply``."""
    if write.expected is not None and previous not in write.expected:
        return "skip"
    if write.expected_updated_at is not None and version != write.expected_updated_at:
        return "skip"
    if previous in write.policy.terminal and write.new_status != previous and not write.override:
        return "reject"
    return "apply"


def check_exit_code(policy: EntityPolicy, new_status: str, extra: Mapping[str, Any]) -> None:
    """An ``exit_code`` the caller passes for a status it follows must agree with it."""
    if not policy.exit_code_by_status or "exit_code" not in extra:
        return
    expected = EXIT_CODE_BY_STATUS.get(new_status)
    if new_status in policy.terminal and extra["exit_code"] != expected:
        raise ValidationError(
            f"exit_code {extra['exit_code']!r} contradicts status {new_status!r} of a "
            f"{policy.entity_type} (it is {expected}); leave exit_code out: the store sets it"
        )


def terminal_columns(write: StatusWrite, previous: str | None, now: float) -> dict[str, Any]:
    """What a write into a terminal status sets beside the status (the one place of this
    rule): the policy's ended column (unless the caller gave its own clock's value in
    ``extra_fields``) and, where it follows the status, ``exit_code``.

    Only a move into a terminal status (an override from one terminal status to another
    included) sets them: rewriting the same terminal status keeps when it first ended.
    """
    policy = write.policy
    if write.new_status not in policy.terminal or write.new_status == previous:
        return {}
    columns: dict[str, Any] = {}
    if policy.ended_column is not None and policy.ended_column not in write.extra:
        columns[policy.ended_column] = now
    if policy.exit_code_by_status:
        columns["exit_code"] = EXIT_CODE_BY_STATUS[write.new_status]
    return columns


def next_version(previous: float | None) -> float:
    """A new ``updated_at``: now, but always after the previous one (it is the CAS version)."""
    now = time.time()
    return now if previous is None or now > previous else previous + 1e-6

"""``Client.override``: the audited repair of a record's status (design.md D5), as ``li
override`` makes it.

The write is ``update_status(override=True)``: it may leave a terminal status, and the
``status_transition_override`` admin event naming the actor and the justification commits
with the status and its history row. Everything that can be refused is refused before
anything is written: an unknown entity, status or reason, a reason that does not fit the
status, an empty actor or justification (UsageError / ValidationError), an id that names
no record or several (NotFoundError / AmbiguousIdError), and a run or flow that still
runs (ConflictError: its owner writes how it ends; wait for it, or reap it if its owner
is gone). A record that changes between the read and the write is RecordChangedError,
with nothing written.
"""

from __future__ import annotations

from lirun.client.results import Overridden
from lirun.errors import ConflictError, NotFoundError, RecordChangedError, UsageError
from lirun.lifecycle import canonical_entity_type, is_terminal
from lirun.store import Store

__all__ = ["OWNED_ENTITIES", "override"]

# Records a live process owns until they end: their status is that owner's to write.
OWNED_ENTITIES = ("session", "invocation")


def required_text(value: str, what: str) -> str:
    """``value`` stripped; UsageError when blank: an override is audited by who and why."""
    if not value.strip():
        raise UsageError(f"{what} must not be empty: an override is audited by who and why")
    return value.strip()


def override(
    store: Store,
    entity: str,
    ident: str,
    *,
    status: str,
    reason: str,
    actor: str,
    justification: str,
    summary: str = "",
) -> Overridden:
    """Set the status of the ``entity`` record ``ident`` (full id, unique prefix or
    suffix) to ``status`` with ``reason``, audited as ``actor`` with ``justification``."""
    kind = canonical_entity_type(entity)
    who = required_text(actor, "the actor")
    why = required_text(justification, "the justification")
    found = store.resolve_id(kind, ident)
    before = store.get_entity(kind, found)
    if before is None:
        raise NotFoundError(f"no {kind} with id {found!r}")
    if kind in OWNED_ENTITIES and not is_terminal(kind, before["status"]):
        raise ConflictError(
            f"{kind} {found} is still {before['status']}: its owner records how it ends; "
            f"wait for it (li wait {found}), or reap it if its owner is gone (li reap)"
        )
    applied = store.update_status(
        kind,
        found,
        new_status=status,
        reason_code=reason,
        reason_summary=summary,
        source="admin",
        actor=who,
        expected_updated_at=before["updated_at"],
        override=True,
        override_actor=who,
        override_justification=why,
    )
    after = store.get_entity(kind, found)
    if not applied or after is None:
        raise RecordChangedError(
            f"{kind} {found} changed while overriding it; nothing was written: look at it "
            "again (li status) and retry"
        )
    return Overridden(
        entity=kind,
        id=found,
        previous_status=before["status"],
        status=after["status"],
        reason=after["status_reason_code"],
        actor=who,
        justification=why,
        _record=dict(after),
    )

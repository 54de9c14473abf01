"""Typed errors. Every error that can reach the CLI carries its exit code."""

from __future__ import annotations


class LirunError(Exception):
    """Base of every lirun error. ``exit_code`` is what the CLI exits with."""

    exit_code: int = 2


class UsageError(LirunError, ValueError):
    """A command or API was called with input it cannot accept; fix the input and retry."""


class ValidationError(LirunError, ValueError):
    """A value (status, reason code, source, field) is not in its closed vocabulary.

    The message names the value and lists what is accepted.
    """


class NotFoundError(LirunError, LookupError):
    """The record asked for does not exist; check the id (``li status`` lists recent ones)."""


class OutputGoneError(NotFoundError):
    """The record exists but its output files do not, here: ``li gc`` pruned the run, its
    run directory was removed, or it ran on another host."""

    exit_code = 3


class AmbiguousIdError(UsageError):
    """An id fragment (a prefix, or a run id's random suffix) matches two or more records.

    The message lists at most ten candidates, newest first, and how many more there are;
    give more of the id.
    """

    def __init__(self, text: str, candidates: tuple[str, ...], total: int) -> None:
        self.text = text
        self.candidates = candidates
        self.total = total
        super().__init__(
            f"{text!r} is ambiguous: it matches {listed_candidates(candidates, total)}; "
            "give more of the id"
        )


def listed_candidates(candidates: tuple[str, ...] | list[str], total: int) -> str:
    """``a, b, c and 7 more``: the candidates shown, then how many were left out."""
    shown = ", ".join(candidates)
    more = total - len(candidates)
    return f"{shown} and {more} more" if more > 0 else shown


class ConflictError(LirunError, ValueError):
    """A record with that id already exists; choose another id or omit it to get a new one."""


class PrunedError(ConflictError):
    """A command would reuse what ``li gc`` removed from a record (a reply, artifacts, a
    run directory); nothing was done: run the work again instead of resuming it."""


class RecordChangedError(LirunError):
    """The record changed between the read and a guarded write (an override, say);
    nothing was written: look at it again (``li status ID``) and retry."""

    exit_code = 1


class StartInterruptedError(LirunError):
    """A signal came while the command was starting; nothing was started or recorded."""


class DatabaseError(LirunError):
    """The state database could not be opened or used; the message says why and what to do."""


class DatabaseUnavailableError(DatabaseError):
    """The database location is unreachable (missing or read-only directory, server down)."""


class DatabaseConnectionLostError(DatabaseUnavailableError):
    """The database server could not be reached or the connection dropped (a restart, a
    network cut). Status writes and `li wait` retry it; check the server if it lasts.
    """


class DatabaseBusyError(DatabaseError):
    """Another process held the database write lock past the busy timeout; retry later.

    Find the process that keeps the lock (a long transaction, a stuck job) and stop it.
    """


class DatabaseMissingError(DatabaseUnavailableError):
    """There is no lirun database there yet (nothing has run); a reader has nothing to read.

    Run a job first, or point --db / LIRUN_DB_URL at the database you mean.
    """


class OutcomeNotRecordedError(DatabaseError):
    """A run ended but neither the database nor the pending spool could take its outcome.

    The message names the outcome; free space or stop the process that holds the database.
    """


class RecordSetupError(DatabaseError):
    """The run's record could not be created, so nothing was started; the message says why."""


class DatabaseCorruptError(DatabaseError):
    """The database file is not a lirun database or is damaged; move it aside and retry."""


class SchemaTooNewError(DatabaseError):
    """The database was migrated by a newer lirun; upgrade lirun to use it."""


class MissingDriverError(DatabaseError):
    """A PostgreSQL URL was given but psycopg cannot be imported; the message says what
    to install."""


class TransitionRejectedError(LirunError, RuntimeError):
    """A write tried to move a terminal record to another status without an override.

    The rejection is audited in ``admin_events``; use ``li override`` with a justification
    to repair a record deliberately.
    """

    exit_code = 1

    def __init__(
        self,
        entity_type: str,
        entity_id: str,
        previous_status: str | None,
        attempted_status: str,
    ) -> None:
        self.entity_type = entity_type
        self.entity_id = entity_id
        self.previous_status = previous_status
        self.attempted_status = attempted_status
        super().__init__(
            f"{entity_type} {entity_id} is terminal ({previous_status}); refusing to change it "
            f"to {attempted_status} without override"
        )

"""What an execution is asked to do (``RunRequest``) and how it ended
(``RunResult``): the values of ``execute()`` in ``exec/execution.py``, which ``li run``,
``li agent``, flows, shows and workers build and read."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from lirun.exec.lease_note import LeaseNote
from lirun.exec.legs import Echo, Program
from lirun.exec.supervisor import Limits
from lirun.settings import Settings

if TYPE_CHECKING:
    from lirun.exec.stream import Event

__all__ = ["RunRequest", "RunResult", "settings_of"]


@dataclass(slots=True)
class RunRequest:
    """Everything an execution needs, already validated by the CLI."""

    program: Program
    cwd: str
    limits: Limits = field(default_factory=Limits)
    save_dir: str | None = None
    artifact_contract: Mapping[str, Any] | None = None
    invocation_id: str | None = None
    resume_branch: str | None = None
    resume_on_timeout: bool = False
    echo: Echo = field(default_factory=Echo)
    stdin: int | IO[Any] | None = subprocess.DEVNULL
    on_event: Callable[[str, Event], None] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    row_fields: dict[str, Any] = field(default_factory=dict)  # more session columns (a flow leg)
    env: dict[str, str] = field(default_factory=dict)  # more child environment (LIRUN_TEAM)
    # The child uses the database itself (a team's agent): it gets the URL's password in
    # a credential file its LIRUN_DB_URL names (record/credential.py), else no password.
    db_credential: bool = False
    # The run's settings, the one place its database (``db_url``), id (``run_id``) and
    # heartbeat interval are given; None: the environment's, read once by ``execute()``.
    settings: Settings | None = None


@dataclass(slots=True)
class RunResult:
    """How the execution ended, as ``li`` reports it (``--json``)."""

    run_id: str
    status: str
    reason: str | None
    run_dir: str
    artifact_dir: str
    exit_code: int
    branch_id: str
    engine_session_uid: str | None = None
    reply: str = ""
    recorded: bool = True
    pending: str | None = None
    # time.monotonic() when li stopped watching the last child: a caller holding a lease
    # tells whether it lapsed before the work ended (not in summary(): this process's clock)
    supervised_until: float | None = None
    # The owner's guard's note when the lease lapsed during the last leg: whether it
    # stopped the child or found it ended by itself
    lease_lapse: LeaseNote | None = None

    @property
    def response_text(self) -> str:
        """Deprecated: the old name of ``reply`` (CHANGELOG.md), kept for one release."""
        import warnings

        warnings.warn(
            "RunResult.response_text is deprecated; use RunResult.reply",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.reply

    def summary(self) -> dict[str, Any]:
        """Internal: the fields ``li run --json`` prints of a result."""
        pending = {"pending": self.pending} if self.pending else {}  # only when it happened
        return {
            **pending,
            "run_id": self.run_id,
            "status": self.status,
            "reason": self.reason,
            "run_dir": self.run_dir,
            "artifact_dir": self.artifact_dir,
            "exit_code": self.exit_code,
            "branch_id": self.branch_id,
            "engine_session_uid": self.engine_session_uid,
        }


def settings_of(request: RunRequest) -> Settings:
    """The run's settings: the request's, else the environment's (``execute`` reads once)."""
    return request.settings if request.settings is not None else Settings.from_env()

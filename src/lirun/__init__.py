"""lirun: run headless agent CLIs under supervision; keep a typed record of how each ended.

``__all__`` is the public API (docs/api.md); every other name, here or in a submodule, is
internal and may change in any release (docs/versioning.md). Names are loaded on first use
(PEP 562) so that ``import lirun`` stays cheap on the ``li wait`` path.
"""

from __future__ import annotations

# Not `from typing import TYPE_CHECKING`: importing typing costs ~20 ms before `li run`
# can trap signals (a SIGINT then is a KeyboardInterrupt traceback).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

# The public API (docs/api.md; what may change and when: docs/versioning.md). Every name
# here is in ``__all__`` and in tests/api_surface.txt with its signature.
_EXPORTS: dict[str, str] = {
    # the client and the values it returns
    "Client": "lirun.client",
    "AsyncClient": "lirun.client",
    "Queued": "lirun.client",
    "Run": "lirun.client",
    "RunStatus": "lirun.client",
    "Started": "lirun.client",
    "Usage": "lirun.client",
    "WaitOutcome": "lirun.client",
    "FlowResult": "lirun.client",
    "ShowResult": "lirun.client",
    "ShowStatus": "lirun.client",
    "PlayResult": "lirun.client",
    "Overridden": "lirun.client",
    "Team": "lirun.client",
    "Message": "lirun.client",
    "Member": "lirun.client",
    "Settings": "lirun.settings",
    # one supervised execution, the call `li run` / `li agent` make
    "execute": "lirun.exec.execution",
    "RunRequest": "lirun.exec.request",
    "RunResult": "lirun.exec.request",
    "CommandProgram": "lirun.exec.legs",
    "Limits": "lirun.exec.supervisor",
    # the store, low level (async)
    "StateDB": "lirun.store",
    # the vocabularies
    "VALID_STATUSES_BY_ENTITY_TYPE": "lirun.lifecycle",
    "TERMINAL_STATUSES_BY_ENTITY_TYPE": "lirun.lifecycle",
    "SUCCESS_STATUSES_BY_ENTITY_TYPE": "lirun.lifecycle",
    "VALID_SESSION_STATUSES": "lirun.lifecycle",
    "SESSION_TERMINAL_STATUSES": "lirun.lifecycle",
    "EXIT_CODE_BY_STATUS": "lirun.lifecycle",
    "VALID_SOURCES": "lirun.lifecycle",
    "VALID_REASON_CODES": "lirun.reasons",
    # the errors a caller catches
    "LirunError": "lirun.errors",
    "UsageError": "lirun.errors",
    "ValidationError": "lirun.errors",
    "NotFoundError": "lirun.errors",
    "AmbiguousIdError": "lirun.errors",
    "ConflictError": "lirun.errors",
    "DatabaseError": "lirun.errors",
    "DatabaseUnavailableError": "lirun.errors",
    "DatabaseBusyError": "lirun.errors",
    "DatabaseMissingError": "lirun.errors",
    "SchemaTooNewError": "lirun.errors",
    "OutcomeNotRecordedError": "lirun.errors",
    "TransitionRejectedError": "lirun.errors",
}

# Names that left the API: still importable from ``lirun``, with a DeprecationWarning
# naming what to use instead, for one more minor version (docs/versioning.md §1). The
# home is "module" or, for a name that was renamed there, "module:new_name".
_DEPRECATED: dict[str, tuple[str, str]] = {
    "lirun_home": ("lirun.paths", "Run.run_dir"),
    "runs_root": ("lirun.paths", "Run.run_dir"),
    "RunDir": ("lirun.record.rundir", "Run.run_dir"),
    "allocate_run": ("lirun.record.rundir", "Client.run"),
    "ArtifactPathError": ("lirun.record.artifacts", "lirun.ValidationError"),
    "validate_artifact_contract": ("lirun.record.artifacts", "Client.run(artifacts=...)"),
    "resolve_artifact_contract": ("lirun.record.artifacts", "Client.run(artifacts=...)"),
    "verify_artifact_contract": ("lirun.record.artifacts", "Run.artifacts"),
    "check_completion_evidence": ("lirun.record.evidence", "Run.evidence"),
    "setup_persist": ("lirun.record.teardown", "lirun.execute"),
    "teardown_persist": ("lirun.record.teardown", "lirun.execute"),
    "wait_for_terminal": ("lirun.wait.api", "AsyncClient.wait"),
    "format_wait_line": ("lirun.wait.api", "WaitOutcome.line"),
    "run_wait": ("lirun.cli.wait", "the `li wait` command"),
    "ExecutionRequest": ("lirun.exec.request:RunRequest", "lirun.RunRequest"),
    "ExecutionResult": ("lirun.exec.request:RunResult", "lirun.RunResult"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None and name in _DEPRECATED:
        home, instead = _DEPRECATED[name]
        module, _, attribute = home.partition(":")
        import warnings

        warnings.warn(
            f"lirun.{name} is not part of lirun's API since 0.2.0 and goes in 0.3.0; "
            f"use {instead} (or import it from {module}, internal)",
            DeprecationWarning,
            stacklevel=2,
        )
        import importlib

        # Not cached in globals(): every use warns.
        return getattr(importlib.import_module(module), attribute or name)
    if module is None:
        raise AttributeError(f"module 'lirun' has no attribute {name!r}")
    import importlib  # on first use: `li` imports this package before it traps signals

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])

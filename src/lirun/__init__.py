"""lirun: run headless agent CLIs under supervision; keep a typed record of how each ended.

Names are loaded on first use (PEP 562) so that ``import lirun`` stays cheap on the
``li wait`` path.
"""

from __future__ import annotations

# Not `from typing import TYPE_CHECKING`: importing typing costs ~20 ms before `li run`
# can trap signals (a SIGINT then is a KeyboardInterrupt traceback).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # paths
    "lirun_home": "lirun.paths",
    "runs_root": "lirun.paths",
    # D1
    "RunDir": "lirun.record.rundir",
    "allocate_run": "lirun.record.rundir",
    # D2
    "VALID_STATUSES_BY_ENTITY_TYPE": "lirun.lifecycle",
    "TERMINAL_STATUSES_BY_ENTITY_TYPE": "lirun.lifecycle",
    "SUCCESS_STATUSES_BY_ENTITY_TYPE": "lirun.lifecycle",
    "VALID_SESSION_STATUSES": "lirun.lifecycle",
    "SESSION_TERMINAL_STATUSES": "lirun.lifecycle",
    "EXIT_CODE_BY_STATUS": "lirun.lifecycle",
    "VALID_SOURCES": "lirun.lifecycle",
    "VALID_REASON_CODES": "lirun.reasons",
    # D2 / D5
    "StateDB": "lirun.store",
    "TransitionRejectedError": "lirun.errors",
    "LirunError": "lirun.errors",
    # D3
    "ArtifactPathError": "lirun.record.artifacts",
    "validate_artifact_contract": "lirun.record.artifacts",
    "resolve_artifact_contract": "lirun.record.artifacts",
    "verify_artifact_contract": "lirun.record.artifacts",
    # D4
    "check_completion_evidence": "lirun.record.evidence",
    "setup_persist": "lirun.record.teardown",
    "teardown_persist": "lirun.record.teardown",
    # D6
    "wait_for_terminal": "lirun.wait.api",
    "format_wait_line": "lirun.wait.api",
    "run_wait": "lirun.cli.wait",
    # the execution `li run` / `li agent` use, as one library call
    "execute": "lirun.exec.execution",
    "RunRequest": "lirun.exec.request",
    "RunResult": "lirun.exec.request",
    "CommandProgram": "lirun.exec.legs",
    "Limits": "lirun.exec.supervisor",
    # the client (docs/api.md)
    "Client": "lirun.client",
    "AsyncClient": "lirun.client",
    "Queued": "lirun.client",
    "Run": "lirun.client",
    "RunStatus": "lirun.client",
    "Started": "lirun.client",
    "Usage": "lirun.client",
    "WaitOutcome": "lirun.client",
}

__all__ = sorted(_EXPORTS)

# Old names kept importable for one release (CHANGELOG.md): each warns and gives the new one.
_DEPRECATED: dict[str, str] = {
    "ExecutionRequest": "RunRequest",
    "ExecutionResult": "RunResult",
}


def __getattr__(name: str) -> Any:
    if name in _DEPRECATED:
        import warnings

        new = _DEPRECATED[name]
        warnings.warn(
            f"lirun.{name} is deprecated; use lirun.{new}", DeprecationWarning, stacklevel=2
        )
        return __getattr__(new)
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lirun' has no attribute {name!r}")
    import importlib  # on first use: `li` imports this package before it traps signals

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])

"""What a profile, a playbook and inline artifact entries declare together: the one
reading ``li run``, ``li agent``, flows and shows share (``exec.task`` builds requests
from it); and how many executions one invocation may run at once.

Apart from ``task``, so ``li run`` reads its declarations without loading the agent side
(providers and their stream parsers).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lirun.exec.profiles import merged_defaults, resolve_contract_for

__all__ = ["MAX_PARALLEL", "Declared", "declarations"]

# Executions one orchestrator runs at once (flow legs, plays). Each holds its own database
# connections (two on PostgreSQL), and a server's default max_connections is 100.
MAX_PARALLEL = 32


@dataclass(frozen=True, slots=True)
class Declared:
    """What a profile, a playbook and inline artifact entries declare together."""

    contract: dict[str, Any] | None
    defaults: dict[str, Any]
    playbook_prompt: str | None


def declarations(
    profile: str | None, playbook: str | None, artifacts: Iterable[Mapping[str, Any]] = ()
) -> Declared:
    """The contract (profile, then playbook, then ``artifacts`` overlaid by id), the run
    defaults and the playbook's prompt; the one reading ``li agent``, ``li run``, flows
    and shows share. ProfileError (exit 2) for a missing or invalid file or contract."""
    entries = list(artifacts)
    if not (profile or playbook or entries):
        return Declared(None, {}, None)

    # Imported here: reading the files loads PyYAML, which `li run -- CMD` (a start-up
    # budget, bench/bench_startup.py) does not need when it names no profile or playbook.
    from lirun.exec.profile_files import load_playbook, load_profile

    loaded_profile = load_profile(profile) if profile else None
    loaded_playbook = load_playbook(playbook) if playbook else None
    contract = resolve_contract_for(loaded_profile, loaded_playbook, entries)
    return Declared(
        dict(contract) if contract is not None else None,
        merged_defaults(loaded_profile, loaded_playbook),
        loaded_playbook.prompt if loaded_playbook else None,
    )

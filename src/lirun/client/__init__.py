"""lirun's Python client: ``Client`` (sync) and ``AsyncClient`` over one database, and
the typed values they return (docs/api.md).

Not on the path of ``li wait``, ``li status`` or ``li --help``: ``import lirun`` loads
this package only when one of its names is first used.
"""

from __future__ import annotations

from lirun.client.aio import AsyncClient, AsyncTeam
from lirun.client.results import FlowResult, Overridden, PlayResult, ShowResult, ShowStatus
from lirun.client.sync import Client
from lirun.client.team import Member, Message, Team
from lirun.client.values import Queued, Run, RunStatus, Started, Usage, WaitOutcome

__all__ = [
    "AsyncClient",
    "AsyncTeam",
    "Client",
    "FlowResult",
    "Member",
    "Message",
    "Overridden",
    "PlayResult",
    "Queued",
    "Run",
    "RunStatus",
    "ShowResult",
    "ShowStatus",
    "Started",
    "Team",
    "Usage",
    "WaitOutcome",
]

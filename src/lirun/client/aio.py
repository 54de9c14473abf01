"""``lirun.AsyncClient``: ``Client``'s methods, awaited.

Each method runs its ``Client`` twin in a worker thread (``asyncio.to_thread``, as
``StateDB`` does), so a run that lasts an hour, a busy database or a long wait never
blocks the event loop, and the two clients cannot differ in what they do: one is the
other. A run started from a worker thread installs no signal handlers (Python allows
them only in the main thread): cancel it by ending the program, or give it a timeout.
``iter_wait`` is an async iterator over the same outcomes.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterable
from types import TracebackType

from lirun.async_twin import async_method, to_thread
from lirun.client.sync import Client
from lirun.client.team import Team
from lirun.client.values import WaitOutcome
from lirun.settings import Settings

__all__ = ["AsyncClient", "AsyncTeam"]


class AsyncTeam:
    """``Team``'s methods, awaited (``AsyncClient.team``): each runs in a worker thread."""

    def __init__(self, team: Team) -> None:
        self.sync = team
        self.id = team.id
        self.name = team.name

    def __repr__(self) -> str:
        return f"AsyncTeam(id={self.id!r}, name={self.name!r})"

    send = async_method(Team.send)
    inbox = async_method(Team.inbox)
    log = async_method(Team.log)
    members = async_method(Team.members)


class AsyncClient:
    """lirun over one database, for asyncio code: ``Client``'s methods, awaited.

    ``AsyncClient()`` reads the environment once; ``AsyncClient(db=..., settings=...)``
    takes them as given. ``async with AsyncClient() as lirun: ...`` closes it.
    """

    def __init__(
        self, db: str | os.PathLike[str] | None = None, *, settings: Settings | None = None
    ) -> None:
        self.sync = Client(db, settings=settings)

    @property
    def settings(self) -> Settings:
        return self.sync.settings

    @property
    def db_url(self) -> str:
        return self.sync.db_url

    async def close(self) -> None:
        await to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # Declared once, on Client: each runs its twin in a worker thread (async_twin).
    run = async_method(Client.run)
    agent = async_method(Client.agent)
    submit = async_method(Client.submit)
    status = async_method(Client.status)
    runs = async_method(Client.runs)
    flow = async_method(Client.flow)
    show = async_method(Client.show)
    override = async_method(Client.override)

    async def team(self, name: str) -> AsyncTeam:
        """``Client.team``, awaited: the team's handle, its methods awaited too."""
        return AsyncTeam(await to_thread(self.sync.team, name))

    async def wait(
        self, ids: str | Iterable[str], *, timeout: float | None = None, interval: float = 1.0
    ) -> list[WaitOutcome]:
        """``Client.wait``, awaited."""
        return [o async for o in self.iter_wait(ids, timeout=timeout, interval=interval)]

    async def iter_wait(
        self, ids: str | Iterable[str], *, timeout: float | None = None, interval: float = 1.0
    ) -> AsyncIterator[WaitOutcome]:
        """``Client.iter_wait`` as an async iterator: each step is read in a worker thread."""
        import asyncio
        import threading

        targets = [ids] if isinstance(ids, str) else list(ids)
        stopped = threading.Event()
        outcomes = self.sync.iter_wait(
            targets, timeout=timeout, interval=interval, should_stop=stopped.is_set
        )
        done = object()
        step: asyncio.Future[object] | None = None
        try:
            while True:
                step = asyncio.ensure_future(to_thread(next, outcomes, done))
                outcome = await asyncio.shield(step)
                if outcome is done:
                    break
                assert isinstance(outcome, WaitOutcome)
                yield outcome
        finally:
            stopped.set()  # a read still sleeping in its thread returns within milliseconds
            if step is not None and not step.done():
                await asyncio.wait([step])
            await to_thread(outcomes.close)

"""The async face of a synchronous core: one typed wrapper, so each signature is declared once.

The ADR's public API is async (``StateDB``, ``setup_persist``, ``teardown_persist``); the
work is synchronous (``Store``, ``setup_persist_sync``…) and is what the CLI calls. The
async twin runs the sync call in a worker thread, so a busy SQLite lock never blocks the
event loop, and keeps its signature (ParamSpec) and docstring. A facade whose core can
(SQLite) first tries the call on the loop's thread with ``without_waiting``: nothing
there ever waits for a lock, and the hop is taken only when the call would.
"""

from __future__ import annotations

import _thread
import contextlib
import functools
from collections.abc import Callable, Coroutine

from lirun.hints import Any, Concatenate, ParamSpec, Protocol, TypeVar

P = ParamSpec("P")
T = TypeVar("T")
Core = TypeVar("Core")
Core_co = TypeVar("Core_co", covariant=True)

__all__ = [
    "HasCore",
    "WouldWait",
    "async_method",
    "async_twin",
    "to_thread",
    "waiting_allowed",
    "without_waiting",
]


async def to_thread(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` in a worker thread; the one hop every async twin takes.

    Long-lived workers fed through a queue and answering with ``call_soon_threadsafe``
    hop faster than ``asyncio.to_thread`` (a concurrent.futures pool, a future chained
    onto an asyncio one): bench/bench_startup.py compares StateDB's write rate with a raw
    driver loop. An idle worker takes the next call, so concurrent calls still run side
    by side (a read is never queued behind a write waiting for a lock).
    """
    import asyncio  # on first use: it costs ~40 ms that `li wait` and the CLI must not pay
    import contextvars

    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    _idle_worker().put((call, loop, future))
    return await future


class WouldWait(Exception):
    """Raised inside ``without_waiting`` where the call would have to wait for a lock."""


_calling = _thread._local()


def waiting_allowed() -> bool:
    """False inside ``without_waiting`` on this thread."""
    return not getattr(_calling, "no_wait", False)


def without_waiting(fn: Callable[[], T]) -> T:
    """``fn()`` on this thread, raising WouldWait instead of waiting for any lock.

    The async facade runs a call on the event loop's own thread this way, and sends it to
    a worker thread only when it would wait: a thread hop costs more than an uncontended
    SQLite write (bench/bench_startup.py), and the loop must never block on a lock.
    """
    _calling.no_wait = True
    try:
        return fn()
    finally:
        _calling.no_wait = False


_idle: list[Any] = []  # queues of workers waiting for a call


def _idle_worker() -> Any:
    try:
        return _idle.pop()
    except IndexError:
        import queue
        import threading

        inbox: Any = queue.SimpleQueue()
        threading.Thread(target=_serve, args=(inbox,), name="lirun-worker", daemon=True).start()
        return inbox


def _serve(inbox: Any) -> None:
    while True:
        call, loop, future = inbox.get()
        try:
            result, error = call(), None
        except BaseException as exc:  # handed to the awaiting coroutine, raised there
            result, error = None, exc
        del call
        # RuntimeError: the loop closed while the call ran; nobody waits for the answer.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle, future, result, error)
        _idle.append(inbox)


def _settle(future: Any, result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _twin_doc(name: str, doc: str | None) -> str:
    return f"Async ``{name}`` (never blocks the event loop).\n\n{doc or ''}".rstrip()


def async_twin(fn: Callable[P, T], name: str) -> Callable[P, Coroutine[Any, Any, T]]:
    """``name``: an ``async def`` with ``fn``'s signature that runs ``fn`` in a worker thread."""

    @functools.wraps(fn)
    async def twin(*args: P.args, **kwargs: P.kwargs) -> T:
        return await to_thread(fn, *args, **kwargs)

    twin.__doc__ = _twin_doc(fn.__qualname__, fn.__doc__)
    twin.__name__ = twin.__qualname__ = name
    return twin


class HasCore(Protocol[Core_co]):
    """An async facade: ``sync`` is (opening it on first use) the synchronous core;
    ``inline_core`` is the core when it is open and can run a call on the event loop's
    thread without waiting (``without_waiting``), else None."""

    @property
    def sync(self) -> Core_co: ...

    def inline_core(self) -> Core_co | None: ...


def async_method(
    method: Callable[Concatenate[Core, P], T],
) -> Callable[Concatenate[HasCore[Core], P], Coroutine[Any, Any, T]]:
    """The async method of a facade, from the sync core's method of the same name.

    ``StateDB.update_status = async_method(Store.update_status)``: the parameters are
    declared once, on the core, and mypy sees them on the facade too. The core is opened
    (if it is not yet) in the same worker thread as the call.

    A core that can (``inline_core``) first runs the call on the loop's thread, never
    waiting: only a call that would wait for a lock goes to a worker thread. So every
    method wrapped here must raise WouldWait before it changes anything (one transaction
    or one read), which makes running it again in the worker safe.
    """

    @functools.wraps(method)
    async def call(self: HasCore[Core], /, *args: P.args, **kwargs: P.kwargs) -> T:
        core = self.inline_core()
        if core is not None:
            with contextlib.suppress(WouldWait):
                return without_waiting(lambda: method(core, *args, **kwargs))
        return await to_thread(lambda: method(self.sync, *args, **kwargs))

    call.__doc__ = _twin_doc(method.__qualname__, method.__doc__)
    return call

"""The cyclic garbage collector paused while a large file is read and checked.

Reading and checking a flow file allocates a few objects per value (nodes, mappings,
legs, their checks), and nearly all of them stay alive until the check ends. The cyclic
collector starts every few hundred allocations and walks the surviving objects again
each time: for a 10,000-leg flow that was about 40% of the check's CPU time, for
nothing (the check makes no garbage cycles worth collecting). Paused for the check, the
collector runs on as before afterwards; reference counting frees memory meanwhile.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["paused"]


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No cyclic collection inside the block (nested blocks and threads: the outermost
    that found it enabled enables it again)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()

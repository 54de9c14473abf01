"""``li wait``: the machine completion surface (ADR D6). The work is in ``lirun.wait``."""

from __future__ import annotations

from lirun.wait import run_wait


def main(argv: list[str]) -> int:
    return run_wait(argv)

"""``li wait``: the machine completion surface (ADR D6). The work is in ``lirun.wait``."""

from __future__ import annotations

from lirun.wait import run_wait


def _db_argument(argv: list[str]) -> str | None:
    """``--db URL`` / ``--db=URL`` among the arguments (argparse proper runs later)."""
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--db" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--db="):
            return arg.split("=", 1)[1]
    return None


def main(argv: list[str]) -> int:
    from lirun.cli.common import deliver_pending

    # Outcomes spooled by a teardown that could not write land before anything is read.
    deliver_pending("li wait", _db_argument(argv))
    return run_wait(argv)

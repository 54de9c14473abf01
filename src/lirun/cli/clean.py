"""``li show clean SHOW`` and ``li flow clean INVOCATION``: what a run left in git.

Each parses, makes one library call (``shows.cleanup`` / ``flows.cleanup``) and renders
the removed and kept worktrees and branches, every kept one with its reason; ``--json``
is the report as one object.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from lirun.cli.common import add_db_option, print_json
from lirun.flows.cleanup import clean_flow
from lirun.shows.cleanup import clean_show

__all__ = ["CLEAN_EXIT_CODES", "add_clean_options", "clean_flow_command", "clean_show_command"]

CLEAN_EXIT_CODES = """\
  0  nothing is left behind: every worktree and branch of the run was removed (or there
     was none)
  1  something was kept, each with why: unmerged commits or uncommitted changes (pass
     --force to drop them), or a branch checked out in a worktree that is not the run's
  2  usage error; the id is unknown or ambiguous; the run is still going (or, for a show,
     still active: resume or abort it first); its repository is gone; the database
     cannot be opened"""

SHOW_CLEAN_DESCRIPTION = """\
Remove what an ended show (completed or aborted) left in git: its play and gate
worktrees under <home>/worktrees/<show id>, and its attempt branches
<integration>--<play>-a<N> whose commits another branch holds (merged) or that a later
attempt replaced and merged (abandoned). A worktree with uncommitted changes and a
branch with commits no other branch holds are kept, and said why, unless --force. The
integration branch is the show's result and is never touched. SHOW is a show id, a
unique prefix or suffix of one, or a topic."""

FLOW_CLEAN_DESCRIPTION = """\
Remove what an ended flow's worktree legs left in git: the worktrees under
<home>/worktrees/<invocation id> and the leg branches lirun/flow/<invocation id>/<leg>
whose commits another branch holds (merged, or the leg changed nothing). A worktree
with uncommitted changes and a branch with commits no other branch holds are kept, and
said why, unless --force. A flow whose owner died is reaped first; a running one is
refused. INVOCATION may be a unique prefix or suffix."""


# The --json report's shape (docs/json.md): it names the show or the flow by its own key.
CLEAN_SCHEMAS = {"show": "lirun.show_clean/1", "flow": "lirun.flow_clean/1"}


def add_clean_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--force",
        action="store_true",
        help="also drop unmerged commits and uncommitted changes",
    )
    parser.add_argument("--json", action="store_true", help="the report as one JSON object")
    add_db_option(parser)


def render(report: Any) -> None:
    """One line per item: removed or kept, what, and why; notes after."""
    what = f"{report.target} {report.id}"
    if not report.items:
        print(f"{what}: nothing to clean")
    for item in report.items:
        verb = "removed" if item.removed else "kept"
        print(f"{verb:<8} {item.kind:<8} {item.name}: {item.why}")
    for note in report.notes:
        print(f"note: {note}")
    if report.kept:
        sys.stderr.write(
            f"li {report.target} clean: {len(report.kept)} kept in {report.repo}; "
            "see why above (--force drops unmerged work)\n"
        )


def _finish(report: Any, as_json: bool) -> int:
    if as_json:
        print_json(report.to_dict(), schema=CLEAN_SCHEMAS[report.target])
    else:
        render(report)
    return int(report.exit_code)


def clean_show_command(args: argparse.Namespace) -> int:
    return _finish(clean_show(args.show, db_url=args.db, force=args.force), args.json)


def clean_flow_command(args: argparse.Namespace) -> int:
    return _finish(clean_flow(args.invocation, db_url=args.db, force=args.force), args.json)

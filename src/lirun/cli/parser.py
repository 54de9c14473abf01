"""The argument parser every command builds: argparse, keeping the options it was given.

argparse lists a parser's actions only in private attributes; ``li run`` needs them to
split ``[options] CMD ...`` (which option takes a value) and to hand a detached worker the
parsed options, so the parser records each action ``add_argument`` returns.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["CommandParser"]


class CommandParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose ``options`` lists every action added to it
    directly (``-h`` included; an argument group's own ``add_argument`` is not seen)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.options: list[argparse.Action] = []  # before __init__ adds -h/--help
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.options.append(action)
        return action

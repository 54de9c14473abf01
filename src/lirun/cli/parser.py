"""The argument parser every command builds: argparse, keeping the options it was given,
with usage errors of one line and a hint.

argparse lists a parser's actions only in private attributes; ``li run`` needs them to
split ``[options] CMD ...`` (which option takes a value) and to hand a detached worker the
parsed options, so the parser records each action ``add_argument`` returns.

A usage error is ``li CMD: error: MESSAGE`` and ``try 'li CMD --help'``, exit 2, never
argparse's usage block; a mistyped subcommand or choice gets "did you mean".
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

__all__ = ["CommandParser", "Duration", "usage_error_lines"]

USAGE_EXIT = 2


def usage_error_lines(prog: str, message: str) -> str:
    """The two lines of every usage error: what is wrong, and where the help is."""
    return f"{prog}: error: {message}\ntry '{prog} --help'\n"


class CommandParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose ``options`` lists every action added to it
    directly (``-h`` included; an argument group's own ``add_argument`` is not seen).
    Its subparsers are CommandParsers too (argparse builds them of the parent's class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.options: list[argparse.Action] = []  # before __init__ adds -h/--help
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.options.append(action)
        return action

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(usage_error_lines(self.prog, message))
        sys.exit(USAGE_EXIT)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is None or value in choices:
            return
        import difflib

        names = [str(choice) for choice in choices]
        close = difflib.get_close_matches(str(value), names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        listed = ", ".join(names)
        if isinstance(action, argparse._SubParsersAction):
            raise argparse.ArgumentError(None, f"unknown command {value!r}{hint} ({listed})")
        raise argparse.ArgumentError(action, f"invalid choice {value!r}{hint} ({listed})")


class Duration:
    """An argparse ``type=``: a DURATION (``lirun.durations``), a number of seconds or
    ``30s``, ``5m``, ``2h``, ``1d``, ``1h30m``; ``zero`` allows 0 (an "off")."""

    __name__ = "duration"  # argparse names a type by it

    def __init__(self, *, zero: bool = False, low: float = 0.0, high: float | None = None) -> None:
        self.zero, self.low, self.high = zero, low, high

    def __call__(self, text: str) -> float:
        from lirun.durations import MAX_SECONDS, parse_seconds
        from lirun.errors import UsageError

        high = MAX_SECONDS if self.high is None else self.high
        try:
            return parse_seconds(text, zero=self.zero, low=self.low, high=high)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

"""The ``li`` command: a thin shell over the library (parse, one call, render).

``start`` is the console scripts' entry point: it imports the dispatcher itself, so a
SIGINT that comes while the interpreter is still importing it (before ``li run`` holds its
signals) ends ``li`` with 2 (nothing was started, as for ``li run``'s own start-up) and
one line, never a KeyboardInterrupt traceback.
"""

from __future__ import annotations

import sys

STARTING_INTERRUPTED = "li: interrupted while starting; nothing was started\n"


def start() -> int:
    try:
        from lirun.cli.main import main as dispatch
        from lirun.cli.main import starts_a_run
    except KeyboardInterrupt:
        sys.stderr.write(STARTING_INTERRUPTED)
        return 2
    code = dispatch()
    if starts_a_run(sys.argv[1:]):  # its record is written: no interpreter teardown
        from lirun.cli import quick_exit

        quick_exit.end(code)
    return code

"""Run a command next to a mock API inside a fresh network namespace.

``unshare -n -- python netns.py --scenario S --log FILE [--port P] -- COMMAND...``
brings loopback up, serves scenario S of :mod:`support.mockapi` on 127.0.0.1:P (no
server at all for ``refused``: the port answers connection refused), runs COMMAND with
this process's environment and exits with its code. Nothing in the namespace reaches
any other network, so a real CLI talks to the mock or to nobody.

:func:`netns_argv` builds that command line for a test; :func:`netns_missing` says why
it cannot run here (or None).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script inside the namespace
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.mockapi import SCENARIOS, MockServer

PORT = 18080
REFUSED = "refused"


def netns_argv(scenario: str, log: Path, command: list[str], port: int = PORT) -> list[str]:
    """The command line that runs ``command`` beside ``scenario`` in a new namespace."""
    return [
        "unshare", "-n", "--", sys.executable, str(Path(__file__).resolve()),
        "--scenario", scenario, "--log", str(log), "--port", str(port), "--", *command,
    ]  # fmt: skip


def netns_missing() -> str | None:
    """Why a new network namespace cannot be made here, or None when it can."""
    for tool in ("unshare", "ip"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (util-linux / iproute2)"
    probe = subprocess.run(
        ["unshare", "-n", "--", "ip", "link", "set", "lo", "up"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        reason = probe.stderr.strip() or f"exit {probe.returncode}"
        return f"`unshare -n` cannot make a network namespace here (needs root): {reason}"
    return None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="netns.py")
    scenarios = (*SCENARIOS, REFUSED)
    parser.add_argument("--scenario", required=True, choices=scenarios)
    parser.add_argument("--log", required=True, type=Path)
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    args.log.touch()
    server = None
    if args.scenario != REFUSED:
        server = MockServer(args.scenario, args.log, args.port)
        server.start()
    try:
        return subprocess.run(command, check=False).returncode
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The port a throwaway server keeps across restarts (tests/support/pgcluster.py).

A server restarted on a port from the kernel's ephemeral range can find it taken as the
source port of some client's connection ("Address already in use"); a port another pytest
process picks while the server is down for a restart is lost the same way.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.pgcluster import kept_port

SUPPORT = Path(__file__).parent


def test_a_kept_port_is_below_the_ephemeral_range() -> None:
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert kept_port() < low


def test_a_kept_port_is_never_given_to_another_process() -> None:
    held = sorted({kept_port() for _ in range(20)})
    assert len(held) == 20
    script = (
        f"import sys; sys.path.insert(0, {str(SUPPORT)!r})\n"
        "from support.pgcluster import kept_port\n"
        f"print(kept_port({held!r}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0, f"another process was given {done.stdout.strip()}, held here"
    assert "no free port to keep" in done.stderr

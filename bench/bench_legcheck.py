"""How long a flow file of a long leg chain takes to check. Prints ``name: value`` lines.

    .venv/bin/python bench/bench_legcheck.py [--legs 2000,10000]

One generated flow file per size: a chain of N command legs, each depending on the one
before it and passing its reply on as an argument (``echo "{{ legs.lK.reply }}"``), the
shape that made the check quadratic (every leg's ancestor set) and recursive (a
10,000-leg chain passed Python's recursion limit). Each figure is measured in a fresh
process, the cwd an empty directory:

- ``legcheck.<N>_legs.load_s``: wall time of ``load_flow`` (read the YAML, check every
  leg, the graph and every template); ``legcheck.<N>_legs.load_cpu_s`` its CPU time.
- ``legcheck.<N>_legs.dry_run_s``: wall time of the whole ``li flow run --dry-run FILE``
  (interpreter start, the check, the printed plan of every leg); ``..._cpu_s`` its CPU
  time, the figure to compare on a busy machine.
- ``legcheck.cpu_per_leg_ms.<N>``: load CPU time per leg; about flat in N means linear.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

from benchkit import out

_MEASURE = """
import json, sys, time, resource
from lirun.flows.load import load_flow
cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
c, t = cpu(), time.perf_counter()
spec = load_flow(sys.argv[1], cwd=sys.argv[2])
print(json.dumps({"wall": time.perf_counter() - t, "cpu": cpu() - c, "legs": len(spec.legs)}))
"""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def chain_file(path: str, legs: int) -> None:
    lines = ["legs:", "  - id: l0", "    run: [echo, start]"]
    for n in range(1, legs):
        lines += [
            f"  - id: l{n}",
            f"    depends_on: [l{n - 1}]",
            f'    run: [echo, "{{{{ legs.l{n - 1}.reply }}}}"]',
        ]
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--legs", default="2000,10000")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lirun-bench-") as tmp:
        env = {**os.environ, "LIRUN_HOME": os.path.join(tmp, "home")}
        for size in (int(n) for n in args.legs.split(",")):
            flow = os.path.join(tmp, f"chain{size}.yaml")
            chain_file(flow, size)
            proc = subprocess.run(
                [sys.executable, "-c", _MEASURE, flow, tmp],
                capture_output=True,
                text=True,
                check=True,
                env=env,
            )
            got = json.loads(proc.stdout)
            out(f"legcheck.{size}_legs.load_s", got["wall"])
            out(f"legcheck.{size}_legs.load_cpu_s", got["cpu"])
            out(f"legcheck.cpu_per_leg_ms.{size}", 1000 * got["cpu"] / size)
            started = time.perf_counter()
            children = _children_cpu()
            subprocess.run(
                [sys.executable, "-m", "lirun", "flow", "run", "--dry-run", flow],
                capture_output=True,
                check=True,
                cwd=tmp,
                env=env,
            )
            out(f"legcheck.{size}_legs.dry_run_s", time.perf_counter() - started)
            out(f"legcheck.{size}_legs.dry_run_cpu_s", _children_cpu() - children)


if __name__ == "__main__":
    main()

"""What refusing a hostile file costs: time and peak memory of the refusing ``li``.
Prints ``name: value`` lines.

    .venv/bin/python bench/bench_hostile.py

Each case runs ``li`` in a fresh interpreter that starts nothing else, so its
RUSAGE_CHILDREN peak is the peak resident memory of that one ``li``:

- ``hostile.yaml_3gb.*``: ``li flow run --dry-run`` of a 0.5 MB flow file whose aliases
  repeat a 500,000-character text 6,000 times (3 GB of text): refused with one
  ``file:line`` line (before: a ``MemoryError`` traceback after gigabytes).
- ``hostile.yaml_100_aliases.*``: ``li flow run`` of a 1 MB file with a 1 MB variable
  aliased 100 times (before: 9 s, 600 MB resident, a 200 MB state.db); ``state_db_bytes``
  is what it left (0: nothing written).
- ``hostile.center_1e9.*``: ``li flow run`` of one leg whose argument is
  ``{{ 'x' | center(1000000000) }}``: the leg fails at once (before: about 4 GB
  allocated before the output bound refused it).
- ``hostile.json_schema_dev_zero.*``: ``li run`` with ``json_schema: /dev/zero``
  (before: the read grew without end).
- ``hostile.baseline.*``: ``li flow run --dry-run`` of a one-leg flow, for scale.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from benchkit import out

_CHILD = """
import json, os, resource, subprocess, sys, time
t = time.monotonic()
p = subprocess.run(sys.argv[2:], cwd=sys.argv[1], capture_output=True, stdin=subprocess.DEVNULL)
print(json.dumps({"rc": p.returncode, "s": time.monotonic() - t,
                  "mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def _measure(name: str, cwd: str, env: dict[str, str], *args: str) -> None:
    li = [sys.executable, "-m", "lirun", *args]
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, cwd, *li], capture_output=True, text=True, env=env
    )
    got = json.loads(done.stdout)
    out(f"hostile.{name}.exit", got["rc"])
    out(f"hostile.{name}.seconds", got["s"])
    out(f"hostile.{name}.peak_rss_mb", got["mb"])


def _write(path: str, lines: list[str]) -> str:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return path


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="lirun-bench-") as tmp:
        home = os.path.join(tmp, "home")
        env = {**os.environ, "LIRUN_HOME": home}
        env.pop("LIRUN_DB_URL", None)
        baseline = _write(os.path.join(tmp, "one.yaml"), ["legs: [{id: a, run: [echo, hi]}]"])
        _measure("baseline", tmp, env, "flow", "run", "--dry-run", baseline)

        big = ["vars:", f'  a: &a "{"x" * 500_000}"', "legs:", "  - id: a"]
        big.append("    run: [echo, " + ", ".join(["*a"] * 6000) + "]")
        path = _write(os.path.join(tmp, "3gb.yaml"), big)
        out("hostile.yaml_3gb.file_bytes", os.path.getsize(path))
        _measure("yaml_3gb", tmp, env, "flow", "run", "--dry-run", path)

        hundred = ["vars:", f'  a: &a "{"y" * 1_000_000}"']
        hundred += [f"  v{i}: *a" for i in range(100)]
        hundred.append("legs: [{id: a, run: [echo, hi]}]")
        path = _write(os.path.join(tmp, "hundred.yaml"), hundred)
        _measure("yaml_100_aliases", tmp, env, "flow", "run", path)
        db = os.path.join(home, "state.db")
        out(
            "hostile.yaml_100_aliases.state_db_bytes",
            os.path.getsize(db) if os.path.exists(db) else 0,
        )

        leg = ["legs:", "  - id: a", "    run: [echo, \"{{ 'x' | center(1000000000) }}\"]"]
        path = _write(os.path.join(tmp, "center.yaml"), leg)
        _measure("center_1e9", tmp, env, "flow", "run", path)

        check = "r.json_schema=/dev/zero"
        _measure("json_schema_dev_zero", tmp, env, "run", "--artifact", "r=o.json",
                 "--artifact-check", check, "--", "true")  # fmt: skip


if __name__ == "__main__":
    main()

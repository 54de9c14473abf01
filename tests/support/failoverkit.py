"""The load of the ``db_failover`` fault kind: real `li` processes on a replica pair.

``Load`` starts, beside the workers the test starts, loops that each run one kind of `li`
command again and again until ``stop``: `li submit` of a piece of work, plain `li run`s
each with a `li wait` on it, `li flow run` of a three-leg flow, `li team send`; and one
`li team inbox --follow`. Every command is kept (``Done``) with when it ended, so a round
can check what each said against what the new primary holds. ``Probe`` commits a counter
to the primary as fast as it answers and keeps the last value acknowledged: after the
failover, a new primary that holds less lost acknowledged commits.

The work (``WORK``) appends to ``<dir>/<session id>.txt`` (``LIRUN_PARENT_RUN_ID``, the
session its supervising `li` made), in ``ledgerkit``'s format: ``start``, ``tick``
every 0.1 s, ``end``; so the copies of one piece of work are found by its runs' sessions.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.faultkit import Done, Hung, Round, finish, start

WORK = """\
import os, sys, time
where, seconds = sys.argv[1], float(sys.argv[2])
session = os.environ.get("LIRUN_PARENT_RUN_ID", "none")
pid = f"{os.getpid()}.{os.urandom(4).hex()}"

def line(word):
    with open(os.path.join(where, session + ".txt"), "a") as handle:
        handle.write(f"{word} {pid} {time.time():.3f}\\n")

line("start")
until = time.monotonic() + seconds
while time.monotonic() < until:
    time.sleep(0.1)
    line("tick")
line("end")
"""

FLOW = """\
legs:
  - id: first
    run: [sh, -c, "sleep 0.5"]
  - id: second
    depends_on: [first]
    run: [sh, -c, "sleep 1"]
  - id: beside
    depends_on: [first]
    run: [sh, -c, "sleep 0.3"]
"""

# How long one `li` command of the load may take before it counts as hung: longer than
# two failovers with their promotions (10 s each) and the bounded waits on the way.
COMMAND_DEADLINE = 45.0


@dataclass
class Ended:
    """A finished command of the load, and the wall time it ended."""

    done: Done
    at: float
    extra: dict[str, str] = field(default_factory=dict)


class Load:
    """The loops of `li` commands on one round's database (see the module's doc)."""

    def __init__(
        self, rnd: Round, env: dict[str, str], python: str, work: Path, ledgers: Path
    ) -> None:
        self.rnd = rnd
        self.env = env
        self.python = python
        self.work = work
        self.ledgers = ledgers
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.ended: list[Ended] = []
        self.problems: list[BaseException] = []
        self.threads: list[threading.Thread] = []
        self.follower: Any = None
        self.runs = 0

    # --- the loops -----------------------------------------------------------------------

    def begin(self) -> None:
        (self.rnd.workdir / "flow.yaml").write_text(FLOW)
        self.follower = start(
            self.rnd, "team", "inbox", "crew", "--as", "bob", "--follow", env=self.env
        )
        for loop, pause in (
            (self._submit, 0.7),
            (self._run_and_wait, 0.3),
            (self._run_and_wait, 0.5),
            (self._flow, 0.5),
            (self._send, 0.8),
        ):
            thread = threading.Thread(target=self._loop, args=(loop, pause), daemon=True)
            thread.start()
            self.threads.append(thread)

    def end(self, timeout: float = COMMAND_DEADLINE + 15) -> None:
        """Stop the loops (each ends the command in hand first)."""
        self.stop.set()
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.1, deadline - time.monotonic()))
        alive = [t for t in self.threads if t.is_alive()]
        if alive:
            raise Hung(f"{len(alive)} load loops did not end in {timeout:.0f}s")

    def _loop(self, step: Any, pause: float) -> None:
        while not self.stop.is_set():
            try:
                step()
            except BaseException as exc:  # kept: the round reports it
                with self.lock:
                    self.problems.append(exc)
            self.stop.wait(pause)

    def _keep(self, done: Done, **extra: str) -> None:
        with self.lock:
            self.ended.append(Ended(done, time.time(), extra))

    def _li(self, label: str, *args: str, tagged: bool = False) -> Done:
        proc = start(self.rnd, *args, env=self.env, tagged=tagged)
        return finish(proc, label, timeout=COMMAND_DEADLINE)

    def _submit(self) -> None:
        argv = ("run", self.python, str(self.work), str(self.ledgers), "1.2")
        done = self._li("li submit", "submit", "--retries", "1", "--", *argv)
        self._keep(done, kind="submit")

    def _run_and_wait(self) -> None:
        with self.lock:
            self.runs += 1
            run_id = f"fo{self.rnd.index}-{self.runs}-{time.time_ns() % 10**9}"
        proc = start(self.rnd, "run", "--run-id", run_id, "--json", "--", "sh", "-c",
                     "sleep 0.8", env=self.env, tagged=True)  # fmt: skip
        # `li wait` on an id no row has yet says so (exit 2): it starts once the row is
        # there (a run that ended before it is still waited on: it prints at once).
        waiter = None
        while proc.poll() is None and waiter is None:
            if self._row_exists(run_id):
                waiter = start(self.rnd, "wait", run_id, "--timeout", "40", env=self.env)
            else:
                time.sleep(0.1)
        done = finish(proc, "li run", timeout=COMMAND_DEADLINE)
        self._keep(done, kind="run", run_id=run_id)
        if waiter is not None:
            waited = finish(waiter, "li wait", timeout=COMMAND_DEADLINE)
            self._keep(waited, kind="wait", run_id=run_id)

    def _row_exists(self, run_id: str) -> bool:
        from support.faultkit import read_row

        try:
            return read_row(self.env["LIRUN_DB_URL"], run_id) is not None
        except Exception:  # no server takes connections now: look again
            return False

    def _flow(self) -> None:
        done = self._li("li flow run", "flow", "run", "flow.yaml", "--json", tagged=True)
        self._keep(done, kind="flow")

    def _send(self) -> None:
        text = f"note-{time.time_ns()}"
        done = self._li("li team send", "team", "send", "crew", "--from", "ann", "--to", "bob",
                        text)  # fmt: skip
        self._keep(done, kind="send", text=text)

    # --- what the commands said -------------------------------------------------------------

    def of(self, kind: str) -> list[Ended]:
        with self.lock:
            return [e for e in self.ended if e.extra.get("kind") == kind]


def summary(done: Done) -> dict[str, Any] | None:
    """The last JSON object a command printed on stdout, or None."""
    for line in reversed(done.out.splitlines()):
        if line.startswith("{"):
            try:
                return dict(json.loads(line))
            except ValueError:
                return None
    return None


class Probe:
    """Commits ``n = n + 1`` to the primary's probe table until it fails; ``acked`` is
    the last value a commit returned."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.acked = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def begin(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS failover_probe (n bigint NOT NULL)")
            conn.execute("TRUNCATE failover_probe")
            conn.execute("INSERT INTO failover_probe VALUES (0)")
        self.thread.start()

    def _run(self) -> None:
        import psycopg

        try:
            with psycopg.connect(self.url, autocommit=True, connect_timeout=3) as conn:
                while not self.stop.is_set():
                    row = conn.execute("UPDATE failover_probe SET n = n + 1 RETURNING n").fetchone()
                    assert row is not None
                    self.acked = int(row[0])
                    time.sleep(0.01)
        except (psycopg.Error, OSError):
            return

    def end(self) -> int:
        self.stop.set()
        self.thread.join(10)
        return self.acked


def held_by(url: str) -> int:
    """The probe's value on the server of ``url``."""
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        row = conn.execute("SELECT n FROM failover_probe").fetchone()
        return int(row[0]) if row else -1


def stop_process(proc: Any, label: str, timeout: float = 20.0) -> Done:
    """SIGTERM a long-lived `li` and collect it; Hung when it does not end in ``timeout``."""
    if proc.poll() is None:
        proc.terminate()
    try:
        return finish(proc, label, timeout=timeout)
    except subprocess.TimeoutExpired as exc:  # pragma: no cover - finish raises Hung
        raise Hung(str(exc)) from None

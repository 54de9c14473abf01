"""One small home built for real, shared by the tests that validate JSON against its
schema (``li ... --json`` in test_json_schemas, the dashboard's API in test_ui_openapi):
a run, a failed flow (with a team), a show, an open invocation, a schedule run, an
orphaned record, a live worker, teams with messages, and a schedules file to apply."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from lirun.liveness import current_owner
from lirun.store import open_store
from support.execkit import run_li
from support.showfilekit import COMMAND_SHOW, write_show


class Home:
    """The home every command reads; ``ids`` are what the scenario created."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = dict(os.environ)
        self.env.update(
            {
                "LIRUN_HOME": str(root / "home"),
                "LIRUN_DB_URL": str(root / "home" / "state.db"),
                "PYTHONUNBUFFERED": "1",
            }
        )
        for var in ("LIRUN_RUN_ID", "LIONAGI_RUN_ID"):
            self.env.pop(var, None)
        self.ids: dict[str, str] = {}

    def li(self, *args: str, ok: tuple[int, ...] = (0,)) -> str:
        proc = run_li(*args, env=self.env, cwd=self.root)
        assert proc.returncode in ok, (args, proc.returncode, proc.stderr)
        return proc.stdout


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def build_home(home: Home) -> None:
    root = home.root
    (root / "home").mkdir()
    run = json.loads(home.li("run", "--json", "--", "true"))
    home.ids["run"] = run["run_id"]
    (root / "flow.yaml").write_text("legs:\n  - {id: a, run: [echo, hi]}\n")
    # team: true gives a team a flow made (owner_type invocation) to li team list
    (root / "broken.yaml").write_text("team: true\nlegs:\n  - {id: a, run: [sh, -c, 'exit 3']}\n")
    broken = home.li("flow", "run", str(root / "broken.yaml"), "--json", ok=(1,))
    home.ids["flow"] = json.loads(broken)["invocation_id"]  # a failed flow: attention
    show = write_show(root / "show", COMMAND_SHOW.format(topic="t1"))
    (root / "show" / "repo" / "base.txt").write_text("x")
    subprocess.run(["git", "-C", str(root / "show" / "repo"), "add", "base.txt"], check=True)
    subprocess.run(
        ["git", "-C", str(root / "show" / "repo"), "commit", "-q", "-m", "base"], check=True
    )
    home.ids["show_file"] = str(show)
    second = root / "show" / "second.yaml"
    second.write_text(show.read_text().replace("t1", "t2"))
    home.ids["second_show"] = str(second)
    report = json.loads(home.li("show", "run", str(show), "--json"))
    home.ids["show"] = report["show_id"]
    home.ids["invocation"] = home.li("invoke", "start", "--skill", "s").strip()
    home.li("submit", "--", "run", "true")  # a schedule run for li status --kind
    store = open_store(home.env["LIRUN_DB_URL"])
    try:
        owner = {**current_owner(), "owner_pid": _dead_pid()}
        home.ids["orphan"] = store.sessions.create(**owner).id
        store.workers.register(owner=current_owner(), concurrency=1, transport="local",
                              lease_seconds=600)  # fmt: skip
    finally:
        store.close()
    home.li("team", "create", "crew", "--member", "a", "--member", "b")
    home.li("team", "send", "crew", "--from", "a", "--to", "b", "hi b")
    home.li("team", "send", "crew", "--from", "b", "hello all")
    home.li("team", "inbox", "crew", "--as", "b")  # read: its next inbox has read_at set
    home.li("team", "create", "done", "--member", "a")  # for li team archive
    (root / "schedules.yaml").write_text(
        "schedules:\n  - name: hourly\n    every: 1h\n    action: run true\n"
    )

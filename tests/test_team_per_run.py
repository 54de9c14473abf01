"""A team is one run's team, on both backends: ``team: true`` makes a new team per flow
invocation or show (named after it, whole id), ``team: NAME`` joins the active team of
that name and says so; ``li team show`` names each member's run."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

from lirun.flows.engine import FlowOptions, run_flow
from lirun.flows.load import load_flow
from lirun.shows.engine import ShowOptions, run_show
from lirun.teams.membership import TeamSetting
from support.cli import li_command
from support.showkit import play, show_repo, spec, writes
from support.storekit import opened


def _flow_file(tmp_path: Path, team: str) -> Path:
    path = tmp_path / "pair.yaml"
    path.write_text(f'team: {team}\nlegs:\n  - id: a\n    run: ["true"]\n', encoding="utf-8")
    return path


def test_a_flow_file_with_team_true_run_twice_makes_two_teams(db_url: str, tmp_path: Path) -> None:
    spec_ = load_flow(_flow_file(tmp_path, "true"))
    first = run_flow(spec_, db_url=db_url, options=FlowOptions(retry_delay=0.0))
    second = run_flow(spec_, db_url=db_url, options=FlowOptions(retry_delay=0.0))
    assert first.status == second.status == "completed"
    with opened(db_url) as store:
        [one] = store.teams.of_owner("invocation", first.invocation_id)
        [two] = store.teams.of_owner("invocation", second.invocation_id)
        assert len(store.teams.list_all()) == 2
    assert one.id != two.id
    # each named after its flow file and its invocation's whole id, not the day's date
    assert (one.name, two.name) == (f"pair-{first.invocation_id}", f"pair-{second.invocation_id}")
    assert one.status == two.status == "active"


def test_team_name_used_twice_joins_and_says_so(db_url: str, tmp_path: Path) -> None:
    spec_ = load_flow(_flow_file(tmp_path, "standing-crew"))
    said: list[str] = []
    options = FlowOptions(retry_delay=0.0, on_progress=said.append)
    first = run_flow(spec_, db_url=db_url, options=options)
    assert not [line for line in said if "joined existing team" in line]
    second = run_flow(spec_, db_url=db_url, options=options)
    assert first.status == second.status == "completed"
    with opened(db_url) as store:
        [team] = store.teams.list_all()
        [notice] = store.teams.conversation(team.id)
        invocation = store.invocations.get(second.invocation_id)
    assert (team.name, team.owner_id) == ("standing-crew", first.invocation_id)
    line = f"joined existing team standing-crew ({team.id}, created by flow {first.invocation_id})"
    assert line in said
    assert invocation is not None
    assert invocation.artifacts_path
    assert line in (Path(invocation.artifacts_path) / "flow.log").read_text()
    # the record: the team's conversation says who joined
    assert notice.sender == "lirun"
    assert notice.body == f"flow {second.invocation_id} (pair) joined this team"


def test_two_shows_with_team_true_have_separate_teams(db_url: str, tmp_path: Path) -> None:
    reports = []
    for name in ("a", "b"):  # the same topic, on the same day: still two teams
        repo = show_repo(tmp_path / name)
        show_spec = dataclasses.replace(
            spec(repo, [play(f"p{name}", writes(f"{name}.txt", name))], topic="pair work"),
            team=TeamSetting(None),
        )
        reports.append(run_show(show_spec, db_url=db_url, options=ShowOptions(parallel=1)))
    assert [r.status for r in reports] == ["completed", "completed"]
    with opened(db_url) as store:
        teams = [store.teams.of_owner("show", r.show_id) for r in reports]
        [first], [second] = teams
        heard = [[m.body for m in store.teams.conversation(t.id)] for t in (first, second)]
        members = [[m.member for m in store.teams.members(t.id)] for t in (first, second)]
    assert first.id != second.id
    assert first.name == f"pair-work-{reports[0].show_id}"
    assert members == [["pa"], ["pb"]]
    # each show's merge notice reached its own team only
    assert [body.split(" as ")[0] for body in heard[0]] == [
        f"play pa merged into {reports[0].integration}"
    ]
    assert [body.split(" as ")[0] for body in heard[1]] == [
        f"play pb merged into {reports[1].integration}"
    ]


def test_li_team_show_names_each_members_run_from_its_messages(db_url: str, tmp_path: Path) -> None:
    with opened(db_url) as store:
        team = store.teams.create_with_members("crew", ["api", "web"])
        store.teams.send_message(team.id, sender="api", recipient="all", text="one", run_id="r-1")
        store.teams.send_message(team.id, sender="api", recipient="all", text="two", run_id="r-2")
        store.teams.send_message(team.id, sender="api", recipient="all", text="by hand")
        runs = {m.member: m.run_id for m in store.teams.member_summary(team.id)}
    assert runs == {"api": "r-2", "web": None}  # the newest message that names a run
    env = {**os.environ, "LIRUN_DB_URL": db_url, "COLUMNS": "200"}
    shown = subprocess.run(
        li_command("team", "show", "crew"), env=env, capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    [api] = [line for line in shown.stdout.splitlines() if line.lstrip().startswith("api")]
    assert api.rstrip().endswith("r-2")


def test_children_of_li_started_by_path_find_li_without_it_on_path(
    db_url: str, tmp_path: Path
) -> None:
    """`.venv/bin/li` run as the README says, with a PATH that has no `li`: what it starts
    (a plain `li run`, a flow's command leg) can run `"$LIRUN_LI"` and a bare `li`, and
    a nested `li` passes the same on."""
    li = Path(sys.executable).parent / "li"
    env = {**os.environ, "LIRUN_DB_URL": db_url, "PATH": "/usr/bin:/bin"}
    env.pop("LIRUN_LI", None)
    assert subprocess.run(["sh", "-c", "command -v li"], env=env).returncode != 0

    def probe(name: str) -> str:
        out = tmp_path / f"{name}.out"
        return (
            f'echo "$LIRUN_LI" > {out}; command -v li >> {out}; '
            f"li team create {name} --member x >/dev/null && "
            f'"$LIRUN_LI" team send {name} --from x --to all "hello from {name}" >/dev/null && '
            f"li run -- sh -c 'echo \"$LIRUN_LI\"; command -v li' >> {out}"
        )

    plain = subprocess.run(
        [str(li), "run", "--", "sh", "-c", probe("plain")],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert plain.returncode == 0, plain.stderr
    flow = tmp_path / "probe.yaml"
    flow.write_text(f"legs:\n  - id: leg\n    run: [sh, -c, {json.dumps(probe('leg'))}]\n")
    flowed = subprocess.run(
        [str(li), "flow", "run", str(flow)],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert flowed.returncode == 0, flowed.stderr
    with opened(db_url) as store:
        for name in ("plain", "leg"):
            team = store.teams.get(store.teams.resolve(name))
            assert team is not None
            [message] = store.teams.conversation(team.id)
            assert message.body == f"hello from {name}"
            lines = (tmp_path / f"{name}.out").read_text().splitlines()
            # LIRUN_LI and `li` on PATH, in the child and in the child's child
            assert lines[0] == lines[2] == str(li), lines
            assert Path(lines[1]).name == Path(lines[3]).name == "li", lines
            assert Path(lines[1]).resolve() == Path(lines[3]).resolve() == li.resolve()
            assert "python" not in os.listdir(Path(lines[1]).parent)  # only li goes on PATH


def test_a_second_show_naming_the_team_joins_it_and_says_so(db_url: str, tmp_path: Path) -> None:
    said: list[str] = []
    reports = []
    for name in ("a", "b"):
        repo = show_repo(tmp_path / name)
        show_spec = dataclasses.replace(
            spec(repo, [play(f"p{name}", writes(f"{name}.txt", name))], topic=name),
            team=TeamSetting("standing"),
        )
        options = ShowOptions(parallel=1, on_progress=said.append)
        reports.append(run_show(show_spec, db_url=db_url, options=options))
    with opened(db_url) as store:
        [team] = store.teams.list_all()
        heard = [(m.sender, m.body) for m in store.teams.conversation(team.id)]
    first, second = (r.show_id for r in reports)
    assert [line for line in said if "joined existing" in line] == [
        f"joined existing team standing ({team.id}, created by show {first})"
    ]
    assert ("lirun", f"show {second} (b) joined this team with members pb") in heard


def test_which_li_a_child_gets() -> None:
    from lirun.settings import choose_li_path

    def choose(argv0: str, inherited: str = "", *, have: tuple[str, ...]) -> str | None:
        return choose_li_path(argv0, "/venv/bin/python", inherited, is_program=have.__contains__)

    everything = ("/venv/bin/li", "/opt/li", "/usr/local/bin/lirun")
    assert choose("/usr/local/bin/lirun", "/opt/li", have=everything) == "/usr/local/bin/lirun"
    # python -m lirun: the li that started it, else the one beside the interpreter
    module = "/src/lirun/__main__.py"
    assert choose(module, "/opt/li", have=everything) == "/opt/li"
    assert choose(module, "relative/li", have=everything) == "/venv/bin/li"
    assert choose(module, "/gone/li", have=("/venv/bin/li",)) == "/venv/bin/li"
    assert choose(module, have=()) is None
    assert choose("/usr/bin/pytest", have=("/venv/bin/lirun",)) == "/venv/bin/lirun"


def test_a_detached_run_passes_its_li_on(db_url: str, tmp_path: Path) -> None:
    li = Path(sys.executable).parent / "li"
    env = {**os.environ, "LIRUN_DB_URL": db_url, "PATH": "/usr/bin:/bin"}
    env.pop("LIRUN_LI", None)
    out = tmp_path / "detached.out"
    started = subprocess.run(
        [str(li), "run", "--detach", "--json", "--", "sh", "-c",
         f'echo "$LIRUN_LI" > {out}; command -v li >> {out}'],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    run_id = json.loads(started.stdout)["run_id"]
    waited = subprocess.run(
        [str(li), "wait", run_id, "--timeout", "60"], env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert waited.returncode == 0, waited.stdout + waited.stderr
    lines = out.read_text().splitlines()
    assert lines[0] == str(li)  # the worker ran as `python -m lirun`
    assert Path(lines[1]).resolve() == li.resolve()

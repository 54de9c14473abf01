"""Every ``--json`` output names its shape and validates against the schema shipped for it
(issue 23, item 3; docs/json.md).

One small home is built once, for real: runs, a flow, a show, schedules, a worker, an
orphaned record to reap. Each command then runs in a subprocess and every JSON value it
prints (an object, each element of an array, each line of a line stream) is validated
with ``jsonschema`` against ``lirun.schemas``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from lirun.schemas import load_schema, schema_names
from support.execkit import run_li, start_li
from support.jsonhome import Home, build_home
from support.providerkit import env_with_fake_bin, make_fake_bin_dir

SRC = Path(__file__).resolve().parent.parent / "src" / "lirun"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Home]:
    made = Home(tmp_path_factory.mktemp("json-home"))
    build_home(made)
    yield made


def values(text: str, lines: bool) -> list[object]:
    """Every JSON value printed: one per line for a line stream, else the one document,
    an array's elements each."""
    docs = [json.loads(line) for line in text.splitlines() if line.strip()] if lines else [
        json.loads(text)
    ]  # fmt: skip
    found: list[object] = []
    for doc in docs:
        found.extend(doc if isinstance(doc, list) else [doc])
    return found


# (label, argv; {name} is filled from home.ids, expected schema, a line stream?)
COMMANDS: list[tuple[str, tuple[str, ...], str, bool]] = [
    ("run", ("run", "--json", "--", "true"), "run_result", False),
    ("run --detach", ("run", "--detach", "--json", "--", "true"), "started", False),
    ("wait", ("wait", "{run}", "--json"), "wait", True),
    ("status", ("status", "--json"), "status_row", False),
    ("status ID", ("status", "{run}", "--json"), "record", False),
    ("status FLOW", ("status", "{flow}", "--json"), "record", False),
    ("status --kind play", ("status", "--kind", "play", "--json"), "run_row", False),
    ("status --kind invocation", ("status", "--kind", "invocation", "--json"), "run_row", False),
    (
        "status --kind schedule_run",
        ("status", "--kind", "schedule_run", "--json"),
        "run_row",
        False,
    ),
    ("attention", ("attention", "--json"), "attention_item", False),
    ("db path", ("db", "path", "--json"), "db_path", False),
    ("db migrate", ("db", "migrate", "--json"), "db_migrate", False),
    ("invoke start", ("invoke", "start", "--skill", "s", "--json"), "invocation", False),
    (
        "invoke end",
        ("invoke", "end", "{invocation}", "--status", "completed", "--json"),
        "invocation_end",
        False,
    ),
    ("reap", ("reap", "--json"), "reap", True),
    (
        "schedule add",
        ("schedule", "add", "nightly", "--every", "1h", "--json", "--", "run", "true"),
        "schedule",
        False,
    ),
    ("schedule list", ("schedule", "list", "--json"), "schedule", False),
    ("schedule show", ("schedule", "show", "nightly", "--json"), "schedule_detail", False),
    ("schedule fire", ("schedule", "fire", "nightly", "--json"), "schedule_run", False),
    ("schedule runs", ("schedule", "runs", "nightly", "--json"), "schedule_run", False),
    ("schedule disable", ("schedule", "disable", "nightly", "--json"), "schedule", False),
    (
        "schedule apply",
        ("schedule", "apply", "{root}/schedules.yaml", "--dry-run", "--json"),
        "schedule_apply",
        False,
    ),
    ("submit", ("submit", "--json", "--", "run", "true"), "schedule_run", False),
    ("worker status", ("worker", "status", "--json"), "worker", False),
    ("flow run", ("flow", "run", "{root}/flow.yaml", "--json"), "flow_result", False),
    (
        "flow run --dry-run",
        ("flow", "run", "{root}/flow.yaml", "--dry-run", "--json"),
        "flow_plan",
        False,
    ),
    (
        "flow run --detach",
        ("flow", "run", "{root}/flow.yaml", "--detach", "--json"),
        "started",
        False,
    ),
    ("flow list", ("flow", "list", "--json"), "flow_row", False),
    (
        "show run --dry-run",
        ("show", "run", "{show_file}", "--dry-run", "--json"),
        "show_plan",
        False,
    ),
    ("show run", ("show", "run", "{second_show}", "--json"), "show_report", False),
    ("show status", ("show", "status", "--json"), "show_row", False),
    ("show status ID", ("show", "status", "{show}", "--json"), "show_report", False),
    ("show list", ("show", "list", "--json"), "show_row", False),
    ("gc --dry-run", ("gc", "--older-than", "1d", "--dry-run", "--json"), "gc", False),
    (
        "gc --schedule",
        ("gc", "--older-than", "90d", "--schedule", "1d", "--json"),
        "schedule",
        False,
    ),
    (
        "override",
        (
            "override",
            "session",
            "{run}",
            "--to",
            "failed",
            "--reason",
            "run.failed.admin",
            "--actor",
            "a",
            "--justification",
            "j",
            "--json",
        ),
        "override",
        False,
    ),
    ("team create", ("team", "create", "fresh", "--member", "x", "--json"), "team", False),
    ("team list", ("team", "list", "--json"), "team", False),
    ("team show", ("team", "show", "crew", "--json"), "team_detail", False),
    ("team send", ("team", "send", "crew", "--from", "a", "ping", "--json"), "team_message", False),
    ("team inbox", ("team", "inbox", "crew", "--as", "b", "--json"), "team_message", True),
    ("team log", ("team", "log", "crew", "--json"), "team_message", True),
    (
        "team archive",
        ("team", "archive", "done", "--actor", "a", "--justification", "j", "--json"),
        "team",
        False,
    ),
    ("show clean", ("show", "clean", "{show}", "--json"), "show_clean", False),
    ("flow clean", ("flow", "clean", "{flow}", "--json"), "flow_clean", False),
]

# The home's show already ran: its dry run says what would stop a real run (its
# "problems", validated too) and exits 2.
EXITS = {"show run --dry-run": (2,)}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("label", "argv", "shape", "lines"), COMMANDS, ids=[c[0] for c in COMMANDS]
)
def test_json_output_validates_against_its_schema(
    home: Home, label: str, argv: tuple[str, ...], shape: str, lines: bool
) -> None:
    names = {**home.ids, "root": str(home.root)}
    args = [arg.format(**names) for arg in argv]
    _validate(label, home.li(*args, ok=EXITS.get(label, (0, 1))), shape, lines)


def _validate(label: str, text: str, shape: str, lines: bool = False) -> None:
    found = values(text, lines)
    assert found, f"{label} printed no JSON value to check: {text!r}"
    schema = load_schema(shape)
    validator = jsonschema.Draft202012Validator(schema)
    for value in found:
        assert isinstance(value, dict), value
        assert value.get("schema") == schema["title"], value
        errors = sorted(validator.iter_errors(value), key=lambda e: e.json_path)
        assert not errors, f"{label}: " + "; ".join(f"{e.json_path}: {e.message}" for e in errors)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["inbox", "log"])
def test_team_follow_lines_are_team_messages(home: Home, command: str) -> None:
    """A --follow line is a team message too: the one there was, one that came while it
    followed, up to the archive that ends it."""
    team = f"followed-{command}"
    home.li("team", "create", team, "--member", "a", "--member", "b")
    home.li("team", "send", team, "--from", "a", "--to", "b", "before")
    extra = ("--as", "b") if command == "inbox" else ()
    follower = start_li("team", command, team, *extra, "--follow", "--json",
                        env=home.env, cwd=home.root)  # fmt: skip
    try:
        assert follower.stdout is not None
        first = follower.stdout.readline()  # printed: it follows from here on
        home.li("team", "send", team, "--from", "a", "--to", "b", "while following")
        second = follower.stdout.readline()
        home.li("team", "archive", team, "--actor", "a", "--justification", "done")
        rest, err = follower.communicate(timeout=30)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    assert follower.returncode == 0, err
    text = first + second + rest
    _validate(f"team {command} --follow", text, "team_message", lines=True)
    assert [json.loads(line)["text"] for line in text.splitlines()] == [
        "before",
        "while following",
    ]


def test_team_json_validates_on_both_backends(li_env: dict[str, str], tmp_path: Path) -> None:
    """The team shapes hold on PostgreSQL too (its numbers and nulls come back through
    another driver): each li team --json output, on this test's backend."""

    def li(*args: str) -> str:
        proc = run_li("team", *args, env=li_env, cwd=tmp_path)
        assert proc.returncode == 0, (args, proc.stderr)
        return proc.stdout

    _validate("create", li("create", "crew", "--member", "a", "--member", "b", "--json"), "team")
    _validate(
        "send", li("send", "crew", "--from", "a", "--to", "b", "hi", "--json"), "team_message"
    )
    li("send", "crew", "--from", "b", "all of you")
    li("inbox", "crew", "--as", "b")
    _validate("inbox", li("inbox", "crew", "--as", "b", "--json"), "team_message", lines=True)
    _validate("log", li("log", "crew", "--json"), "team_message", lines=True)
    _validate("show", li("show", "crew", "--json"), "team_detail")
    archived = li("archive", "crew", "--actor", "a", "--justification", "j", "--json")
    _validate("archive", archived, "team")
    _validate("list", li("list", "--json"), "team")
    assert json.loads(archived)["archived_at"] is not None


def test_li_agent_json_is_a_run_result(home: Home) -> None:
    env = env_with_fake_bin(
        "claude/success.jsonl", base=home.env, fake_bin=make_fake_bin_dir(home.root / "bin")
    )
    proc = run_li("agent", "claude", "fix it", "--json", env=env, cwd=home.root)
    assert proc.returncode == 0, proc.stderr
    _validate("agent", proc.stdout, "run_result")


# Shapes past their first version (docs/json.md, "Shape versions").
VERSIONS = {"gc": 2, "record": 2, "run_row": 2, "wait": 2}


def test_every_shipped_schema_is_valid_and_checked_by_a_command() -> None:
    checked = {f"lirun.{shape}/{VERSIONS.get(shape, 1)}" for _, _, shape, _ in COMMANDS}
    for name in schema_names():
        jsonschema.Draft202012Validator.check_schema(load_schema(name))
    assert set(schema_names()) == checked


def test_every_schema_named_in_the_source_ships() -> None:
    named: set[str] = set()
    for path in SRC.rglob("*.py"):
        named.update(re.findall(r'"(lirun\.[a-z_]+/\d+)"', path.read_text()))
    assert named
    assert named <= set(schema_names()), named - set(schema_names())


def test_li_schema_lists_and_prints(home: Home) -> None:
    listing = home.li("schema")
    assert len(listing.splitlines()) == len(schema_names())
    assert "lirun.run_result/1" in listing
    for given in ("wait", "lirun.wait", "lirun.wait/2"):
        assert json.loads(home.li("schema", given))["title"] == "lirun.wait/2"
    proc = run_li("schema", "lirun.wait/9", env=home.env, cwd=home.root)
    assert proc.returncode == 2
    assert "no schema 'lirun.wait/9'" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1

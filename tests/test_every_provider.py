"""Every built-in provider on every surface that takes an agent (issue 30, item 6): ``li
agent`` with a profile and a playbook, flow legs, show plays, schedule actions and ``li
submit`` drained by a real worker, teams (the prompt preamble), the dashboard's JSON API
(provider column, CLI version), the metrics labels and the ``--json`` outputs.

Each surface runs real ``li`` processes against the fake executables replaying the
provider's successful fixture, and checks what the record says: provider, model, CLI
version and status. The providers come from the registry (``registry.BUILTIN``); a new
built-in fails here until it names its successful fixture in ``SUCCESS``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import jsonschema
import pytest

from lirun.providers.registry import BUILTIN, get_provider
from lirun.schemas import load_schema
from lirun.store import open_store
from support.cli import li_command
from support.gitkit import GIT_ENV, make_repo
from support.providerkit import env_with_fake_bin, fixture_path, make_fake_bin_dir
from support.uikit import serve
from support.workerkit import run_row, workers

TIMEOUT = 90
BUILTIN_NAMES = tuple(cls().name for cls in BUILTIN)
# What the fake executables print for --version: the version lirun records unless the
# stream names its own.
FAKE_VERSION = "9.8.7"
PROMPT = "Say hello."
# `li` by its absolute path, as the team preamble names it: the one beside this interpreter.
LI = Path(sys.executable).parent / "li"


@dataclass(frozen=True, slots=True)
class Success:
    """A provider's successful fixture and what a run replaying it records."""

    fixture: str
    model: str  # the model a run asks for (PROVIDER/MODEL)
    recorded_model: str  # what the record says: the stream's model, where it names one
    version: str = FAKE_VERSION  # the CLI version recorded (the stream's, where it says one)


SUCCESS: dict[str, Success] = {
    "claude": Success("claude/success.jsonl", "opus", "claude-sonnet-4-5", version="2.1.0"),
    "codex": Success("codex/success.jsonl", "gpt-5", "gpt-5"),
    "gemini": Success("gemini/ok.jsonl", "gemini-2.5-pro", "gemini-2.5-flash"),
    "pi": Success("pi/ok.jsonl", "mock/other", "mock/mock-model"),
    "copilot": Success("copilot/ok.jsonl", "other-model", "gpt-4o"),
    # The model and the version are in OpenCode's log on stderr, beside the stream.
    "opencode": Success(
        "opencode/logged.jsonl", "mock/other", "mock/mock-model", version="1.18.33"
    ),
}

each_provider = pytest.mark.parametrize("provider", BUILTIN_NAMES)


def success(provider: str) -> Success:
    if provider not in SUCCESS:
        pytest.fail(
            f"built-in provider {provider!r} has no successful fixture here: add one to "
            f"SUCCESS in {Path(__file__).name} (its fixture, a model, what the record says)"
        )
    return SUCCESS[provider]


def test_every_built_in_provider_has_a_successful_fixture() -> None:
    missing = sorted(set(BUILTIN_NAMES) - set(SUCCESS))
    assert missing == [], f"add these built-in providers to SUCCESS: {missing}"
    for name in BUILTIN_NAMES:
        assert fixture_path(SUCCESS[name].fixture).is_file(), SUCCESS[name].fixture


# -- helpers ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fake_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One directory of fake executables for the module, first on PATH in every test."""
    return make_fake_bin_dir(tmp_path_factory.mktemp("fake-bin"))


def agent_env(
    provider: str, base: dict[str, str], fake_bin: Path, argv_log: Path, **kw: Any
) -> dict[str, str]:
    """``base`` with the fake ``provider`` replaying its successful fixture, logging each
    call (argv, cwd, stdin) to ``argv_log``."""
    env = env_with_fake_bin(
        success(provider).fixture, base=base, fake_bin=fake_bin, argv_log=argv_log, **kw
    )
    env["LIRUN_FAKE_VERSION"] = f"{provider} {FAKE_VERSION}"
    return {**env, **GIT_ENV, "PYTHONUNBUFFERED": "1"}


def li(
    env: dict[str, str], *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        li_command(*args), env=env, cwd=cwd, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=TIMEOUT,
    )  # fmt: skip


def li_json(env: dict[str, str], *args: str, cwd: Path | None = None) -> Any:
    at = args.index("--") if "--" in args else len(args)  # before an action's words
    done = li(env, *args[:at], "--json", *args[at:], cwd=cwd)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    value = json.loads(done.stdout)
    for item in value if isinstance(value, list) else [value]:
        conforms(item)
    return value


def conforms(value: dict[str, Any]) -> None:
    """A ``--json`` value validates against the shipped schema it names."""
    title = value["schema"]
    schema = load_schema(title.removeprefix("lirun.").partition("/")[0])
    assert schema["title"] == title
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(value))
    assert not errors, f"{title}: " + "; ".join(f"{e.json_path}: {e.message}" for e in errors)


def calls(argv_log: Path) -> list[dict[str, Any]]:
    """The fake provider's calls (``--version`` is not logged)."""
    return [json.loads(line) for line in argv_log.read_text().splitlines()]


def asked_for(provider: str, call: dict[str, Any]) -> None:
    """The provider's CLI was given the model asked for (pi: PROVIDER/MODEL, split; others
    PROVIDER/MODEL whole)."""
    model = success(provider).model
    assert model in call["argv"] or model.rsplit("/", 1)[-1] in call["argv"], call["argv"]


def recorded(env: dict[str, str], session_id: str, provider: str) -> dict[str, Any]:
    """``li status ID --json`` of an agent session, checked against the provider's
    fixture: provider, its executable (found on PATH), model, CLI version, completed."""
    row = li_json(env, "status", session_id)
    expected = success(provider)
    executable = Path(row["command_json"][0])
    assert executable.name == get_provider(provider).executable_name, row["command_json"]
    assert str(executable.parent) == env["PATH"].split(os.pathsep)[0]  # the fake bin dir
    assert (row["id"], row["kind"]) == (session_id, "run")
    assert row["provider"] == provider
    assert row["model"] == expected.recorded_model
    assert row["provider_version"] == expected.version
    assert (row["status"], row["status_reason_code"]) == ("completed", "run.completed.ok")
    assert row["exit_code"] == 0
    assert row["engine_session_uid"]
    return row


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def preamble_then(prompt: str, stdin: str, member: str) -> None:
    """The agent's prompt is the team preamble (naming the absolute ``li``) then ``prompt``."""
    assert stdin.startswith("You work in team '"), stdin
    assert f"as member '{member}'" in stdin.splitlines()[0], stdin
    assert f'{LI} team inbox "$LIRUN_TEAM" --unread' in stdin, stdin
    assert stdin.endswith(prompt), stdin


# -- li agent: profile, playbook, --json, li status, li wait, dashboard, metrics ---------


@pytest.fixture
def env_db(db_url: str, lirun_home: Path) -> Iterator[dict[str, str]]:
    """``li``'s environment on this test's database (each backend)."""
    yield {**os.environ, "LIRUN_HOME": str(lirun_home), "LIRUN_DB_URL": db_url}


@each_provider
def test_an_agent_run_with_a_profile_and_a_playbook_in_every_view_of_the_record(
    provider: str, env_db: dict[str, str], lirun_home: Path, fake_bin: Path, tmp_path: Path
) -> None:
    expected = success(provider)
    write(
        lirun_home / "profiles" / "helper.yaml",
        f"""
        description: this provider's agent
        defaults:
          provider: {provider.upper()}
          model: {json.dumps(expected.model)}
          idle_timeout: 60
        """,
    )
    write(
        lirun_home / "playbooks" / "greet.yaml",
        f"""
        prompt: {PROMPT}
        defaults:
          timeout: 120
        artifacts:
          expected:
            - {{id: notes, path: notes.md, required: false}}
        """,
    )
    argv_log = tmp_path / "argv.jsonl"
    env = agent_env(provider, env_db, fake_bin, argv_log)
    result = li_json(env, "agent", provider, "--profile", "helper", "--playbook", "greet")
    assert result["schema"] == "lirun.run_result/1"
    assert (result["status"], result["reason"], result["exit_code"]) == (
        "completed",
        "run.completed.ok",
        0,
    )
    run_id = result["run_id"]
    [call] = calls(argv_log)
    asked_for(provider, call)
    assert call["stdin"] == PROMPT  # the playbook's prompt, on stdin
    row = recorded(env, run_id, provider)
    assert row["prompt"] == PROMPT
    # the list view, and li wait
    listed = {r["id"]: r for r in li_json(env, "status")}
    assert listed[run_id]["provider"] == provider
    waited = li(env, "wait", run_id)
    assert waited.returncode == 0, waited.stderr
    assert waited.stdout.startswith(f"{run_id}\tstatus=completed\treason=run.completed.ok")
    # the dashboard: the provider column and filter, the CLI version on the run
    with serve(env_db["LIRUN_DB_URL"]) as base:
        page = httpx.get(f"{base}/api/runs", params={"provider": provider}).json()
        detail = httpx.get(f"{base}/api/runs/{run_id}").json()["run"]
        html = httpx.get(f"{base}/runs/{run_id}").text
    assert [(r["id"], r["provider"], r["model"]) for r in page["runs"]] == [
        (run_id, provider, expected.recorded_model)
    ]
    assert page["filters"] == {"provider": provider}
    assert {k: detail[k] for k in ("provider", "model", "provider_version", "status")} == {
        "provider": provider,
        "model": expected.recorded_model,
        "provider_version": expected.version,
        "status": "completed",
    }
    assert f'<span class="muted">{expected.version}</span>' in html
    # the metrics: usage by provider and model
    metrics = li(env, "metrics")
    assert metrics.returncode == 0, metrics.stderr
    labels = f'model="{expected.recorded_model}",provider="{provider}"'
    assert re.search(rf"^lirun_cost_usd_total\{{{re.escape(labels)}\}} ", metrics.stdout, re.M)
    tokens = rf'^lirun_tokens_total\{{{re.escape(labels)},type="output"\}} (\S+)$'
    found = re.search(tokens, metrics.stdout, re.M)
    assert found is not None, metrics.stdout
    assert float(found.group(1)) == float(row["output_tokens"] or 0)


@each_provider
def test_a_profile_for_another_provider_or_an_unknown_one_is_refused(
    provider: str, lirun_home: Path, fake_bin: Path, tmp_path: Path
) -> None:
    """A profile names the provider its model and options were written for: a run of
    another provider is refused before it starts, as is a provider the registry does not
    know (the message lists every registered one)."""
    other = BUILTIN_NAMES[(BUILTIN_NAMES.index(provider) + 1) % len(BUILTIN_NAMES)]
    write(lirun_home / "profiles" / "theirs.yaml", f"defaults: {{provider: {other}}}\n")
    write(lirun_home / "profiles" / "nobody.yaml", "defaults:\n  provider: no-such-cli\n")
    base = {**os.environ, "LIRUN_HOME": str(lirun_home)}
    env = agent_env(provider, base, fake_bin, tmp_path / "argv.jsonl")
    refused = li(env, "agent", provider, PROMPT, "--profile", "theirs", cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert f"is for provider {other!r}" in refused.stderr
    assert f"this run's is {provider!r}" in refused.stderr
    unknown = li(env, "agent", provider, PROMPT, "--profile", "nobody", cwd=tmp_path)
    assert unknown.returncode == 2, unknown.stderr
    assert "nobody.yaml:2: defaults.provider: unknown provider 'no-such-cli'" in unknown.stderr
    assert ", ".join(BUILTIN_NAMES) in unknown.stderr
    # the same for a flow leg, before anything starts
    flow = write(
        tmp_path / "flow.yaml",
        f"legs:\n  - {{id: ask, agent: {provider}, profile: theirs, prompt: hi}}\n",
    )
    checked = li(env, "flow", "run", str(flow), cwd=tmp_path)
    assert checked.returncode == 2, checked.stderr
    assert f"is for provider {other!r}" in checked.stderr
    assert not (tmp_path / "argv.jsonl").exists()  # no provider was started
    assert not (lirun_home / "runs").exists()


# -- a flow: an agent leg with a profile, in a team -----------------------------------


@each_provider
def test_a_flow_leg_in_a_team_takes_the_provider(
    provider: str, lirun_home: Path, fake_bin: Path, tmp_path: Path
) -> None:
    expected = success(provider)
    write(
        lirun_home / "profiles" / "helper.yaml",
        f"defaults: {{provider: {provider}, model: {expected.model!r}}}\n",
    )
    flow = write(
        tmp_path / "flow.yaml",
        f"""
        team: true
        legs:
          - id: ask
            agent: {provider}
            profile: helper
            prompt: {PROMPT}
          - id: echo
            depends_on: [ask]
            run: [echo, "got {{{{ legs.ask.reply | trim }}}}"]
        """,
    )
    argv_log = tmp_path / "argv.jsonl"
    base = {**os.environ, "LIRUN_HOME": str(lirun_home)}
    env = agent_env(provider, base, fake_bin, argv_log)
    report = li_json(env, "flow", "run", str(flow), cwd=tmp_path)
    assert report["status"] == "completed", report
    legs = {leg["id"]: leg for leg in report["legs"]}
    [call] = calls(argv_log)
    asked_for(provider, call)
    preamble_then(PROMPT, call["stdin"], "ask")
    row = recorded(env, legs["ask"]["session_id"], provider)
    assert row["invocation_id"] == report["invocation_id"]
    assert row["metadata_json"]["flow"]["team"]["member"] == "ask"
    # the leg's reply reached the leg after it
    echoed = li_json(env, "status", legs["echo"]["session_id"])
    assert echoed["output_text"] == f"got {row['reply_text'].strip()}\n"


# -- a show: an agent play that commits, in a team -------------------------------------


@each_provider
def test_a_show_play_takes_the_provider(
    provider: str, lirun_home: Path, fake_bin: Path, tmp_path: Path
) -> None:
    expected = success(provider)
    make_repo(tmp_path / "repo")
    show = write(
        tmp_path / "show.yaml",
        f"""
        topic: every-{provider}
        repo: repo
        base: main
        team: true
        gate: "test -f widget.txt"
        plays:
          - name: widget
            agent: {provider}/{expected.model}
            prompt: {PROMPT}
            attempts: 1
        """,
    )
    argv_log = tmp_path / "argv.jsonl"
    base = {**os.environ, "LIRUN_HOME": str(lirun_home)}
    env = agent_env(provider, base, fake_bin, argv_log, touch="widget.txt")
    env["LIRUN_FAKE_COMMIT"] = "agent work"
    report = li_json(env, "show", "run", str(show), cwd=tmp_path)
    assert report["status"] == "completed", report
    [play] = report["plays"]
    assert play["status"] == "merged", play
    [call] = calls(argv_log)
    asked_for(provider, call)
    preamble_then(PROMPT, call["stdin"], "widget")
    recorded(env, play["session_ids"][0], provider)


# -- a schedule action and li submit, drained by a real worker --------------------------


@each_provider
def test_a_schedule_action_and_a_submit_run_the_provider_on_a_worker(
    provider: str, lirun_home: Path, fake_bin: Path, tmp_path: Path
) -> None:
    expected = success(provider)
    db = str(tmp_path / "state.db")
    argv_log = tmp_path / "argv.jsonl"
    base = {**os.environ, "LIRUN_HOME": str(lirun_home), "LIRUN_DB_URL": db}
    env = agent_env(provider, base, fake_bin, argv_log)
    action = ["agent", f"{provider}/{expected.model}", PROMPT, "--cwd", str(tmp_path)]
    added = li(env, "schedule", "add", "greet", "--every", "1h", "--", *action)
    assert added.returncode == 0, added.stderr
    fired = li_json(env, "schedule", "fire", "greet")
    submitted = li_json(env, "submit", "--", *action)
    run_ids = [fired["id"], submitted["id"]]
    for queued in (fired, submitted):
        assert queued["status"] == "queued", queued
        assert queued["action_kind"] == "agent", queued
    spec = f"{provider}/{expected.model}"
    defined = li_json(env, "schedule", "show", "greet")["schedule"]
    assert defined["action_json"]["task"]["agent"] == spec, defined
    assert submitted["action_json"]["task"]["agent"] == spec, submitted
    with workers(env, tmp_path, "--allow-root", str(tmp_path)):
        waited = li(env, "wait", *run_ids)  # one line per run once it ended
    assert waited.returncode == 0, (waited.stdout, waited.stderr)
    for run_id, line in zip(run_ids, waited.stdout.splitlines(), strict=True):
        assert line.startswith(f"{run_id}\tstatus=completed\t"), line
    store = open_store(db)
    try:
        rows = [run_row(store, r) for r in run_ids]
    finally:
        store.close()
    for row in rows:
        assert row["status"] == "completed", row
        recorded(env, row["session_id"], provider)
    assert len(calls(argv_log)) == 2
    for call in calls(argv_log):
        asked_for(provider, call)
        assert call["stdin"] == PROMPT

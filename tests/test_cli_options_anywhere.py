"""Options anywhere (issue 9, item 3) and short ids for --resume / --invocation (item 7).

``li agent``: lirun's options before, between or after PROVIDER and PROMPT; ``--prompt``
for a prompt that starts with '-' (``-`` reads stdin); everything after the first bare
``--`` is ``provider_args``. ``li run``: options before CMD, the first other word starts
CMD, ``--`` optional.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from lirun.cli import agent as agent_cli
from lirun.cli import run as run_cli
from lirun.cli.main import main as li_main
from lirun.cli.options import option_arity, split_command
from support.execkit import get_row, only_row, run_li, session_rows
from support.providerkit import env_with_fake_bin


def _env(li_env: dict[str, str], fake_bin: Path, log: Path, **kw: Any) -> dict[str, str]:
    return env_with_fake_bin(
        "claude/success.jsonl", base=li_env, fake_bin=fake_bin, argv_log=log, **kw
    )


def _calls(log: Path) -> list[list[str]]:
    """What each provider call received: its argv, then the prompt it read on stdin."""
    records = [json.loads(line) for line in log.read_text().splitlines()]
    return [[*r["argv"], r["stdin"]] for r in records]


# --- li agent: parsing -------------------------------------------------------------------------


def _parse(*argv: str) -> Any:
    return agent_cli.parse_args(agent_cli.build_parser(), list(argv))


@pytest.mark.parametrize(
    "argv",
    [
        ["claude", "--timeout", "600", "fix it"],
        ["claude", "fix it", "--timeout", "600"],
        ["--timeout", "600", "claude", "fix it"],
        ["--timeout=600", "claude", "--json", "fix it", "--quiet"],
    ],
)
def test_agent_options_before_between_and_after(argv: list[str]) -> None:
    args = _parse(*argv)
    assert (args.provider, args.prompt, args.timeout) == ("claude", "fix it", 600.0)
    assert args.provider_args == []


def test_agent_words_after_the_first_bare_double_dash_are_provider_args() -> None:
    args = _parse("claude", "fix it", "--json", "--", "--max-turns", "30", "--", "x")
    assert (args.prompt, args.json) == ("fix it", True)
    assert args.provider_args == ["--max-turns", "30", "--", "x"]
    args = _parse("claude", "--prompt", "-v is broken", "--", "--permission-mode", "plan")
    assert (args.prompt, args.provider_args) == ("-v is broken", ["--permission-mode", "plan"])


def test_agent_prompt_option_takes_a_leading_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _parse("claude", "--prompt", "-x fails").prompt == "-x fails"
    assert _parse("claude", "--prompt=--help").prompt == "--help"
    monkeypatch.setattr("sys.stdin", io.StringIO("-from stdin\n"))
    args = _parse("codex", "--json", "--prompt", "-", "--", "--sandbox", "read-only")
    assert (args.prompt, args.provider_args) == ("-from stdin\n", ["--sandbox", "read-only"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["claude", "-x"], "unknown option '-x'"),
        (["claude", "--frobnicate", "go"], "unknown option '--frobnicate'"),
        (["claude", "fix", "it"], "quote the prompt"),
        (["claude", "fix it", "--prompt", "again"], "two prompts"),
        (["--json"], "no provider given"),
        (["claude", "--", "--max-turns", "3"], "words after -- are the provider's options"),
        (["claude"], "no prompt given"),
    ],
)
def test_agent_usage_errors_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], li_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch, repo: Path, fake_bin: Path,
) -> None:  # fmt: skip
    monkeypatch.setenv("PATH", f"{fake_bin}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(repo)
    assert li_main(["agent", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


# --- li agent: end to end ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [["--timeout", "600"], ["--json"], ["--bin", "BIN"]],
    ids=["timeout", "json", "bin"],
)
def test_agent_option_between_provider_and_prompt_runs(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path, tmp_path: Path,
    options: list[str],
) -> None:  # fmt: skip
    log = tmp_path / "argv.jsonl"
    env = _env(li_env, fake_bin, log)
    options = [str(fake_bin / "claude") if o == "BIN" else o for o in options]
    proc = run_li("agent", "claude", *options, "fix the test", env=env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert "fix the test" in _calls(log)[0]
    row = only_row(db_url)
    assert row["status"] == "completed"
    if "--json" in options:
        assert json.loads(proc.stdout)["run_id"] == row["id"]


def test_agent_prompt_from_stdin_also_detached(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path, tmp_path: Path
) -> None:
    log = tmp_path / "argv.jsonl"
    env = _env(li_env, fake_bin, log)
    prompt = "-n is ignored\nsecond line"
    attached = subprocess.run(
        [*_li(), "agent", "claude", "--prompt", "-", "--json"], input=prompt, env=env,
        cwd=repo, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert attached.returncode == 0, attached.stderr
    detached = subprocess.run(
        [*_li(), "agent", "--detach", "claude", "--prompt", "-"], input=prompt, env=env,
        cwd=repo, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert detached.returncode == 0, detached.stderr
    run_id = detached.stdout.strip()
    waited = run_li("wait", "--timeout", "30", run_id, env=env, cwd=repo)
    assert waited.returncode == 0, waited.stderr
    calls = _calls(log)
    assert len(calls) == 2
    assert all(prompt in call for call in calls)


def _li() -> list[str]:
    from support.execkit import li_argv

    return li_argv()


# --- li run ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "options", "command"),
    [
        (["--timeout", "1", "sleep", "3"], ["--timeout", "1"], ["sleep", "3"]),
        (["--timeout=1", "sleep", "3"], ["--timeout=1"], ["sleep", "3"]),
        (["--json", "--", "ls", "-la"], ["--json"], ["ls", "-la"]),
        (["--time", "1", "--json", "ls", "--json"], ["--time", "1", "--json"], ["ls", "--json"]),
        (["pytest", "--timeout", "5"], [], ["pytest", "--timeout", "5"]),
        (["--artifact", "r=x.md", "make", "-j2"], ["--artifact", "r=x.md"], ["make", "-j2"]),
        (["--json"], ["--json"], []),
    ],
)
def test_run_options_end_at_the_first_other_word(
    argv: list[str], options: list[str], command: list[str]
) -> None:
    arity = option_arity(run_cli.build_parser())
    assert split_command(argv, arity) == (options, command)


def test_run_timeout_without_double_dash(li_env: dict[str, str], db_url: str, repo: Path) -> None:
    proc = run_li("run", "--timeout", "1", "--json", "sleep", "3", env=li_env, cwd=repo)
    assert proc.returncode == 124, proc.stderr
    assert json.loads(proc.stdout)["status"] == "timed_out"
    assert only_row(db_url)["status"] == "timed_out"


def test_run_unknown_option_before_cmd_exits_2(
    li_env: dict[str, str], db_url: str, repo: Path
) -> None:
    proc = run_li("run", "--frobnicate", "true", env=li_env, cwd=repo)
    assert proc.returncode == 2
    assert "unknown option '--frobnicate'" in proc.stderr
    assert "Traceback" not in proc.stderr


# --- short ids for --resume and --invocation (item 7) --------------------------------------------


def test_resume_and_invocation_take_a_suffix(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path, tmp_path: Path
) -> None:
    log = tmp_path / "argv.jsonl"
    env = _env(li_env, fake_bin, log)
    first = json.loads(run_li("agent", "claude", "one", "--json", env=env, cwd=repo).stdout)
    suffix = first["run_id"].rsplit("-", 1)[1]
    start = run_li("invoke", "start", "--skill", "review", env=env, cwd=repo)
    invocation = start.stdout.strip()
    proc = run_li(
        "agent", "claude", "two", "--json", "--resume", suffix, "--invocation",
        invocation[-8:], "--detach", env=env, cwd=repo,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    second = json.loads(proc.stdout)["run_id"]
    assert run_li("wait", "--timeout", "30", second, env=env, cwd=repo).returncode == 0
    row = get_row(db_url, second)
    assert (row["branch_id"], row["resumed_from"]) == (first["run_id"], first["run_id"])
    assert row["invocation_id"] == invocation
    ambiguous = run_li("agent", "claude", "x", "--resume", "2", env=env, cwd=repo)
    assert ambiguous.returncode == 2
    assert "--resume '2' is ambiguous" in ambiguous.stderr
    assert len(session_rows(db_url)) == 2


def test_the_parser_knows_every_option_it_was_given() -> None:
    arity = option_arity(run_cli.build_parser())
    assert arity["-h"] is False
    assert arity["--help"] is False
    assert arity["--timeout"] is True
    assert arity["--db"] is True
    assert arity["--json"] is False
    assert arity["--require-change"] is False  # added after the shared options

"""Profiles and playbooks: loading, shape errors, and contract resolution (design.md D3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lirun.errors import UsageError
from lirun.exec.profile_files import load_playbook, load_profile
from lirun.exec.profiles import (
    ProfileError,
    merged_defaults,
    parse_artifact_option,
    resolve_contract_for,
)


def write(home: Path, kind: str, name: str, text: str, suffix: str = ".yaml") -> Path:
    folder = home / f"{kind}s"
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}{suffix}"
    path.write_text(text, encoding="utf-8")
    return path


PROFILE = """\
description: writes reports
defaults:
  provider: claude
  model: sonnet
  timeout: 600
  idle_timeout: 90.5
artifacts:
  - id: report
    path: out/report.md
  - id: notes
    path: notes.md
    required: false
    description: scratch notes
"""

PLAYBOOK = """\
prompt: Review the change.
defaults:
  timeout: 120
artifacts:
  expected:
    - id: report
      path: review/report.md
    - id: verdict
      path: verdict.json
"""


def test_load_profile_reads_defaults_and_artifacts(lirun_home: Path) -> None:
    path = write(lirun_home, "profile", "writer", PROFILE)
    profile = load_profile("writer")
    assert profile.path == path
    assert profile.description == "writes reports"
    assert profile.defaults == {
        "provider": "claude",
        "model": "sonnet",
        "timeout": 600,
        "idle_timeout": 90.5,
    }
    assert [a["id"] for a in profile.artifacts or []] == ["report", "notes"]


def test_a_profile_may_ask_for_a_change(lirun_home: Path) -> None:
    write(lirun_home, "profile", "strict", "defaults:\n  require_change: true\n")
    assert load_profile("strict").defaults == {"require_change": True}


def test_load_playbook_accepts_expected_mapping_and_yml(lirun_home: Path) -> None:
    write(lirun_home, "playbook", "review", PLAYBOOK, suffix=".yml")
    playbook = load_playbook("review")
    assert playbook.prompt == "Review the change."
    assert playbook.defaults == {"timeout": 120}
    assert [a["path"] for a in playbook.artifacts or []] == ["review/report.md", "verdict.json"]


def test_empty_profile_declares_nothing(lirun_home: Path) -> None:
    write(lirun_home, "profile", "bare", "")
    profile = load_profile("bare")
    assert profile.artifacts is None
    assert profile.defaults == {}
    assert resolve_contract_for(profile, None) is None


def test_missing_profile_says_where_it_looked(lirun_home: Path) -> None:
    with pytest.raises(ProfileError) as info:
        load_profile("nobody")
    message = str(info.value)
    assert str(lirun_home / "profiles" / "nobody.yaml") in message
    assert str(lirun_home / "profiles" / "nobody.yml") in message
    assert isinstance(info.value, UsageError)
    assert info.value.exit_code == 2


def test_both_suffixes_is_an_error(lirun_home: Path) -> None:
    write(lirun_home, "playbook", "twice", "prompt: a\n")
    write(lirun_home, "playbook", "twice", "prompt: b\n", suffix=".yml")
    with pytest.raises(ProfileError, match="defined twice"):
        load_playbook("twice")


@pytest.mark.parametrize("name", ["../etc", "a/b", "", ".hidden", "x" * 200])
def test_unsafe_names_are_rejected_before_touching_files(name: str) -> None:
    with pytest.raises(ProfileError, match="invalid profile name"):
        load_profile(name)


def test_yaml_syntax_error_names_file_and_line(lirun_home: Path) -> None:
    path = write(lirun_home, "profile", "broken", "defaults:\n  provider: claude\n  model: [x\n")
    with pytest.raises(ProfileError) as info:
        load_profile("broken")
    message = str(info.value)
    assert message.startswith(f"{path}:")
    line = int(message[len(str(path)) + 1 :].split(":")[0])
    assert line >= 3
    assert "invalid YAML" in message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("- id: x\n", "top level must be a mapping"),
        ("artifacts: []\nextra: 1\n", "unknown profile key 'extra'"),
        ("prompt: hi\n", "unknown profile key 'prompt'"),
        ("defaults: [timeout]\n", "defaults must be a mapping"),
        (
            "defaults:\n  temperature: 0.2\n",
            "defaults: unknown key 'temperature' (allowed: allowed_tools",
        ),
        ("defaults:\n  timeout: soon\n", "defaults.timeout 'soon' is not a duration"),
        ("defaults:\n  timeout: true\n", "defaults.timeout True is not a duration"),
        ("defaults:\n  grace: -1\n", "defaults.grace -1 is negative"),
        ("defaults:\n  timeuot: 5\n", "unknown key 'timeuot'; did you mean 'timeout'?"),
        ("descripton: x\n", "unknown profile key 'descripton'; did you mean 'description'?"),
        ("defaults:\n  provider: ''\n", "defaults.provider must be non-empty text"),
        ("defaults:\n  require_change: 1\n", "defaults.require_change must be true or false"),
        ("artifacts: report.md\n", "artifacts must be a list"),
        ("description: [a]\n", "description must be text"),
    ],
)
def test_profile_shape_errors(lirun_home: Path, text: str, fragment: str) -> None:
    path = write(lirun_home, "profile", "p", text)
    with pytest.raises(ProfileError) as info:
        load_profile("p")
    assert fragment in str(info.value)
    assert str(path) in str(info.value)


def test_playbook_prompt_must_be_text(lirun_home: Path) -> None:
    write(lirun_home, "playbook", "pb", "prompt:\n  - one\n")
    with pytest.raises(ProfileError, match="prompt must be text"):
        load_playbook("pb")


@pytest.mark.parametrize(
    ("entries", "entry", "rule"),
    [
        ("  - id: ok\n    path: a.md\n  - id: bad\n    path: ../up.md\n", "entry 1", "'..'"),
        ("  - id: abs\n    path: /etc/passwd\n", "entry 0", "absolute"),
        ("  - id: glob\n    path: out/*.md\n", "entry 0", "glob"),
        ("  - id: has space\n    path: a.md\n", "entry 0", "id must be"),
        ("  - path: a.md\n", "entry 0", "id must be"),
        ("  - id: r\n    path: a.md\n    required: 'yes'\n", "entry 0", "required must be a bool"),
        ("  - id: r\n    path: a.md\n  - id: r\n    path: b.md\n", "entry 1", "duplicate id"),
        ("  - just-a-string\n", "entry 0", "must be a mapping"),
    ],
)
def test_malformed_contract_names_file_entry_and_rule(
    lirun_home: Path, entries: str, entry: str, rule: str
) -> None:
    path = write(lirun_home, "playbook", "pb", f"artifacts:\n{entries}")
    with pytest.raises(ProfileError) as info:
        load_playbook("pb")
    message = str(info.value)
    assert str(path) in message
    assert entry in message
    assert rule in message


def test_resolution_overlays_profile_then_playbook_then_cli(lirun_home: Path) -> None:
    write(lirun_home, "profile", "writer", PROFILE)
    write(lirun_home, "playbook", "review", PLAYBOOK)
    extra = [parse_artifact_option("verdict=final/verdict.json?")]
    contract = resolve_contract_for(load_profile("writer"), load_playbook("review"), extra)
    assert contract is not None
    by_id = {e["id"]: e for e in contract["expected"]}
    # the overwritten id keeps its first position; later declarations win
    assert [e["id"] for e in contract["expected"]] == ["report", "notes", "verdict"]
    assert by_id["report"]["path"] == "review/report.md"
    assert by_id["report"]["source"] == "playbook"
    assert by_id["notes"] == {
        "id": "notes",
        "path": "notes.md",
        "required": False,
        "description": "scratch notes",
        "source": "agent_profile",
    }
    assert by_id["verdict"]["path"] == "final/verdict.json"
    assert by_id["verdict"]["required"] is False


def test_resolution_with_only_cli_entries(lirun_home: Path) -> None:
    contract = resolve_contract_for(None, None, [parse_artifact_option("out=o.txt")])
    assert contract == {
        "expected": [
            {
                "id": "out",
                "path": "o.txt",
                "required": True,
                "description": "",
                "source": "playbook",
            }
        ]
    }
    assert resolve_contract_for(None, None, []) is None


def test_resolution_error_names_origin(lirun_home: Path) -> None:
    write(lirun_home, "profile", "writer", PROFILE)
    with pytest.raises(ProfileError, match=r"writer\.yaml \+ --artifact"):
        resolve_contract_for(load_profile("writer"), None, [{"id": "x", "path": "../x"}])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("report=out/report.md", {"id": "report", "path": "out/report.md", "required": True}),
        ("n_1=notes.md?", {"id": "n_1", "path": "notes.md", "required": False}),
        ("a=b=c.md", {"id": "a", "path": "b=c.md", "required": True}),
    ],
)
def test_parse_artifact_option(text: str, expected: dict[str, object]) -> None:
    assert parse_artifact_option(text) == expected


@pytest.mark.parametrize("text", ["report", "=x.md", "bad id=x.md", "r=/abs.md", "r=../x", "r=?"])
def test_parse_artifact_option_rejects(text: str) -> None:
    with pytest.raises(UsageError, match="--artifact"):
        parse_artifact_option(text)


def test_merged_defaults_playbook_wins(lirun_home: Path) -> None:
    write(lirun_home, "profile", "writer", PROFILE)
    write(lirun_home, "playbook", "review", PLAYBOOK)
    merged = merged_defaults(load_profile("writer"), load_playbook("review"))
    assert merged["timeout"] == 120
    assert merged["provider"] == "claude"
    assert merged_defaults(None, None) == {}


def test_a_profile_may_set_the_stall_limit_zero_turning_it_off(lirun_home: Path) -> None:
    write(lirun_home, "profile", "patient", "defaults:\n  stall_timeout: 0\n")
    assert load_profile("patient").defaults == {"stall_timeout": 0}
    write(lirun_home, "profile", "bad", "defaults:\n  stall_timeout: -5\n")
    with pytest.raises(ProfileError, match="stall_timeout -5 is negative; give 0 \\(off\\)"):
        load_profile("bad")


def test_a_profile_gives_durations_as_seconds_or_in_the_duration_grammar(
    lirun_home: Path,
) -> None:
    write(lirun_home, "profile", "p", "defaults:\n  timeout: 20m\n  idle_timeout: 90\n")
    assert load_profile("p").defaults == {"timeout": 1200.0, "idle_timeout": 90}
    write(lirun_home, "profile", "q", "defaults:\n  stall_timeout: 1h30m\n  grace: 2.5\n")
    assert load_profile("q").defaults == {"stall_timeout": 5400.0, "grace": 2.5}

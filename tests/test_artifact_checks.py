"""Artifact content checks (issue 23, item 2): what a deliverable must contain.

The checks themselves on real files; a failed one ends a real ``li run`` as
``run.failed.artifact_invalid`` with which artifact, which check and what was found, on
both backends and on the dashboard; an unknown check or an unusable schema is refused
before anything starts, naming ``file:line`` (profiles, flow legs, show plays) or the
option (``--artifact-check``, a schedule's action).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import textwrap
from collections.abc import Mapping
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from lirun.errors import UsageError
from lirun.exec.artifact_check_option import attach_artifact_checks, parse_artifact_check
from lirun.exec.profile_files import load_profile
from lirun.exec.profiles import ProfileError
from lirun.flows.load import FlowFileError, load_flow
from lirun.reasons import describe, is_registered
from lirun.record.artifact_checks import check_problems
from lirun.record.artifacts import (
    ArtifactContractError,
    VerificationResult,
    resolve_artifact_contract,
    validate_artifact_contract,
    verify_artifact_contract,
)
from lirun.schedules.actions import parse_action
from lirun.shows.load import ShowFileError, load_show
from lirun.ui.app import create_app
from support.execkit import git_repo, only_row, run_li, session_rows
from support.showfilekit import write_show

SCHEMA = {
    "type": "object",
    "required": ["summary"],
    "properties": {"summary": {"type": "string"}, "score": {"type": "number"}},
}
REPORT = '{"summary": "all good", "score": 3}\n'


def _schema(folder: Path, name: str = "report.schema.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(SCHEMA), encoding="utf-8")
    return path


def _verify(root: Path, content: bytes, checks: Mapping[str, object]) -> VerificationResult:
    root.mkdir(exist_ok=True)
    (root / "out.txt").write_bytes(content)
    contract = {"expected": [{"id": "out", "path": "out.txt", "checks": checks}]}
    result = verify_artifact_contract(contract, artifacts_root=root)
    assert result is not None
    return result


# --- each check on a real file -----------------------------------------------------------------

DIGEST = hashlib.sha256(REPORT.encode()).hexdigest()
CASES = [
    ({"min_bytes": 5}, None),
    ({"min_bytes": 500}, ("min_bytes", "bytes, fewer than min_bytes 500")),
    ({"max_bytes": 500}, None),
    ({"max_bytes": 5}, ("max_bytes", "bytes, more than max_bytes 5")),
    ({"sha256": DIGEST}, None),
    ({"sha256": DIGEST.upper()}, None),
    ({"sha256": "0" * 64}, ("sha256", f"sha256 {DIGEST}, expected {'0' * 64}")),
    ({"matches": '"summary"'}, None),
    ({"matches": "^# Title"}, ("matches", "no match for '^# Title'")),
    ({"json": True}, None),
    ({"lines": {"min": 1, "max": 1}}, None),
    ({"lines": {"min": 2}}, ("lines", "1 lines, fewer than lines.min 2")),
    ({"lines": {"max": 0}}, ("lines", "1 lines, more than lines.max 0")),
]


@pytest.mark.parametrize(("checks", "failure"), CASES, ids=[str(c[0]) for c in CASES])
def test_each_check_passes_or_says_what_it_found(
    tmp_path: Path, checks: dict[str, object], failure: tuple[str, str] | None
) -> None:
    result = _verify(tmp_path / "root", REPORT.encode(), checks)
    if failure is None:
        assert result["status"] == "passed"
        assert "invalid" not in result
        assert [p["id"] for p in result["produced"]] == ["out"]
        return
    assert result["status"] == "failed"
    assert result["produced"] == []
    [invalid] = result["invalid"]
    [found] = invalid["failures"]
    assert found["check"] == failure[0]
    assert failure[1] in found["found"]


def test_json_and_schema_failures_name_the_place_in_the_document(tmp_path: Path) -> None:
    schema = str(_schema(tmp_path))
    bad = _verify(tmp_path / "a", b"{not json", {"json": True, "json_schema": schema})
    assert [f["check"] for f in bad["invalid"][0]["failures"]] == ["json", "json_schema"]
    assert bad["invalid"][0]["failures"][0]["found"].startswith("not JSON: ")
    wrong = _verify(tmp_path / "b", b'{"score": "high"}', {"json_schema": schema})
    [found] = wrong["invalid"][0]["failures"]
    assert found == {"check": "json_schema", "found": "$: 'summary' is a required property"}
    typed = _verify(tmp_path / "c", b'{"summary": 1}', {"json_schema": schema})
    assert typed["invalid"][0]["failures"][0]["found"] == "$.summary: 1 is not of type 'string'"
    binary = _verify(tmp_path / "d", b"\xff\xfe", {"matches": "x"})
    assert "not UTF-8 text" in binary["invalid"][0]["failures"][0]["found"]


def test_lines_count_a_last_line_without_a_newline(tmp_path: Path) -> None:
    two = {"lines": {"min": 2, "max": 2}}
    assert _verify(tmp_path / "a", b"one\ntwo", two)["status"] == "passed"
    assert _verify(tmp_path / "b", b"one\ntwo\n", two)["status"] == "passed"
    assert _verify(tmp_path / "c", b"one\ntwo\n\n", two)["status"] == "failed"


def test_an_invalid_optional_artifact_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "notes.md").write_text("short")
    entry = {"id": "notes", "path": "notes.md", "required": False, "checks": {"min_bytes": 99}}
    result = verify_artifact_contract({"expected": [entry]}, artifacts_root=root)
    assert result is not None
    assert result["status"] == "warning"
    assert result["invalid"][0]["required"] is False


# --- the shape of checks: refused before anything starts ---------------------------------------


@pytest.mark.parametrize(
    ("checks", "words"),
    [
        ({"min_byte": 3}, "unknown check 'min_byte' (did you mean 'min_bytes'?)"),
        ({"min_bytes": -1}, "checks.min_bytes must be a whole number"),
        ({"min_bytes": True}, "checks.min_bytes must be a whole number"),
        ({"min_bytes": 9, "max_bytes": 3}, "min_bytes 9 is more than max_bytes 3"),
        ({"sha256": "abc"}, "checks.sha256 must be 64 hexadecimal digits"),
        ({"matches": "(unclosed"}, "checks.matches is not a valid regular expression"),
        ({"json": False}, "checks.json must be true"),
        ({"lines": {"min": 3, "max": 1}}, "min 3 is more than max 1"),
        ({"lines": {"least": 3}}, "has unknown key 'least'"),
        ({"lines": 4}, "checks.lines must be a mapping"),
        ("json", "checks must be a mapping"),
    ],
)
def test_malformed_checks_are_named(checks: object, words: str) -> None:
    assert any(words in message for _, message in check_problems(checks))
    contract = {"expected": [{"id": "a", "path": "a.md", "checks": checks}]}
    with pytest.raises(ArtifactContractError, match="artifact contract entry 0"):
        validate_artifact_contract(contract, strict=True)
    validate_artifact_contract(contract)  # a snapshot is read leniently: the run is kept


def test_a_malformed_check_on_a_snapshot_fails_the_artifact_instead_of_the_teardown(
    tmp_path: Path,
) -> None:
    result = _verify(tmp_path / "root", b"data", {"colour": "blue"})
    assert result["status"] == "failed"
    assert result["invalid"][0]["failures"][0]["check"] == "checks"


PROFILE = """\
description: writes a report
artifacts:
  - id: report
    path: report.json
    checks:
      json: true
      min_bytez: 10
"""


def test_an_unknown_check_in_a_profile_names_its_line(lirun_home: Path) -> None:
    folder = lirun_home / "profiles"
    folder.mkdir(parents=True)
    path = folder / "writer.yaml"
    path.write_text(PROFILE, encoding="utf-8")
    with pytest.raises(ProfileError) as info:
        load_profile("writer")
    message = str(info.value)
    assert message.startswith(f"{path}:7: ")
    assert "unknown check 'min_bytez' (did you mean 'min_bytes'?)" in message


def test_a_profile_schema_is_read_beside_the_file_and_checked_at_load(lirun_home: Path) -> None:
    folder = lirun_home / "profiles"
    _schema(folder / "schemas")
    text = "artifacts:\n  - id: r\n    path: r.json\n    checks:\n"
    (folder / "good.yaml").write_text(text + "      json_schema: schemas/report.schema.json\n")
    profile = load_profile("good")
    assert profile.artifacts is not None
    assert profile.artifacts[0]["checks"]["json_schema"] == str(
        folder / "schemas" / "report.schema.json"
    )
    (folder / "bad.json").write_text('{"type": 12}')
    (folder / "bad.yaml").write_text(text + "      json_schema: bad.json\n")
    with pytest.raises(ProfileError, match="is not a valid JSON Schema") as info:
        load_profile("bad")
    assert str(info.value).startswith(f"{folder / 'bad.yaml'}:5: ")
    (folder / "gone.yaml").write_text(text + "      json_schema: nowhere.json\n")
    with pytest.raises(ProfileError, match="cannot read the schema"):
        load_profile("gone")


def test_resolving_a_contract_reads_its_schema_first(tmp_path: Path) -> None:
    entry = {"id": "r", "path": "r.json", "checks": {"json_schema": str(tmp_path / "no.json")}}
    with pytest.raises(ArtifactContractError, match="cannot read the schema"):
        resolve_artifact_contract(playbook_artifacts=[entry], agent_defaults=None)


def test_an_unknown_check_in_a_flow_leg_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "flow.yaml"
    path.write_text(
        textwrap.dedent("""\
        legs:
          - id: build
            run: [echo, hi]
            artifacts:
              - id: out
                path: out.txt
                checks: {lines: {min: 1}, match: x}
        """)
    )
    with pytest.raises(FlowFileError) as caught:
        load_flow(path, cwd=str(tmp_path))
    [problem] = [p for p in caught.value.problems if "unknown check" in p]
    assert problem.startswith(f"{path}:7: ")
    assert "'match'" in problem
    assert "(leg 'build')" in problem


def test_an_unknown_check_in_a_show_play_names_its_line(tmp_path: Path) -> None:
    text = (
        "topic: t\nrepo: repo\nbase: main\ngate: 'true'\nplays:\n  - name: a\n    run: 'true'\n"
        "    artifacts:\n      - id: r\n        path: r.md\n        checks:\n"
        "          sha265: abc\n"
    )
    path = write_show(tmp_path, text)
    with pytest.raises(ShowFileError) as info:
        load_show(path)
    problems = [p for p in str(info.value).splitlines() if "unknown check" in p]
    assert problems, str(info.value)
    assert problems[0].startswith(f"{path}:12: "), str(info.value)
    assert "did you mean 'sha256'?" in problems[0]


# --- the command line ----------------------------------------------------------------------------


def test_artifact_check_option_syntax(tmp_path: Path) -> None:
    schema = _schema(tmp_path)
    assert parse_artifact_check("r.min_bytes=10", str(tmp_path)) == ("r", "min_bytes", 10)
    assert parse_artifact_check("r.json", str(tmp_path)) == ("r", "json", True)
    assert parse_artifact_check("r.lines=..5", str(tmp_path)) == ("r", "lines", {"max": 5})
    assert parse_artifact_check("r.matches=a=b", str(tmp_path)) == ("r", "matches", "a=b")
    assert parse_artifact_check("r.json_schema=report.schema.json", str(tmp_path)) == (
        "r",
        "json_schema",
        str(schema),
    )
    for text, words in [
        ("r=10", "expected ID.CHECK=VALUE"),
        ("r.size=10", "unknown check 'size'"),
        ("r.min_bytes=ten", "expected a whole number"),
        ("r.lines=3", "expected MIN..MAX"),
        ("r.json=false", "json takes no value"),
        ("r.matches", "matches needs a value"),
    ]:
        with pytest.raises(UsageError, match=words):
            parse_artifact_check(text, str(tmp_path))
    entries = [{"id": "r", "path": "r.json"}]
    with pytest.raises(UsageError, match="no --artifact other=PATH"):
        attach_artifact_checks(entries, ["other.json"], str(tmp_path))
    with pytest.raises(UsageError, match="given twice"):
        attach_artifact_checks(entries, ["r.json", "r.json"], str(tmp_path))
    with pytest.raises(UsageError, match="min_bytes 9 is more than max_bytes 1"):
        attach_artifact_checks(entries, ["r.min_bytes=9", "r.max_bytes=1"], str(tmp_path))


def test_a_schedule_action_carries_its_checks(tmp_path: Path) -> None:
    _schema(tmp_path)
    words = [
        "run",
        "--artifact",
        "r=r.json",
        "--artifact-check",
        "r.json_schema=report.schema.json",
    ]
    action = parse_action(
        [*words, "--artifact-check", "r.min_bytes=2", "--", "true"], base=str(tmp_path)
    )
    assert action.task is not None
    [entry] = action.task.artifacts
    assert entry["checks"] == {
        "json_schema": str(tmp_path / "report.schema.json"),
        "min_bytes": 2,
    }
    with pytest.raises(UsageError, match="cannot read the schema"):
        parse_action(
            [
                "run",
                "--artifact",
                "r=r.json",
                "--artifact-check",
                "r.json_schema=x.json",
                "--",
                "true",
            ],
            base=str(tmp_path),
        )


# --- a real run, both backends -------------------------------------------------------------------


def _run(
    li_env: dict[str, str], tmp_path: Path, content: str, *checks: str
) -> subprocess.CompletedProcess[str]:
    repo = git_repo(tmp_path / "repo")
    _schema(repo)
    script = f"printf '%s' '{content}' > \"$LIRUN_ARTIFACT_DIR/report.json\""
    argv = ["run", "--artifact", "report=report.json"]
    for check in checks:
        argv += ["--artifact-check", check]
    return run_li(*argv, "--json", "--", "sh", "-c", script, env=li_env, cwd=repo)


def test_a_failed_check_fails_the_run_as_artifact_invalid(
    li_env: dict[str, str], db_url: str, tmp_path: Path
) -> None:
    proc = _run(
        li_env,
        tmp_path,
        '{"score": 1}',
        "report.json_schema=report.schema.json",
        "report.min_bytes=1",
    )
    assert proc.returncode == 1, proc.stderr
    summary = json.loads(proc.stdout)
    assert (summary["status"], summary["reason"]) == ("failed", "run.failed.artifact_invalid")
    row = only_row(db_url)
    assert row["status_reason_code"] == "run.failed.artifact_invalid"
    assert (
        "report json_schema ($: 'summary' is a required property)" in row["status_reason_summary"]
    )
    evidence = row["status_evidence_refs"][0]
    assert evidence == {
        "kind": "artifact",
        "id": "report",
        "path": "report.json",
        "check": "json_schema",
        "found": "$: 'summary' is a required property",
        "label": "report.json: $: 'summary' is a required property",
    }
    verification = row["artifact_verification_json"]
    assert verification["status"] == "failed"
    assert verification["invalid"][0]["id"] == "report"
    shown = run_li("status", row["id"], env=li_env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "invalid required  report  report.json  json_schema: $: 'summary'" in shown.stdout
    with TestClient(create_app(db_url, watch=False)) as client:
        page = client.get(f"/runs/{row['id']}")
    assert page.status_code == 200
    assert "json_schema: $: &#39;summary&#39; is a required property" in page.text


def test_passing_checks_complete_the_run(
    li_env: dict[str, str], db_url: str, tmp_path: Path
) -> None:
    proc = _run(
        li_env,
        tmp_path,
        '{"summary": "ok"}',
        "report.json_schema=report.schema.json",
        "report.lines=1..1",
    )
    assert proc.returncode == 0, proc.stderr
    row = only_row(db_url)
    assert (row["status"], row["status_reason_code"]) == ("completed", "run.completed.ok")
    assert row["artifact_verification_json"]["produced"][0]["id"] == "report"


def test_a_bad_check_on_the_command_line_starts_nothing(
    li_env: dict[str, str], db_url: str, tmp_path: Path
) -> None:
    proc = _run(li_env, tmp_path, "{}", "report.json_schema=missing.json")
    assert proc.returncode == 2
    assert "cannot read the schema" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert session_rows(db_url) == []


def test_the_reason_is_registered() -> None:
    assert is_registered("run.failed.artifact_invalid")
    assert "content check" in describe("run.failed.artifact_invalid")


def test_a_flow_leg_whose_artifact_fails_a_check_fails_as_artifact_invalid(
    li_env: dict[str, str], db_url: str, tmp_path: Path
) -> None:
    folder = tmp_path / "flows"
    _schema(folder / "schemas")
    (folder / "flow.yaml").write_text(
        textwrap.dedent("""\
        legs:
          - id: report
            run: [sh, -c, 'echo "{\\"score\\": 2}" > "$LIRUN_ARTIFACT_DIR/r.json"']
            artifacts:
              - id: r
                path: r.json
                checks: {json_schema: schemas/report.schema.json, lines: {max: 1}}
        """)
    )
    # the file is named relative to where li runs: the schema is still read beside it
    proc = run_li("flow", "run", "flows/flow.yaml", "--json", env=li_env, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    [leg] = json.loads(proc.stdout)["legs"]
    assert (leg["status"], leg["reason_code"]) == ("failed", "run.failed.artifact_invalid")
    [row] = [r for r in session_rows(db_url) if r["id"] == leg["session_id"]]
    [entry] = row["artifact_contract_json"]["expected"]
    assert entry["checks"]["json_schema"] == str(folder / "schemas" / "report.schema.json")
    assert row["status_evidence_refs"][0]["found"] == "$: 'summary' is a required property"

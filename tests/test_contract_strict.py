"""Contracts are strict where a typo changes the meaning (issue 9, item 8).

An unknown field inside an artifact entry is refused before anything starts, naming
``file:line``; a declared artifact that exists but is not a usable file is reported as
exactly what it is (empty, a directory, a symlink leaving the root), not as "missing".
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lirun.exec.profile_files import load_playbook, load_profile
from lirun.exec.profiles import ProfileError
from lirun.record.artifacts import (
    ArtifactContractError,
    validate_artifact_contract,
    verify_artifact_contract,
)
from support.execkit import git_repo, only_row, run_li, session_rows

TYPO = """\
description: writes a report
artifacts:
  - id: report
    path: report.md
  - id: notes
    path: notes.md
    requird: false
"""


def _write(home: Path, kind: str, name: str, text: str) -> Path:
    folder = home / f"{kind}s"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_validate_is_lenient_by_default_and_strict_on_request() -> None:
    contract = {"expected": [{"id": "a", "path": "a.md", "requird": False}]}
    validate_artifact_contract(contract)  # the ADR's rule: warned, not rejected
    with pytest.raises(ArtifactContractError, match="did you mean 'required'"):
        validate_artifact_contract(contract, strict=True)


@pytest.mark.parametrize("kind", ["profile", "playbook"])
def test_unknown_entry_field_is_refused_with_file_and_line(lirun_home: Path, kind: str) -> None:
    path = _write(lirun_home, kind, "writer", TYPO)
    load = load_profile if kind == "profile" else load_playbook
    with pytest.raises(ProfileError) as info:
        load("writer")
    message = str(info.value)
    assert message.startswith(f"{path}:7: ")
    assert "'requird'" in message
    assert "did you mean 'required'" in message
    assert "id='notes'" in message


def test_other_errors_name_the_line_too(lirun_home: Path) -> None:
    path = _write(lirun_home, "profile", "p", "artifacts:\n  - {id: a, path: a.md}\n"
                  "  - {id: a, path: b.md}\n")  # fmt: skip
    with pytest.raises(ProfileError, match="duplicate id") as info:
        load_profile("p")
    assert str(info.value).startswith(f"{path}:3: ")
    path = _write(lirun_home, "profile", "q", "defaults:\n  timeout: 5\n  idle_timout: 3\n")
    with pytest.raises(ProfileError, match="idle_timout") as info:
        load_profile("q")
    assert str(info.value).startswith(f"{path}:3: ")
    path = _write(lirun_home, "playbook", "r", "prompt: go\nartifact:\n  - {id: a, path: a}\n")
    with pytest.raises(ProfileError, match="unknown playbook key 'artifact'") as info:
        load_playbook("r")
    assert str(info.value).startswith(f"{path}:2: ")


def test_li_run_refuses_the_typo_before_start(
    li_env: dict[str, str], db_url: str, lirun_home: Path, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo")
    path = _write(lirun_home, "profile", "writer", TYPO)
    proc = run_li("run", "--profile", "writer", "--", "true", env=li_env, cwd=repo)
    assert proc.returncode == 2
    assert f"{path}:7:" in proc.stderr
    assert "requird" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (lirun_home / "runs").exists() or not any((lirun_home / "runs").iterdir())
    if db_url.startswith("postgres") or os.path.exists(db_url):
        assert session_rows(db_url) == []


def test_verification_says_what_is_there_instead(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "empty.md").write_bytes(b"")
    (root / "dir.md").mkdir()
    os.mkfifo(root / "fifo.md")
    (tmp_path / "secret.md").write_text("secret")
    (root / "escape.md").symlink_to(tmp_path / "secret.md")
    (root / "up.md").symlink_to("../secret.md")
    (root / "dangling.md").symlink_to("nothing.md")
    (root / "loop").symlink_to("loop")
    (root / "ok.md").write_text("fine")
    names = ["empty", "dir", "fifo", "escape", "up", "dangling", "absent", "ok"]
    contract: dict[str, list[dict[str, object]]] = {
        "expected": [{"id": n, "path": f"{n}.md"} for n in names]
    }
    contract["expected"].append({"id": "loop", "path": "loop/x.md", "required": False})
    result = verify_artifact_contract(contract, artifacts_root=root)
    assert result is not None
    assert result["status"] == "failed"
    problems = {e["id"]: e["problem"] for e in result["missing_required"]}
    assert problems == {
        "empty": "empty",
        "dir": "directory",
        "fifo": "not_a_file",
        "escape": "outside_root",
        "up": "outside_root",
        "dangling": "broken_symlink",
        "absent": "missing",
    }
    assert [(e["id"], e["problem"]) for e in result["missing_optional"]] == [
        ("loop", "symlink_loop")
    ]
    assert [p["id"] for p in result["produced"]] == ["ok"]
    gone = verify_artifact_contract(contract, artifacts_root=tmp_path / "nope")
    assert gone is not None
    assert {e["problem"] for e in gone["missing_required"]} == {"missing"}


def test_an_empty_artifact_fails_the_run_as_empty(
    li_env: dict[str, str], db_url: str, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo")
    save = tmp_path / "save"
    argv = ["run", "--save", str(save), "--artifact", "report=report.md", "--json"]
    proc = run_li(*argv, "--", "sh", "-c", f": > {save}/report.md; echo hi", env=li_env, cwd=repo)
    assert proc.returncode == 1, proc.stderr
    summary = json.loads(proc.stdout)
    assert (summary["status"], summary["reason"]) == ("failed", "run.failed.missing_artifact")
    row = only_row(db_url)
    assert "report (is an empty file)" in row["status_reason_summary"]
    assert row["status_evidence_refs"][0]["label"] == "empty"
    assert row["artifact_verification_json"]["missing_required"][0]["problem"] == "empty"
    shown = run_li("status", row["id"], env=li_env, cwd=repo)
    assert shown.returncode == 0, shown.stderr
    assert "is an empty file" in shown.stdout

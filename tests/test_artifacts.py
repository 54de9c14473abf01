from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lirun.errors import LirunError
from lirun.record.artifacts import (
    ArtifactContractError,
    ArtifactPathError,
    check_artifact_path,
    contract_warnings,
    resolve_artifact_contract,
    resolve_inside,
    validate_artifact_contract,
    verify_artifact_contract,
)


def entry(id: str, path: str, **extra: Any) -> dict[str, Any]:
    return {"id": id, "path": path, **extra}


def contract(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"expected": list(entries)}


def write(root: Path, rel: str, data: bytes = b"x") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


# --- validation -------------------------------------------------------------------------------


def test_error_types() -> None:
    assert issubclass(ArtifactPathError, LirunError)
    assert issubclass(ArtifactPathError, ValueError)
    assert issubclass(ArtifactContractError, ValueError)


@pytest.mark.parametrize(
    "value",
    [
        None,
        {"expected": []},
        contract(entry("report", "report.md")),
        contract(
            entry("a-1", "out/a.md", required=False, description="d", source="playbook"),
            entry("b_2", "./b.txt"),
        ),
        contract(entry("x", "x.md", owner="me")),
    ],
)
def test_valid_contracts(value: dict[str, Any] | None) -> None:
    validate_artifact_contract(value)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ([], "must be a mapping"),
        ({}, "'expected' must be a list"),
        ({"expected": {}}, "'expected' must be a list"),
        (contract("report.md"), "entry 0 must be a mapping"),  # type: ignore[arg-type]  # bad input
        (contract({"path": "a"}), "entry 0: id must be"),
        (contract(entry("", "a")), "id must be"),
        (contract(entry("a b", "a")), "id must be"),
        (contract(entry("a\n", "a")), "id must be"),
        (contract(entry("a", "a"), entry("a", "b")), r"entry 1 \(id='a'\): duplicate id"),
        (contract(entry("a", "")), r"entry 0 \(id='a'\): path must be a non-empty string"),
        (contract({"id": "a"}), "path must be a non-empty string"),
        (contract(entry("a", 5)), "path must be"),  # type: ignore[arg-type]  # bad input
        (contract(entry("a", "a", required="yes")), "required must be a bool"),
        (contract(entry("a", "a", required=1)), "required must be a bool"),
        (contract(entry("a", "a", description=3)), "description must be a str"),
        (contract(entry("a", "a", source=None)), "source must be a str"),
    ],
)
def test_invalid_contracts(value: Any, match: str) -> None:
    with pytest.raises(ArtifactContractError, match=match):
        validate_artifact_contract(value)


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("/etc/passwd", "absolute"),
        ("//server/share/x", "absolute"),
        ("C:/x", "absolute"),
        ("C:x", "absolute"),
        ("\\x", "absolute"),
        ("~/x", "~"),
        ("a\\..\\b", "backslash"),
        ("../x", r"'\.\.'"),
        ("a/../../x", r"'\.\.'"),
        ("a/..", r"'\.\.'"),
        ("*.md", "glob"),
        ("a?.md", "glob"),
        ("[ab].md", "glob"),
        ("{a,b}.md", "glob"),
        ("a\x00b", "NUL"),
        (".", "root itself"),
        ("./", "root itself"),
        ("\ud800", "encoded"),
    ],
)
def test_unsafe_paths(path: str, rule: str) -> None:
    with pytest.raises(ArtifactPathError, match=rule) as info:
        validate_artifact_contract(contract(entry("rep", path)))
    assert "entry 0 (id='rep')" in str(info.value)


def test_error_names_entry_index_id_and_source() -> None:
    bad = contract(entry("ok", "a.md"), entry("second", "/abs", source="playbook"))
    with pytest.raises(ArtifactPathError, match=r"entry 1 \(id='second', source='playbook'\)"):
        validate_artifact_contract(bad)


def test_contract_warnings() -> None:
    value = {"expected": [entry("a", "a.md", owner="x"), "junk"], "version": 2}
    notes = contract_warnings(value)
    assert any("'version'" in n for n in notes)
    assert any("entry 0 (id='a')" in n and "'owner'" in n for n in notes)
    assert len(notes) == 2
    assert contract_warnings(None) == []
    assert contract_warnings(contract(entry("a", "a.md"))) == []


# --- resolution -------------------------------------------------------------------------------


def test_resolve_none() -> None:
    assert resolve_artifact_contract(playbook_artifacts=None, agent_defaults=None) is None


def test_resolve_empty_inputs_give_empty_contract() -> None:
    assert resolve_artifact_contract(playbook_artifacts=[], agent_defaults=None) == {"expected": []}


def test_resolve_overlay_keeps_first_position() -> None:
    agent = contract(entry("plan", "plan.md"), entry("notes", "notes.md", required=False))
    playbook = [entry("extra", "extra.md"), entry("plan", "final/plan.md", description="P")]
    result = resolve_artifact_contract(playbook_artifacts=playbook, agent_defaults=agent)
    assert result == {
        "expected": [
            {"id": "plan", "path": "final/plan.md", "required": True, "description": "P",
             "source": "playbook"},
            {"id": "notes", "path": "notes.md", "required": False, "description": "",
             "source": "agent_profile"},
            {"id": "extra", "path": "extra.md", "required": True, "description": "",
             "source": "playbook"},
        ]
    }  # fmt: skip


def test_resolve_collapses_duplicates_within_one_source() -> None:
    result = resolve_artifact_contract(
        playbook_artifacts=contract(entry("a", "1.md"), entry("b", "b.md"), entry("a", "2.md")),
        agent_defaults=None,
    )
    assert result is not None
    assert [(e["id"], e["path"]) for e in result["expected"]] == [("a", "2.md"), ("b", "b.md")]


def test_resolve_source_is_always_overwritten() -> None:
    result = resolve_artifact_contract(
        playbook_artifacts=None, agent_defaults=[entry("a", "a.md", source="me")]
    )
    assert result is not None
    assert result["expected"][0]["source"] == "agent_profile"


def test_resolve_validates_merged_contract() -> None:
    with pytest.raises(ArtifactPathError, match=r"id='bad', source='playbook'.*absolute"):
        resolve_artifact_contract(
            playbook_artifacts=[entry("bad", "/tmp/x")], agent_defaults=[entry("ok", "ok.md")]
        )
    with pytest.raises(ArtifactContractError, match="required must be a bool"):
        resolve_artifact_contract(
            playbook_artifacts=None, agent_defaults=[entry("a", "a.md", required="no")]
        )


@pytest.mark.parametrize(
    "bad",
    [["not a dict"], [{"path": "x"}], [{"id": 3, "path": "x"}], {"nope": []}, "a.md"],
)
def test_resolve_rejects_bad_shapes(bad: Any) -> None:
    with pytest.raises(ArtifactContractError, match="playbook artifact"):
        resolve_artifact_contract(playbook_artifacts=bad, agent_defaults=None)


# --- verification -----------------------------------------------------------------------------


def test_verify_none_contract() -> None:
    assert verify_artifact_contract(None, artifacts_root="/nowhere") is None


def test_verify_passed_warning_failed(tmp_path: Path) -> None:
    write(tmp_path, "out/report.md", b"hello")
    c = contract(
        entry("report", "out/report.md"),
        entry("opt", "opt.md", required=False),
    )
    before = time.time()
    result = verify_artifact_contract(c, artifacts_root=str(tmp_path))
    assert result is not None
    assert result["status"] == "warning"
    assert before <= result["checked_at"] <= time.time()
    assert result["produced"] == [
        {"id": "report", "path": "out/report.md", "size": 5, "present": True}
    ]
    assert [e["id"] for e in result["missing_optional"]] == ["opt"]
    assert result["missing_required"] == []

    write(tmp_path, "opt.md")
    result = verify_artifact_contract(c, artifacts_root=str(tmp_path))
    assert result is not None
    assert result["status"] == "passed"

    c["expected"].append(entry("need", "need.md"))
    result = verify_artifact_contract(c, artifacts_root=str(tmp_path))
    assert result is not None
    assert result["status"] == "failed"
    assert result["missing_required"] == [{**entry("need", "need.md"), "problem": "missing"}]


def test_verify_empty_expected_passes(tmp_path: Path) -> None:
    result = verify_artifact_contract({"expected": []}, artifacts_root=str(tmp_path))
    assert result is not None
    assert result["status"] == "passed"
    result = verify_artifact_contract({"expected": []}, artifacts_root=None)
    assert result is not None
    assert result["status"] == "passed"


def test_verify_only_nonempty_regular_files_count(tmp_path: Path) -> None:
    (tmp_path / "dir.md").mkdir()
    write(tmp_path, "empty.md", b"")
    os.mkfifo(tmp_path / "fifo.md")
    write(tmp_path, "real.md", b"abc")
    (tmp_path / "link.md").symlink_to("real.md")
    (tmp_path / "dangling.md").symlink_to("nope.md")
    c = contract(
        *(entry(n, f"{n}.md") for n in ("dir", "empty", "fifo", "dangling", "absent")),
        entry("link", "link.md"),
    )
    result = verify_artifact_contract(c, artifacts_root=tmp_path)
    assert result is not None
    assert result["status"] == "failed"
    assert [e["id"] for e in result["missing_required"]] == [
        "dir",
        "empty",
        "fifo",
        "dangling",
        "absent",
    ]
    assert result["produced"] == [{"id": "link", "path": "link.md", "size": 3, "present": True}]


def test_verify_symlink_escape_is_missing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    secret = write(tmp_path, "secret.txt", b"secret")
    (root / "abs.md").symlink_to(secret)
    (root / "rel.md").symlink_to("../secret.txt")
    (root / "sub").symlink_to(tmp_path)
    (root / "loop").symlink_to("loop")
    (root / "inside").mkdir()
    (root / "inside" / "up.md").symlink_to("../../secret.txt")
    c = contract(
        entry("abs", "abs.md"),
        entry("rel", "rel.md"),
        entry("sub", "sub/secret.txt"),
        entry("loop", "loop/x"),
        entry("up", "inside/up.md"),
    )
    result = verify_artifact_contract(c, artifacts_root=str(root))
    assert result is not None
    assert result["produced"] == []
    assert len(result["missing_required"]) == 5


def test_verify_symlinks_inside_root_are_followed(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(root, "real/data.md", b"1234")
    (root / "alias").symlink_to("real")
    (root / "abs").symlink_to(root / "real")
    (root / "real" / "back.md").symlink_to("../real/data.md")
    c = contract(entry("a", "alias/data.md"), entry("b", "abs/data.md"), entry("c", "real/back.md"))
    result = verify_artifact_contract(c, artifacts_root=str(root))
    assert result is not None
    assert result["status"] == "passed"
    assert [p["size"] for p in result["produced"]] == [4, 4, 4]


def test_verify_through_symlinked_root(tmp_path: Path) -> None:
    real = tmp_path / "real"
    write(real, "a.md")
    (tmp_path / "alias").symlink_to(real)
    (real / "abs.md").symlink_to(tmp_path / "alias" / "a.md")
    c = contract(entry("a", "a.md"), entry("abs", "abs.md"))
    result = verify_artifact_contract(c, artifacts_root=str(tmp_path / "alias"))
    assert result is not None
    assert result["status"] == "passed"


@pytest.mark.parametrize("kind", ["missing", "file", "none", "empty-string"])
def test_verify_unusable_root_marks_everything_missing(tmp_path: Path, kind: str) -> None:
    roots: dict[str, str | None] = {
        "missing": str(tmp_path / "nope"),
        "file": str(write(tmp_path, "afile")),
        "none": None,
        "empty-string": "",
    }
    c = contract(entry("r", "r.md"), entry("o", "o.md", required=False))
    result = verify_artifact_contract(c, artifacts_root=roots[kind])
    assert result is not None
    assert result["status"] == "failed"
    assert result["produced"] == []
    assert len(result["missing_required"]) == 1
    assert len(result["missing_optional"]) == 1


def test_verify_optional_only_missing_is_warning_without_root() -> None:
    c = contract(entry("o", "o.md", required=False))
    result = verify_artifact_contract(c, artifacts_root=None)
    assert result is not None
    assert result["status"] == "warning"


def test_verify_rejects_malformed_contract(tmp_path: Path) -> None:
    with pytest.raises(ArtifactPathError):
        verify_artifact_contract(contract(entry("a", "../a")), artifacts_root=str(tmp_path))


# --- resolve_inside ---------------------------------------------------------------------------


def test_resolve_inside(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to("real")
    assert resolve_inside(tmp_path, "a/b.md") == tmp_path.resolve() / "a" / "b.md"
    assert resolve_inside(tmp_path, "alias/x.md") == tmp_path.resolve() / "real" / "x.md"
    with pytest.raises(ArtifactPathError):
        resolve_inside(tmp_path, "../x")
    (tmp_path / "out").symlink_to("/")
    with pytest.raises(ArtifactPathError, match="outside"):
        resolve_inside(tmp_path, "out/etc/passwd")


def test_check_artifact_path_returns_value() -> None:
    assert check_artifact_path("a/b.md") == "a/b.md"


# --- properties -------------------------------------------------------------------------------

_SEGMENTS = st.sampled_from(
    ["..", ".", "", "a", "b.md", "~", "x y", "é", "e\u0301", "\u202e", "\x00", "*", "C:",
     "\\", "..\\..", "\ud800", "\udc80", "\uff46", "\u2024\u2024", "%2e%2e", " "]
)  # fmt: skip
_PATHS = st.one_of(
    st.lists(st.one_of(_SEGMENTS, st.text(max_size=6)), min_size=1, max_size=6).map("/".join),
    st.text(max_size=20),
)


def _accepted(path: str) -> bool:
    try:
        check_artifact_path(path)
    except ArtifactContractError:
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(path=_PATHS)
def test_accepted_paths_stay_lexically_inside(path: str) -> None:
    if not _accepted(path):
        return
    root = Path("/srv/artifacts")
    joined = Path(os.path.normpath(root / path))
    assert joined.is_relative_to(root)
    assert joined != root


@pytest.fixture(scope="module")
def trap_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root full of symlinks that point outside, next to a secret file."""
    base = tmp_path_factory.mktemp("trap")
    root = base / "root"
    root.mkdir()
    (base / "secret").write_text("secret")
    (root / "a").symlink_to("..")
    (root / "b.md").symlink_to(base / "secret")
    (root / "x y").symlink_to("/")
    (root / "é").mkdir()
    (root / "é" / "up").symlink_to("../..")
    (root / "e\u0301").symlink_to("../secret")
    (root / "\uff46").symlink_to("é/up")
    (root / "ok.md").write_text("ok")
    return root


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(path=_PATHS)
def test_accepted_paths_never_resolve_outside(trap_root: Path, path: str) -> None:
    if not _accepted(path):
        return
    real_root = trap_root.resolve()
    try:
        resolved = resolve_inside(trap_root, path)
    except ArtifactPathError:
        return
    assert resolved.is_relative_to(real_root)
    if resolved.exists():
        assert resolved.resolve().is_relative_to(real_root)
    result = verify_artifact_contract(contract(entry("p", path)), artifacts_root=str(trap_root))
    assert result is not None
    for produced in result["produced"]:
        assert (trap_root / produced["path"]).resolve().is_relative_to(real_root)

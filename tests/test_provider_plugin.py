"""A third-party provider, found through its entry point alone (docs/providers.md,
"Writing a provider"): the worked example ``examples/parrot-provider`` is installed into a
directory on ``PYTHONPATH`` and ``li agent parrot PROMPT`` runs its fake CLI end to end.

Installing means what an installer leaves: the package, and a ``.dist-info`` whose
``entry_points.txt`` is the one the example's pyproject.toml declares, so lirun discovers
it through ``importlib.metadata`` exactly as after ``pip install``. (The files are
written here rather than by pip: building a wheel offline needs a build backend the test
environment need not have.)
"""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from pathlib import Path

import pytest

from support.execkit import only_row, run_li

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "parrot-provider"


def install(project: Path, target: Path, *, entry_points: dict[str, str] | None = None) -> None:
    """``project`` (a src-layout pyproject) as installed into ``target``."""
    meta = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for package in (project / "src").iterdir():
        shutil.copytree(package, target / package.name)
    groups = meta.get("entry-points", {})
    if entry_points is not None:
        groups = {"lirun.providers": entry_points}
    info = target / f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {meta['version']}\n"
    )
    lines = []
    for group, table in groups.items():
        lines += [f"[{group}]", *(f"{name} = {value}" for name, value in table.items()), ""]
    (info / "entry_points.txt").write_text("\n".join(lines))


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    site = tmp_path / "site"
    site.mkdir()
    install(EXAMPLE, site)
    inherited = os.environ.get("PYTHONPATH")
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(site), inherited])),
        "LIRUN_HOME": str(tmp_path / "home"),
        "LIRUN_DB_URL": str(tmp_path / "state.db"),
        "LIRUN_PARROT_BIN": str(EXAMPLE / "parrot"),  # derived from the name alone
        "PYTHONUNBUFFERED": "1",
    }


def test_the_example_declares_its_entry_point() -> None:
    meta = tomllib.loads((EXAMPLE / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert meta["entry-points"]["lirun.providers"] == {"parrot": "lirun_parrot:ParrotProvider"}


def test_an_installed_provider_runs_end_to_end(env: dict[str, str], tmp_path: Path) -> None:
    done = run_li(
        "agent", "parrot/parrot-2", "hello\nworld", "--json", "--", "--voice", "~",
        env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    row = only_row(env["LIRUN_DB_URL"])
    assert (row["status"], row["provider"], row["model"]) == ("completed", "parrot", "parrot-2")
    assert row["provider_version"] == "1.2.0"  # asked `parrot --version`, read by the provider
    assert row["engine_session_uid"]
    assert (row["input_tokens"], row["output_tokens"]) == (2, 2)
    assert json.loads(done.stdout)["status"] == "completed"
    # The provider's environment hook reached the child (parrot exits 55 without it), and
    # the reply is the stream's, through the provider's own parser.
    transcript = run_li("logs", row["id"], env=env, cwd=tmp_path)
    assert "~world" in transcript.stdout, transcript.stdout
    kinds = [e.get("kind") for e in row["status_evidence_refs"]]
    assert "provider_version_untested" not in kinds  # 1.2.0 is the version tested


def test_a_version_outside_the_tested_window_is_noted(env: dict[str, str], tmp_path: Path) -> None:
    done = run_li("agent", "parrot", "hi", env={**env, "PARROT_VERSION": "2.0.0"}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    row = only_row(env["LIRUN_DB_URL"])
    [notice] = [
        e for e in row["status_evidence_refs"] if e.get("kind") == "provider_version_untested"
    ]
    assert (notice["provider"], notice["version"], notice["tested"]) == (
        "parrot",
        "2.0.0",
        "1.2.0..1.2.0",
    )
    assert "newer than the versions lirun was tested with" in notice["note"]


def test_its_failure_is_classified_by_its_parser(env: dict[str, str], tmp_path: Path) -> None:
    done = run_li("agent", "parrot", "fail with 401", env=env, cwd=tmp_path)
    assert done.returncode == 1
    row = only_row(env["LIRUN_DB_URL"])
    assert (row["status"], row["status_reason_code"]) == ("failed", "run.failed.provider_auth")


def test_a_provider_without_resume_refuses_it(env: dict[str, str], tmp_path: Path) -> None:
    """The example says it can resume; made unable to, `--resume` is refused up front."""
    module = Path(env["PYTHONPATH"].split(os.pathsep)[0]) / "lirun_parrot" / "__init__.py"
    text = module.read_text(encoding="utf-8")
    module.write_text(text.replace("Capabilities(resume=True,", "Capabilities(resume=False,"))
    done = run_li("agent", "parrot", "hi", "--resume", "r1", env=env, cwd=tmp_path)
    assert done.returncode == 2
    assert "parrot cannot continue a conversation" in done.stderr


def test_its_options_and_owned_flags_are_its_own(env: dict[str, str], tmp_path: Path) -> None:
    refused = run_li("agent", "parrot", "hi", "--", "--json", env=env, cwd=tmp_path)
    assert refused.returncode == 2
    assert "lirun runs parrot --json itself" in refused.stderr
    helped = run_li("agent", "--help", env=env, cwd=tmp_path)
    assert "parrot: " in helped.stdout
    assert "$LIRUN_PARROT_BIN" in helped.stdout


def test_a_broken_entry_point_is_named_and_stops_nothing_else(
    env: dict[str, str], tmp_path: Path
) -> None:
    site = Path(env["PYTHONPATH"].split(os.pathsep)[0])
    broken = tmp_path / "broken"
    (broken / "src" / "lirun_broken").mkdir(parents=True)
    (broken / "src" / "lirun_broken" / "__init__.py").write_text("import no_such_module\n")
    (broken / "pyproject.toml").write_text('[project]\nname = "lirun-broken"\nversion = "9.9"\n')
    install(broken, site, entry_points={"brokenagent": "lirun_broken:Provider"})

    done = run_li("agent", "parrot", "still fine", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "lirun-broken 9.9" in done.stderr
    assert "no_such_module" in done.stderr
    asked = run_li("agent", "brokenagent", "hi", env=env, cwd=tmp_path)
    assert asked.returncode == 2
    assert "provider 'brokenagent' is installed but broken" in asked.stderr
    assert "lirun-broken 9.9" in asked.stderr

"""A resume never reuses what retention erased (issue 22, item 5): `li flow resume` of a
flow whose completed legs `li gc` pruned is refused in one line, exit 2, with nothing run
and the database unchanged; it used to hand the dependent leg an empty reply and end
`completed` (both backends, real `li flow run`, `li gc` and `li flow resume`)."""

from __future__ import annotations

import json
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from support.cli import li_command

FLOW = """
legs:
  - id: a
    run: [sh, -c, "echo from-a"]
  - id: b
    depends_on: [a]
    run: [sh, -c, "echo '{{{{ legs.a.output | trim }}}}' >> {ran}; test -e {gate}"]
"""


def li(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(li_command(*args), capture_output=True, text=True, timeout=120, env=env)


def snapshot(env: dict[str, str], invocation: str) -> list[object]:
    """Every record the database lists, and the flow's own, as `li status --json` has them."""
    shown = []
    for argv in (["--kind", "session"], ["--kind", "invocation"], [invocation]):
        done = li(env, "status", "--json", *argv)
        assert done.returncode == 0, done.stderr
        shown.append(json.loads(done.stdout))
    return shown


def failed_flow(tmp_path: Path, li_env: dict[str, str]) -> tuple[str, Path]:
    """A flow whose leg b failed after a completed, a second ago: (its id, the file b
    appends the reply of a it was given to)."""
    ran = tmp_path / "b-ran"
    flow = tmp_path / "flow.yaml"
    text = FLOW.format(ran=ran, gate=tmp_path / "gate")
    flow.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    done = li(li_env, "flow", "run", str(flow), "--json")
    assert done.returncode == 1, done.stderr
    assert ran.read_text() == "from-a\n"
    time.sleep(1.2)  # `li gc` takes records that ended at least a second ago
    return json.loads(done.stdout)["invocation_id"], ran


@pytest.fixture
def pruned_flow(tmp_path: Path, li_env: dict[str, str]) -> tuple[str, Path]:
    """``failed_flow`` after `li gc` pruned its completed leg a."""
    invocation, ran = failed_flow(tmp_path, li_env)
    gc = li(li_env, "gc", "--older-than", "1s", "--status", "completed", "--json")
    assert gc.returncode == 0, gc.stderr
    assert json.loads(gc.stdout)["pruned"]["run"] == 1  # leg a
    (tmp_path / "gate").touch()  # b would now succeed
    return invocation, ran


@pytest.mark.parametrize("detach", [False, True])
def test_a_resume_of_pruned_legs_is_refused_with_nothing_run(
    pruned_flow: tuple[str, Path], li_env: dict[str, str], tmp_path: Path, detach: bool
) -> None:
    invocation, ran = pruned_flow
    before = snapshot(li_env, invocation)
    done = li(li_env, "flow", "resume", *(["--detach"] if detach else []), invocation)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"li flow: error: flow {invocation} cannot be resumed: `li gc` pruned the completed "
        "leg a it would reuse (replies and artifacts gone); nothing was run; run the flow "
        f"again: `li flow run {tmp_path / 'flow.yaml'}`"
    ]
    assert ran.read_text() == "from-a\n"  # b did not run again
    assert snapshot(li_env, invocation) == before


def test_a_flow_run_again_gives_the_dependent_the_real_output(
    pruned_flow: tuple[str, Path], li_env: dict[str, str], tmp_path: Path
) -> None:
    _, ran = pruned_flow
    done = li(li_env, "flow", "run", str(tmp_path / "flow.yaml"), "--json")
    assert done.returncode == 0, done.stderr
    assert ran.read_text() == "from-a\nfrom-a\n"


def test_a_pruned_invocation_with_whole_legs_still_resumes(
    tmp_path: Path, li_env: dict[str, str]
) -> None:
    """`li gc --status failed` prunes the failed invocation and its failed leg; the
    completed leg is whole, so the resume reuses it and gives b its real reply."""
    invocation, ran = failed_flow(tmp_path, li_env)
    gc = li(li_env, "gc", "--older-than", "1s", "--status", "failed", "--json")
    assert json.loads(gc.stdout)["pruned"] == {"run": 1, "invocation": 1}, gc.stdout
    (tmp_path / "gate").touch()
    done = li(li_env, "flow", "resume", invocation, "--json")
    assert done.returncode == 0, done.stderr
    assert [leg["reused"] for leg in json.loads(done.stdout)["legs"]] == [True, False]
    assert ran.read_text() == "from-a\nfrom-a\n"

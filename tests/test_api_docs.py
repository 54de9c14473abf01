"""The examples of docs/api.md and the README's client example run, as a reader would
run them: every ``python`` block in order, in one namespace, in a fresh ``LIRUN_HOME``
with a git repository as the working directory. ``claude`` is the fake provider
replaying a recorded stream (``LIRUN_CLAUDE_BIN``), so the agent example runs too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.gitkit import make_repo
from support.providerkit import fake_env_for, make_fake_bin_dir

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def python_blocks(path: Path) -> list[str]:
    return BLOCK.findall(path.read_text(encoding="utf-8"))


@pytest.fixture
def reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A reader's machine: a fresh home, a repository to work in, claude installed."""
    fake = make_fake_bin_dir(tmp_path / "bin") / "claude"
    for name, value in fake_env_for("claude/success.jsonl", base={}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LIRUN_CLAUDE_BIN", str(fake))
    repo = make_repo(tmp_path / "repo")
    monkeypatch.chdir(repo)
    return repo


def run_blocks(blocks: list[str], where: str) -> dict[str, object]:
    namespace: dict[str, object] = {"__name__": where}
    for index, block in enumerate(blocks):
        code = compile(block, f"{where} block {index + 1}", "exec")
        exec(code, namespace)
    return namespace


def test_every_example_of_docs_api_md_runs(reader: Path) -> None:
    blocks = python_blocks(ROOT / "docs" / "api.md")
    assert len(blocks) >= 10  # one per method at least: the page is not empty
    namespace = run_blocks(blocks, "docs/api.md")
    assert namespace["outcome"].status == "timed_out"  # type: ignore[attr-defined]


def test_the_readme_client_example_runs(reader: Path) -> None:
    readme = ROOT / "README.md"
    blocks = [b for b in python_blocks(readme) if "Client" in b]
    assert blocks, "README's library section shows the client"
    namespace = run_blocks(blocks, "README.md")
    assert namespace["run"].success  # type: ignore[attr-defined]

"""Show files and the repositories they name, for the show-file and `li show` tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

from support.gitkit import git, make_repo


def write_show(folder: Path, text: str, name: str = "show.yaml") -> Path:
    """``text`` (dedented) as a show file in ``folder``; a repository ``repo`` beside it
    (one commit on ``main``) unless one exists."""
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "repo" / ".git").exists():
        make_repo(folder / "repo")
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def refs(repo: Path) -> str:
    """Every ref and the commit it names: equal before and after means git was not written."""
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


# A show whose plays are commands that commit a file each: fast, real git, no agent.
COMMAND_SHOW = """
topic: {topic}
repo: repo
base: main
integration: show/{topic}
gate: "test -f base.txt"
parallel: 2
plays:
  - name: one
    run: "echo one >> one.txt && git add one.txt && git commit -q -m one"
  - name: two
    run: "echo two >> two.txt && git add two.txt && git commit -q -m two"
  - name: three
    depends_on: [one, two]
    run:
      - sh
      - -c
      - "test -f one.txt && test -f two.txt && echo 3 >> three.txt && git add three.txt &&
        git commit -q -m three"
    attempts: 1
"""

"""The environment a supervised child runs with: where its deliverables go, which run is
its parent, the `li` that started it, and no credentials (a team's agent gets the name of
a credential file)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from lirun.record.credential import child_url
from lirun.record.rundir import RUN_ID_ENV_VARS, RunDir
from lirun.settings import FENCE_ENV, LI_ENV, li_path

__all__ = ["child_env"]


def child_env(
    run: RunDir,
    base: Mapping[str, str] | None = None,
    *,
    db_url: str | None = None,
    passfile: Path | None = None,
    fence: str | None = None,
) -> dict[str, str]:
    """The child's environment: where to put deliverables, which run is its parent, and
    the fence of the lease it runs under (``fence``: a worker's run's; else whatever
    ``LIRUN_FENCE`` it inherits, so work nested in fenced work keeps that fence).

    A nested ``li`` must not inherit this run's id, so the run id variables are removed.
    No password reaches the child (an agent must not be able to rewrite its own record
    with lirun's password unless it must use the database): ``LIRUN_DB_URL`` is this
    run's database (``db_url``, else the inherited value) with any password removed, or
    absent when it cannot be parsed. A child given ``passfile`` (the run's credential
    file, ``record.credential``: a team's agent) finds it named in that URL.
    """
    env = dict(os.environ if base is None else base)
    for var in RUN_ID_ENV_VARS:
        env.pop(var, None)
    source = db_url or env.get("LIRUN_DB_URL")
    env.pop("LIRUN_DB_URL", None)
    safe = child_url(source, passfile) if source else None
    if safe:
        env["LIRUN_DB_URL"] = safe
    env["LIRUN_PARENT_RUN_ID"] = run.run_id
    env["LIRUN_ARTIFACT_DIR"] = str(run.artifact_dir)
    if fence:
        env[FENCE_ENV] = fence
    _give_li(env, run)
    return env


def _give_li(env: dict[str, str], run: RunDir) -> None:
    """``LIRUN_LI``: the absolute path of the `li` running this (``settings.li_path``),
    and a directory holding only a link named ``li`` to it first on ``PATH``, so a child
    (an agent told to run `li team send`) finds this `li` even when it was started as
    ``.venv/bin/li`` and the venv is not on ``PATH``. Only `li`: the venv's ``python``
    and ``pip`` must not shadow the ones a command leg would otherwise run. Nothing is
    given when no `li` is known (`python -m lirun` from a source tree)."""
    li = li_path()
    if li is None:
        return
    env[LI_ENV] = li
    bin_dir = run.state_root / "bin"
    link = bin_dir / "li"
    try:
        if not link.is_symlink():
            bin_dir.mkdir(mode=0o700, exist_ok=True)
            link.symlink_to(li)
    except OSError:
        return  # LIRUN_LI still names it; a bare `li` is what PATH makes of it
    path = env.get("PATH", "")
    env["PATH"] = f"{bin_dir}{os.pathsep}{path or os.defpath}"

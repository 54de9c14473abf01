"""What a show run checks in the repository before it writes anything.

``check_repo`` raises the first problem (exit 2) for ``li show run``; ``repo_problems``
lists them all, so ``li show run --dry-run`` says everything a real run would trip on:
the integration branch or an earlier show's attempt branch checked out (its worktree
left behind), attempt branches whose unmerged work a run would reset, and integration
commits base lacks without ``--continue-integration``.
"""

from __future__ import annotations

from pathlib import Path

from lirun.errors import ConflictError, UsageError
from lirun.exec.worktrees import worktrees_root
from lirun.shows.gitwork import ShowGit
from lirun.shows.spec import ShowSpec

__all__ = ["check_not_checked_out", "check_repo", "dry_run_problems", "repo_problems"]


def check_repo(spec: ShowSpec, integration: str, *, continue_integration: bool) -> ShowGit:
    git = ShowGit(spec.repo, "", integration)
    problems = repo_problems(git, spec, continue_integration=continue_integration)
    if problems:
        raise problems[0]
    return git


def repo_problems(
    git: ShowGit, spec: ShowSpec, *, continue_integration: bool
) -> list[UsageError | ConflictError]:
    """Everything in the repository that would make a run of ``spec`` fail at its start
    or overwrite work: a missing repository or base, a bad integration name, the
    integration branch or an earlier show's attempt branch checked out, attempt branches
    holding unmerged work (a run resets them), integration commits base lacks."""
    if not git.repo.is_repo():
        return [UsageError(f"repo {spec.repo}: not a git repository")]
    integration = git.integration
    if git.repo.branch_head(spec.base) is None:
        return [UsageError(f"base branch {spec.base!r} does not exist in {spec.repo}")]
    if git.repo.run("check-ref-format", "--branch", integration, check=False).returncode:
        return [UsageError(f"integration branch {integration!r} is not a valid branch name")]
    if integration == spec.base:
        return [UsageError(f"the integration branch must not be the base branch {spec.base!r}")]
    found: list[UsageError | ConflictError] = []
    where = git.repo.checked_out_branches().get(integration)
    if where is not None:
        found.append(ConflictError(_integration_checked_out(integration, where)))
    held = git.repo.checked_out_branches()
    for branch, where in held.items():
        if branch.startswith(f"{integration}--"):
            found.append(ConflictError(_attempt_checked_out(branch, where, integration)))
    found += [ConflictError(m) for m in _unmerged_attempts(git, spec, skip=set(held))]
    head = git.head()
    if head is not None and not continue_integration:
        ahead = git.repo.out("rev-list", "--count", f"refs/heads/{spec.base}..{head}")
        if ahead != "0":
            found.append(
                ConflictError(
                    f"integration branch {integration} has {ahead} commit(s) that {spec.base} "
                    "does not have (an earlier show?); pass --continue-integration to build "
                    "on them, or name another integration branch"
                )
            )
    return found


def _unmerged_attempts(git: ShowGit, spec: ShowSpec, *, skip: set[str]) -> list[str]:
    """An earlier show's attempt branches of these plays with commits no other branch
    holds: a run would reset them to its start and lose that work."""
    names = {p.name for p in spec.plays}
    out = []
    for branch, tip in git.repo.branches(f"{git.integration}--").items():
        play = branch[len(git.integration) + 2 :].rpartition("-a")[0]
        if branch in skip or play not in names:
            continue
        # held by no branch but the attempt branches, which a run resets one by one
        others = f"--exclude={git.integration}--*"
        lost = git.repo.out("rev-list", "--count", tip, "--not", others, "--branches")
        if lost != "0":
            out.append(
                f"branch {branch} (play {play}'s attempt in an earlier show) holds {lost} "
                "commit(s) no other branch has, and this run would reset it; `li show clean "
                "SHOW` of that show says what it keeps (--force drops it), or merge it, or "
                "name another integration branch"
            )
    return out


def _attempt_checked_out(branch: str, where: str, integration: str) -> str:
    """A play's attempt branch of another show on ``integration`` is checked out: name
    that show when the worktree is lirun's, so nobody removes the work of a live one."""
    try:
        owner = Path(where).resolve().relative_to(worktrees_root().resolve()).parts[0]
    except (ValueError, IndexError):
        owner = None
    if owner is None:
        return (
            f"branch {branch} (a play's attempt branch of an earlier show on {integration}) "
            f"is checked out in {where}; look at it, then remove that worktree (git worktree "
            f"remove {where}) or name another integration branch"
        )
    return (
        f"branch {branch} is checked out in {where}, a play worktree of show {owner} on "
        f"{integration}; `li show status {owner}` says whether it still runs or waits for "
        f"a person (then resume or abort it); once it ended, remove that worktree (git "
        f"worktree remove {where}), or name another integration branch"
    )


def _integration_checked_out(integration: str, where: str) -> str:
    return (
        f"integration branch {integration} is checked out in {where}; lirun moves "
        "it while the show runs: switch that worktree to another branch first"
    )


def check_not_checked_out(git: ShowGit) -> None:
    where = git.repo.checked_out_branches().get(git.integration)
    if where is not None:
        raise ConflictError(_integration_checked_out(git.integration, where))


def dry_run_problems(spec: ShowSpec, *, continue_integration: bool) -> list[str]:
    """What a real ``li show run`` of ``spec`` would refuse or overwrite now, one line
    each (an integration name with ``{id}`` is new on every run: nothing collides)."""
    git = ShowGit(spec.repo, "", spec.integration_branch("dry-run"))
    return [str(p) for p in repo_problems(git, spec, continue_integration=continue_integration)]

"""A task: what one flow leg or one play runs, and the execution request it becomes.

Flows and shows describe work the same way ``li agent`` and ``li run`` take it: an agent
(``claude[/MODEL]`` or ``codex[/MODEL]``) with a prompt and provider options, or a
command; optionally a profile, a playbook and inline artifact entries that make up the
artifact contract, and limits. ``build_request`` turns a task into the
:class:`~lirun.exec.request.RunRequest` that ``execute`` runs in-process, so an
orchestrated execution has exactly the record of one started by hand.

Nothing here reads the task's file: the loaders (``flows/``, ``shows/``) check keys and
values with ``file:line`` and build ``Task`` values; ``check_task`` is the last check
that needs the machine (profiles and playbooks on disk, the provider's option set).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from lirun.errors import UsageError
from lirun.exec.agent_legs import AgentProgram
from lirun.exec.declarations import MAX_PARALLEL, Declared, declarations
from lirun.exec.leg_states import stall_limit
from lirun.exec.legs import CommandProgram, Echo
from lirun.exec.profiles import check_provider_default
from lirun.exec.provider_options import ProviderOptions
from lirun.exec.request import RunRequest
from lirun.exec.supervisor import Limits
from lirun.providers.registry import find_provider_executable, parse_provider_spec
from lirun.settings import Settings
from lirun.teams.membership import TEAM_ENV

if TYPE_CHECKING:
    from lirun.exec.legs import Program

__all__ = [
    "MAX_PARALLEL",
    "TASK_KEYS",
    "Declared",
    "Task",
    "build_request",
    "check_task",
    "declarations",
]


# The keys a flow leg and a play share in their files: the work (an agent with a prompt,
# or a command), its declarations, its dependencies and its limits; beside them the
# provider's options (``option_keys()``: the providers installed decide them, so they
# are asked when a file is read).
TASK_KEYS = frozenset(
    {
        "agent",
        "prompt",
        "run",
        "profile",
        "playbook",
        "artifacts",
        "depends_on",
        "timeout",
        "idle_timeout",
        "stall_timeout",
        "require_change",
    }
)


@dataclass(frozen=True, slots=True)
class Task:
    """An agent with a prompt, or a command (``run``): exactly one of the two.

    ``agent`` is ``PROVIDER[/MODEL]``; ``options`` are provider options under the keys a
    profile's ``defaults:`` takes (``permission_mode``, ``allowed_tools``, …);
    ``artifacts`` are inline contract entries (``{id, path, required}``), overlaid on the
    profile's and the playbook's by id. ``timeout`` / ``idle_timeout`` in seconds;
    ``stall_timeout`` in seconds, 0 for none (an agent's default: ``DEFAULT_STALL_TIMEOUT``).
    ``require_change``: completed needs a change in the cwd or a produced artifact (a
    command's exit 0, an agent's reply, is not enough); a profile's or playbook's
    ``defaults: {require_change: true}`` asks the same.
    """

    agent: str | None = None
    prompt: str | None = None
    run: tuple[str, ...] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    profile: str | None = None
    playbook: str | None = None
    artifacts: tuple[Mapping[str, Any], ...] = ()
    timeout: float | None = None
    idle_timeout: float | None = None
    stall_timeout: float | None = None
    require_change: bool = False

    @property
    def is_agent(self) -> bool:
        return self.agent is not None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (stored with the flow or show so resume needs no file)."""
        return {
            "agent": self.agent,
            "prompt": self.prompt,
            "run": list(self.run) if self.run is not None else None,
            "options": dict(self.options),
            "profile": self.profile,
            "playbook": self.playbook,
            "artifacts": [dict(a) for a in self.artifacts],
            "timeout": self.timeout,
            "idle_timeout": self.idle_timeout,
            "stall_timeout": self.stall_timeout,
            "require_change": self.require_change,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Task:
        run = data.get("run")
        return cls(
            agent=data.get("agent"),
            prompt=data.get("prompt"),
            run=tuple(run) if run is not None else None,
            options=dict(data.get("options") or {}),
            profile=data.get("profile"),
            playbook=data.get("playbook"),
            artifacts=tuple(dict(a) for a in data.get("artifacts") or ()),
            timeout=data.get("timeout"),
            idle_timeout=data.get("idle_timeout"),
            stall_timeout=data.get("stall_timeout"),
            require_change=bool(data.get("require_change")),
        )


def _declarations(task: Task) -> Declared:
    return declarations(task.profile, task.playbook, task.artifacts)


def _program(task: Task, declared: Declared, prompt: str | None, settings: Settings) -> Program:
    require_change = task.require_change or bool(declared.defaults.get("require_change"))
    if task.run is not None:
        if not task.run:
            raise UsageError("run: the command is empty; give the program and its arguments")
        return CommandProgram(argv=list(task.run), require_change=require_change)
    if task.agent is None:
        raise UsageError("a task needs an agent with a prompt, or a command (run)")

    name, model = parse_provider_spec(task.agent)
    check_provider_default(declared.defaults, name)
    text = prompt if prompt is not None else task.prompt or declared.playbook_prompt
    if text is None or not text.strip():
        raise UsageError(f"agent {task.agent}: no prompt; give prompt: or a playbook with one")
    options = ProviderOptions.from_mapping(declared.defaults).merged(
        ProviderOptions.from_mapping(task.options, where=f"agent {task.agent}")
    )
    return AgentProgram(
        provider=name,
        executable=find_provider_executable(name, None, settings),
        prompt=text,
        model=model or declared.defaults.get("model"),
        options=options,
        require_change=require_change,
    )


def check_task(task: Task, settings: Settings | None = None) -> None:
    """Everything ``build_request`` would refuse, without building a request: profiles
    and playbooks exist and parse, the contract is valid, the provider is known and its
    executable found (with ``settings``; None: the environment's, read here once, as for
    a flow, show or schedule file loaded by a library caller), the options fit it.
    Raises UsageError (exit 2)."""
    declared = _declarations(task)
    base = settings if settings is not None else Settings.from_env()
    _program(task, declared, task.prompt or declared.playbook_prompt or "(checked)", base)


def build_request(
    task: Task,
    *,
    cwd: str,
    db_url: str | None = None,
    prompt: str | None = None,
    run_argv: list[str] | None = None,
    invocation_id: str | None = None,
    run_id: str | None = None,
    resume_branch: str | None = None,
    save_dir: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    echo: Echo | None = None,
    env: Mapping[str, str] | None = None,
    settings: Settings | None = None,
) -> RunRequest:
    """The request ``execute`` runs for ``task`` in ``cwd``.

    ``prompt`` / ``run_argv`` replace the task's own (an orchestrator renders templates
    or adds feedback first); ``resume_branch`` resumes a conversation (``li agent
    --resume``). The child's streams are captured only (``echo`` None): orchestrated
    executions run side by side and never write to ``li``'s stdout. ``settings`` are the
    run's (``RunRequest.settings``; the provider's executable is looked up with
    them), with ``db_url`` and ``run_id`` laid over them when given; None: the
    environment's, read here once, as for any library caller.
    Raises UsageError for a task that cannot run (see ``check_task``) or a bad setting.
    """
    base = settings if settings is not None else Settings.from_env()
    settings = base.with_flags(db_url=db_url, run_id=run_id)

    declared = _declarations(task)
    if run_argv is not None:
        task = replace(task, agent=None, prompt=None, run=tuple(run_argv))
    program = _program(task, declared, prompt, settings)
    defaults = declared.defaults
    grace = defaults.get("grace")
    stall = task.stall_timeout if task.stall_timeout is not None else defaults.get("stall_timeout")
    limits = Limits(
        timeout=task.timeout if task.timeout is not None else defaults.get("timeout"),
        idle_timeout=(
            task.idle_timeout if task.idle_timeout is not None else defaults.get("idle_timeout")
        ),
        # Commands have no progress to measure: only an agent gets a stall limit.
        stall_timeout=stall_limit(stall) if program.provider != "command" else None,
        grace=10.0 if grace is None else float(grace),
    )
    return RunRequest(
        program=program,
        cwd=cwd,
        limits=limits,
        save_dir=save_dir,
        artifact_contract=declared.contract,
        invocation_id=invocation_id,
        resume_branch=resume_branch,
        echo=echo or Echo(),
        metadata=dict(metadata or {}),
        env=dict(env or {}),
        db_credential=TEAM_ENV in (env or {}),
        settings=settings,
    )

"""``li agent PROVIDER[/MODEL] PROMPT``: an agent CLI under supervision (docs/providers.md).

lirun's options may come before, between or after PROVIDER and PROMPT. Everything after
the first bare ``--`` is not lirun's: it is handed on as ``provider_args`` (the
provider's own options). A prompt that starts with ``-`` is given as ``--prompt TEXT``;
``--prompt -`` reads it from stdin.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import Any

from lirun.cli.common import make_parser
from lirun.cli.options import (
    EXIT_CODES,
    FILES_NOTE,
    add_execution_options,
    echo_for,
    execute_or_detach,
    request_from,
    resolve_options,
    stall_seconds,
    unknown_option,
    worker_argv,
)
from lirun.cli.parser import CommandParser
from lirun.errors import UsageError
from lirun.exec.agent_legs import AgentProgram
from lirun.exec.profiles import check_provider_default
from lirun.exec.provider_options import ProviderOptions
from lirun.exec.trouble import TROUBLE_KINDS, one_line, trouble_line
from lirun.providers.registry import (
    find_provider_executable,
    get_provider,
    parse_provider_spec,
    provider_names,
    providers,
)
from lirun.settings import Settings


def providers_text() -> str:
    """Each provider the registry knows (built-in and installed), one paragraph each."""
    paragraphs = []
    for provider in providers():
        exe = provider.executable_name
        own = ", ".join(provider.options) or "none"
        owned = ", ".join(provider.owned_flags) or "none"
        low, high = provider.tested_versions
        text = (
            f"{provider.name}: {' '.join(provider.command(exe))} (${provider.env_var}; "
            f"tested {low} to {high}); options: {own}; lirun owns: {owned}"
        )
        if modes := provider.capabilities.approval_modes:
            text += f"; tool approval modes: {', '.join(modes)}"
        paragraphs.append(
            textwrap.fill(
                text, 88, initial_indent="  ", subsequent_indent="    ", break_on_hyphens=False
            )
        )
    return "\n".join(paragraphs)


def _example() -> str:
    return provider_names()[0] if provider_names() else "PROVIDER"


DESCRIPTION = f"""\
Run an agent CLI headless and record how it ended. The providers, with the command
lirun runs, the variable naming the executable, the versions tested, their own options,
the flags lirun sets itself and the tool approval modes the CLI offers:
{providers_text()}

The prompt goes on the provider's stdin, never on its command line (where `ps` shows it
to every user), and the caller's stdin is never passed on. The executable is --bin PATH,
else $LIRUN_<PROVIDER>_BIN, else found on PATH.

The provider's own options follow the prompt behind `--` (li agent {_example()} "fix it"
-- ARGS), or come from a profile's or playbook's defaults (the named options above, and
provider_args: a list, anything else). They are recorded on the row. The flags lirun
owns are refused. Provider retries and errors are shown on stderr as they happen and
kept as evidence.

The stream's terminal event decides the verdict, together with the exit code, signals
and stream idle time; then the artifact contract and the completion-evidence gate apply.
Every event is recorded as a message while it arrives, and the engine session id is
recorded on the row and the branch. A new conversation's branch id is the run id;
--resume BRANCH continues one with the provider's own resume.

Options may come anywhere around PROVIDER and PROMPT (`li agent {_example()} --timeout 600
"fix it"`). Quote the prompt: it is one argument. A prompt that starts with '-' goes in
--prompt TEXT; --prompt - reads the prompt from stdin. Everything after the first bare
`--` is for the provider, not for lirun (`li agent {_example()} "fix it" -- ARGS`).

stdout carries only the final answer of a completed run (or the --json summary);
progress lines and the agent's stderr go to stderr (--quiet: the agent's stderr only).
The raw stream is saved as stream/<branch>.jsonl, the agent's stderr as stream/stderr.log.

{FILES_NOTE}"""


def render_event(provider: str, event: Any) -> str | None:
    """One progress line for stderr, or None for events not worth showing."""
    data = event.data
    if event.kind == "assistant_text":
        return f"{provider}: {one_line(str(data.get('text', '')))}"
    if event.kind == "tool_call":
        detail = json.dumps(data.get("input"), sort_keys=True, default=str)
        return f"{provider}: -> {data.get('name')} {one_line(detail)}"
    if event.kind in TROUBLE_KINDS:
        return trouble_line(provider, event)
    if event.kind == "session" and data.get("engine_session_uid"):
        return f"{provider}: session {data['engine_session_uid']}"
    return None


def _progress(provider: str, event: Any) -> None:
    line = render_event(provider, event)
    if line is not None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _trouble(provider: str, event: Any) -> None:
    """A detached worker's log gets the provider's retries, warnings and errors only."""
    line = trouble_line(provider, event)
    if line is not None:
        sys.stderr.write(f"li agent: {line}\n")
        sys.stderr.flush()


def _print_answer(result: Any) -> None:
    text = result.reply
    if result.status == "completed" and text.strip():
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()


USAGE = (
    "li agent [options] PROVIDER[/MODEL] [PROMPT] [options] [-- PROVIDER_OPTIONS...]\n"
    "       li agent [options] PROVIDER[/MODEL] --prompt TEXT|- [-- PROVIDER_OPTIONS...]"
)
_NO_PROMPT = "no prompt given; usage: li agent PROVIDER[/MODEL] PROMPT (or --prompt TEXT|-)"


def _program(args: Any, resolved: Any, settings: Settings) -> Any:
    name, model = parse_provider_spec(args.provider)
    check_provider_default(resolved.defaults, name)
    if getattr(args, "resume", None) and not get_provider(name).capabilities.resume:
        raise UsageError(
            f"--resume: {name} cannot continue a conversation (its CLI has no resume); "
            "start a new run without --resume"
        )
    model = model or resolved.defaults.get("model")
    prompt = args.prompt if args.prompt is not None else resolved.playbook_prompt
    if prompt is None or not prompt.strip():
        hint = ""
        if args.provider_args:
            hint = "; words after -- are the provider's options, not the prompt"
        raise UsageError(_NO_PROMPT + hint)

    # Profile/playbook defaults, then the command line's ``-- ARGS`` (checked for the provider).
    options = ProviderOptions.from_mapping(resolved.defaults).merged(
        ProviderOptions(provider_args=tuple(args.provider_args))
    )
    options.check_for(name)
    executable = find_provider_executable(name, args.bin, settings)  # --bin > the settings'
    return AgentProgram(
        provider=name,
        executable=executable,
        prompt=prompt,
        model=model,
        options=options,
        require_change=args.require_change or bool(resolved.defaults.get("require_change")),
    )


def build_parser() -> CommandParser:
    parser = make_parser("li agent", DESCRIPTION, EXIT_CODES)
    parser.usage = USAGE
    parser.add_argument(
        "words",
        nargs="*",
        metavar="PROVIDER[/MODEL] [PROMPT]",
        help=f"{' or '.join(provider_names())} (optionally /MODEL), then the task as one "
        "quoted argument (default: the playbook's prompt)",
    )
    parser.add_argument(
        "--prompt",
        dest="prompt_option",
        metavar="TEXT",
        help="the task as an option value, e.g. for a prompt that starts with '-'; "
        "'-' reads it from stdin",
    )
    parser.add_argument("--bin", metavar="PATH", help="the provider executable to run")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument(
        "--stall-timeout",
        metavar="DUR",
        type=stall_seconds,
        help="no progress (assistant text, a tool call or result, a completed API call) for "
        "DUR: stop the agent, failed with the class of what it was doing (retry "
        "notices and warnings are not progress; default 600, 0: off)",
    )
    parser.add_argument(
        "--require-change",
        action="store_true",
        help="a reply alone is not evidence of work: completed needs a change in the cwd "
        "since the start (a commit, a changed file) or a produced artifact, else "
        "completed_empty (as a profile's defaults: require_change: true)",
    )
    add_execution_options(parser)
    return parser


def _read_stdin_prompt() -> str:
    if sys.stdin is None or sys.stdin.closed:
        raise UsageError("--prompt -: stdin is closed; pipe the prompt in or give --prompt TEXT")
    try:
        return sys.stdin.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--prompt -: cannot read the prompt from stdin: {exc}") from None


def _join_prompt_value(tokens: list[str]) -> list[str]:
    """``--prompt -x`` → ``--prompt=-x``: argparse would take ``-x`` for an option."""
    out: list[str] = []
    index = 0
    while index < len(tokens):
        if tokens[index] == "--prompt" and index + 1 < len(tokens):
            out.append(f"--prompt={tokens[index + 1]}")
            index += 2
        else:
            out.append(tokens[index])
            index += 1
    return out


def parse_args(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """lirun's options anywhere before the first bare ``--``; what follows it is the
    provider's (``provider_args``). Sets ``provider``, ``prompt`` (None: the playbook's)
    and ``provider_args``. ``--prompt -`` is read from stdin here."""
    cut = argv.index("--") if "--" in argv else len(argv)
    mine, provider_args = _join_prompt_value(argv[:cut]), argv[cut + 1 :]
    args, extras = parser.parse_known_intermixed_args(mine)
    if extras:
        raise unknown_option(
            "li agent",
            extras,
            "a prompt that starts with '-' goes in --prompt TEXT, "
            "provider options after a final --",
        )
    words: list[str] = args.words
    if not words:
        raise UsageError("no provider given; usage: li agent PROVIDER[/MODEL] PROMPT")
    if len(words) > 2:
        raise UsageError(
            f"too many arguments: after the provider {words[0]!r} came {len(words) - 1} "
            f"words ({' '.join(words[1:])!r}); quote the prompt so it is one argument"
        )
    positional = words[1] if len(words) == 2 else None
    if positional is not None and args.prompt_option is not None:
        raise UsageError("two prompts: a PROMPT argument and --prompt; give the prompt once")
    prompt = positional
    if args.prompt_option is not None:
        prompt = _read_stdin_prompt() if args.prompt_option == "-" else args.prompt_option
    args.provider = words[0]
    args.prompt = prompt
    args.provider_args = list(provider_args)
    return args


def _worker_argv(parser: CommandParser, args: argparse.Namespace) -> list[str]:
    """The parsed call for a detached worker: the prompt travels on its stdin (``--prompt
    -``), never as an argument that every user sees in ``ps``."""
    options = worker_argv(parser, argparse.Namespace(**{**vars(args), "prompt_option": None}))
    prompt = ["--prompt=-"] if args.prompt is not None else []
    tail = ["--", *args.provider_args] if args.provider_args else []
    return [*options, args.provider, *prompt, *tail]


def main(argv: list[str], settings: Settings) -> int:
    parser = build_parser()
    args = parse_args(parser, argv)
    resolved = resolve_options(args)
    program = _program(args, resolved, settings)
    on_event = None if args.quiet else _trouble if args.detached_worker else _progress
    request = request_from(
        args, resolved, program, settings, echo=echo_for(args), on_event=on_event
    )
    return execute_or_detach(
        "li agent",
        "agent",
        _worker_argv(parser, args),
        args,
        request,
        on_result=_print_answer,
        worker_stdin=args.prompt,
    )

"""``li agent PROVIDER[/MODEL] PROMPT``: an agent CLI under supervision (PROVIDERS.md)."""

from __future__ import annotations

import json
import sys
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
)
from lirun.errors import UsageError

DESCRIPTION = f"""\
Run an agent CLI headless and record how it ended. Providers: claude (claude -p
--output-format stream-json --verbose) and codex (codex exec --json -); the prompt goes
on the provider's stdin, never on its command line (where `ps` shows it to every user),
and the caller's stdin is never passed on. The executable is --bin PATH, else
$LIRUN_CLAUDE_BIN / $LIRUN_CODEX_BIN, else found on PATH.

The provider's own options follow the prompt behind `--` (li agent claude "fix it" --
--permission-mode acceptEdits --max-turns 30), or come from a profile's or playbook's
defaults: permission_mode, allowed_tools, disallowed_tools, max_turns,
append_system_prompt, mcp_config (claude); sandbox, approval_policy, config (codex);
provider_args (a list, anything else). They are recorded on the row. Options lirun sets
itself are refused (claude -p/--print, --output-format, --input-format; codex --json).
Provider retries and errors are shown on stderr as they happen and kept as evidence.

The stream's terminal event decides the verdict (a Claude `result`, a Codex
`turn.completed` / `turn.failed`), together with the exit code, signals and stream idle
time; then the artifact contract and the completion-evidence gate apply. Every event is
recorded as a message while it arrives, and the engine session id is recorded on the
row and the branch. A new conversation's branch id is the run id; --resume BRANCH
continues one with the provider's own resume.

stdout carries only the final answer of a completed run (or the --json summary);
progress lines and the agent's stderr go to stderr (--quiet: the agent's stderr only).
The raw stream is saved as stream/<branch>.jsonl, the agent's stderr as stream/stderr.log.

{FILES_NOTE}"""

_PROGRESS_CHARS = 160


def _clip(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _PROGRESS_CHARS else line[: _PROGRESS_CHARS - 1] + "…"


def render_event(provider: str, event: Any) -> str | None:
    """One progress line for stderr, or None for events not worth showing."""
    data = event.data
    if event.kind == "assistant_text":
        return f"{provider}: {_clip(str(data.get('text', '')))}"
    if event.kind == "tool_call":
        detail = json.dumps(data.get("input"), sort_keys=True, default=str)
        return f"{provider}: -> {data.get('name')} {_clip(detail)}"
    if event.kind == "error":
        return f"{provider}: error: {_clip(str(data.get('message', '')))}"
    if event.kind == "retry":
        return f"{provider}: retrying ({data.get('count')}): {_clip(str(data.get('message', '')))}"
    if event.kind == "session" and data.get("engine_session_uid"):
        return f"{provider}: session {data['engine_session_uid']}"
    return None


def _progress(provider: str, event: Any) -> None:
    line = render_event(provider, event)
    if line is not None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _print_answer(result: Any) -> None:
    text = result.response_text
    if result.status == "completed" and text.strip():
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()


def _program(args: Any, resolved: Any) -> Any:
    from lirun.exec.legs import AgentProgram
    from lirun.exec.providers import find_provider_executable, parse_provider_spec

    name, model = parse_provider_spec(args.provider)
    model = model or resolved.defaults.get("model")
    prompt = args.prompt if args.prompt is not None else resolved.playbook_prompt
    if prompt is None or not prompt.strip():
        raise UsageError("no prompt given; usage: li agent PROVIDER[/MODEL] PROMPT")
    from lirun.exec.provider_options import ProviderOptions

    # Profile/playbook defaults, then the command line's ``-- ARGS`` (checked for the provider).
    options = ProviderOptions.from_mapping(resolved.defaults).merged(
        ProviderOptions(provider_args=tuple(getattr(args, "provider_args", None) or ()))
    )
    options.check_for(name)
    executable = find_provider_executable(name, args.bin)
    return AgentProgram(
        provider=name, executable=executable, prompt=prompt, model=model, options=options
    )


def main(argv: list[str]) -> int:
    parser = make_parser("li agent", DESCRIPTION, EXIT_CODES)
    parser.add_argument("provider", metavar="PROVIDER[/MODEL]", help="claude or codex")
    parser.add_argument(
        "prompt", metavar="PROMPT", nargs="?", help="the task (default: the playbook's prompt)"
    )
    parser.add_argument("--bin", metavar="PATH", help="the provider executable to run")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    add_execution_options(parser)
    # Tokens after the first bare ``--`` are the provider's own options.
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    args.provider_args = argv[cut + 1 :]
    resolved = resolve_options(args)
    program = _program(args, resolved)
    quiet = args.quiet or args.detached_worker
    request = request_from(
        args,
        resolved,
        program,
        echo=echo_for(args),
        on_event=None if quiet else _progress,
    )
    return execute_or_detach("li agent", "agent", argv, args, request, on_result=_print_answer)

"""``li run [options] [--] CMD ...``: any command under supervision, with a durable record.

lirun's options come before CMD; the first token that is neither an option nor an
option's value starts CMD, so ``li run --timeout 1 sleep 3`` needs no ``--`` (a ``--``
is still accepted, and needed for a CMD that starts with ``-``).
"""

from __future__ import annotations

from lirun.cli.common import make_parser
from lirun.cli.options import (
    FILES_NOTE,
    RUN_EXIT_CODES,
    add_execution_options,
    echo_for,
    execute_or_detach,
    option_arity,
    request_from,
    resolve_options,
    split_command,
    stdin_for,
    unknown_option,
    worker_argv,
)
from lirun.cli.parser import CommandParser
from lirun.exec.legs import CommandProgram
from lirun.exec.preflight import check_command
from lirun.settings import Settings

DESCRIPTION = f"""\
Run CMD under supervision and record how it ended. A command's exit code is its
verdict: exit 0 is completed (run.completed.ok, the exit code kept as evidence), a
non-zero exit is failed (run.failed.exit_nonzero, the code kept as evidence). Then the
artifact contract applies: a required artifact missing fails the run. To ask for
evidence of work, give --require-change (or declare artifacts, or a profile with
defaults: require_change: true): then exit 0 is completed only with a produced artifact
or a change in the cwd since the run started (in git: a new commit reachable from HEAD,
or a working tree that changed; outside git: files added, removed or modified), else
completed_empty. Work done before the run never counts, nor does the command's output.

The child's stdout is the command's result: it is echoed to li's stdout (to stderr with
--json, which keeps stdout for the summary) and its last 64 KiB are recorded as its
output. The child's stderr goes to li's stderr. Both are saved under stream/ (stdout.log,
stderr.log). stdin is passed through (closed with --detach). SIGINT to li stops the
child's process group (aborted, 130); SIGTERM likewise (cancelled, 143).

lirun's options come before CMD: the first word that is not an option (or an option's
value) starts CMD, so `li run --timeout 60 pytest -q` needs no `--`; everything from
CMD on is the command's own (`li run pytest --timeout 5` passes --timeout to pytest).
`--` still ends lirun's options explicitly (needed when CMD starts with '-').

{FILES_NOTE}"""

USAGE = "li run [options] [--] CMD [ARGS...]"


def build_parser() -> CommandParser:
    parser = make_parser("li run", DESCRIPTION, RUN_EXIT_CODES)
    parser.usage = USAGE
    add_execution_options(parser)
    parser.add_argument(
        "--require-change",
        action="store_true",
        help="ask for evidence of work: exit 0 counts as completed only with a change in "
        "the cwd since the start or a produced artifact (else completed_empty)",
    )
    return parser


def main(argv: list[str], settings: Settings) -> int:
    parser = build_parser()
    options, command = split_command(argv, option_arity(parser))
    args, extras = parser.parse_known_args(options)
    if extras:
        raise unknown_option("li run", extras, "lirun's options come before CMD")
    resolved = resolve_options(args)
    check_command(command, resolved.cwd)

    request = request_from(
        args,
        resolved,
        CommandProgram(
            command,
            require_change=args.require_change or bool(resolved.defaults.get("require_change")),
        ),
        settings,
        echo=echo_for(args),
        stdin=stdin_for(args),
    )
    normalized = [*worker_argv(parser, args), "--", *command]
    return execute_or_detach("li run", "run", normalized, args, request)

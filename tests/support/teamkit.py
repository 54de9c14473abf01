"""Fake agents that talk through ``li team``: each says hello to all, waits (bounded) for
what the others say, writes what it saw, then replays a provider fixture."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from support.providerkit import FAKE_PROVIDER, fixture_path


def chatty_agent(directory: Path, *, expect: int = 1, wait_s: float = 30.0) -> Path:
    """A ``claude`` that runs ``li team`` with the team its environment names: it sends
    ``hello from MEMBER`` to all, reads its inbox until ``expect`` messages came (or
    ``wait_s`` passed), and leaves ``<dir>/<member>.seen`` (the inbox lines),
    ``<dir>/<member>.env`` (LIRUN_TEAM), ``<dir>/<member>.prompt`` (its stdin),
    ``.environ`` and ``.cmdline`` (its own, from /proc), ``.status`` (``li status
    --json`` of its own run) and ``.passfile`` (the mode of the credential file its
    LIRUN_DB_URL names, when it names one)."""
    li = f"{shlex.quote(sys.executable)} -m lirun"
    out = shlex.quote(str(directory))
    script = directory / "claude"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = --version ]; then exec {shlex.quote(sys.executable)} '
        f"{shlex.quote(str(FAKE_PROVIDER))} --version; fi\n"
        f'cat > {out}/"$LIRUN_MEMBER".prompt\n'
        f'echo "$LIRUN_TEAM" > {out}/"$LIRUN_MEMBER".env\n'
        f'cat /proc/$$/environ > {out}/"$LIRUN_MEMBER".environ\n'
        f'cat /proc/$$/cmdline > {out}/"$LIRUN_MEMBER".cmdline\n'
        'case "$LIRUN_DB_URL" in *passfile=*) pf="${LIRUN_DB_URL##*passfile=}"; '
        f'stat -c %a "${{pf%%&*}}" > {out}/"$LIRUN_MEMBER".passfile;; esac\n'
        f'{li} team send "$LIRUN_TEAM" --to all "hello from $LIRUN_MEMBER" >/dev/null || exit 9\n'
        f'{li} status "$LIRUN_PARENT_RUN_ID" --json > {out}/"$LIRUN_MEMBER".status || exit 8\n'
        f': > {out}/"$LIRUN_MEMBER".seen\n'
        f"end=$(( $(date +%s) + {int(wait_s)} ))\n"
        f'while [ "$(wc -l < {out}/"$LIRUN_MEMBER".seen)" -lt {expect} ] '
        '&& [ "$(date +%s)" -lt "$end" ]; do\n'
        f'  {li} team inbox "$LIRUN_TEAM" --unread >> {out}/"$LIRUN_MEMBER".seen\n'
        "  sleep 0.2\n"
        "done\n"
        f"LIRUN_FAKE_FIXTURE={shlex.quote(str(fixture_path('claude/success.jsonl')))} "
        f'exec {shlex.quote(sys.executable)} {shlex.quote(str(FAKE_PROVIDER))} "$@" '
        "< /dev/null\n"
    )
    script.chmod(0o755)
    return script

"""Evidence as a person reads it: each entry of a record's evidence as a sentence, with a
small table where it lists things (processes killed, what git saw), instead of a JSON
dump. Pure: one entry in, one ``Explained`` out; an entry of a kind not known here
still reads as its fields, and the page keeps the raw JSON behind a toggle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Explained", "explain", "explain_all"]


@dataclass(frozen=True, slots=True)
class Explained:
    """``title`` (a few words), ``sentence`` (what it says), ``head`` and ``rows`` (a
    small table, or none), ``kind`` (the entry's own kind, for styling and tests)."""

    kind: str
    title: str
    sentence: str
    head: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = field(default=())


def _yes(value: object) -> str:
    return {True: "yes", False: "no", None: "cannot tell"}.get(value, str(value))  # type: ignore[call-overload]


def _short(sha: object) -> str:
    return str(sha)[:12] if sha else "?"


def _plural(count: int, word: str) -> str:
    ending = "" if count == 1 else "es" if word.endswith("s") else "s"
    return f"{count} {word}{ending}"


def _work(ref: Mapping[str, Any]) -> Explained:
    """What git (or the directory walk) saw since the run started."""
    parts = []
    commits = ref.get("commits_since_start")
    if commits is not None:
        parts.append(f"{_plural(int(commits), 'commit')} since it started")
    if "tree_changed" in ref:
        changed = ref.get("tree_changed")
        parts.append(
            "working tree changed"
            if changed is True
            else "working tree unchanged"
            if changed is False
            else "working tree changes unknown"
        )
    if ref.get("files_changed") is not None:
        parts.append(f"{_plural(int(ref['files_changed']), 'file')} changed")
    if ref.get("commits_ahead") is not None:
        parts.append(f"{ref['commits_ahead']} ahead of {ref.get('base_ref') or 'its base'}")
    where = "the git repository" if ref.get("kind") == "git" else "its directory"
    sentence = f"In {where}: " + ("; ".join(parts) if parts else str(ref.get("label") or "")) + "."
    rows = [
        ("commits since start", _opt(commits)),
        ("commits", ", ".join(map(str, ref.get("commit_ids") or ()))),
        ("files changed", _opt(ref.get("files_changed"))),
        ("working tree changed", _yes(ref.get("tree_changed")) if "tree_changed" in ref else ""),
        ("commits ahead of base", _opt(ref.get("commits_ahead"))),
        ("uncommitted changes", _yes(ref.get("dirty")) if ref.get("dirty") is not None else ""),
        ("branch", _moved(ref.get("branch_at_start"), ref.get("branch"))),
        ("head", _moved(_sha(ref.get("head_at_start")), _sha(ref.get("head")))),
    ]
    kept = tuple((k, v) for k, v in rows if v)
    return Explained(str(ref.get("kind")), "work done", sentence, (), kept)


def _opt(value: object) -> str:
    return "" if value is None else str(value)


def _sha(value: object) -> str | None:
    return _short(value) if value else None


def _moved(before: object, after: object) -> str:
    if before is None and after is None:
        return ""
    if before == after:
        return str(after)
    return f"{before or '?'} → {after or '?'}"


def _killed(ref: Mapping[str, Any]) -> Explained:
    processes = [p for p in ref.get("processes") or () if isinstance(p, Mapping)]
    forced = set(ref.get("sigkill") or ())
    sentence = (
        f"{_plural(len(processes), 'process')} the run left behind "
        f"{'was' if len(processes) == 1 else 'were'} ended with {ref.get('signal') or 'a signal'}"
        + (f" ({len(forced)} needed SIGKILL)" if forced else "")
        + "."
    )
    rows = tuple(
        (
            str(p.get("pid")),
            str(p.get("command") or ""),
            "SIGKILL" if p.get("pid") in forced else "",
        )
        for p in processes
    )
    return Explained(
        "killed_descendants", "processes killed", sentence, ("pid", "command", ""), rows
    )


def _provider_error(ref: Mapping[str, Any]) -> Explained:
    retry = "a retry may fix it" if ref.get("retryable") else "a retry will not fix it"
    named = f" ({ref['class']})" if ref.get("class") else ""
    sentence = f"{ref.get('provider') or 'the provider'} reported an error{named}: " + (
        f"{ref.get('message') or ref.get('type') or '?'}; {retry}."
    )
    return Explained("provider_error", "provider error", sentence)


def _retries(ref: Mapping[str, Any]) -> Explained:
    status = f" (HTTP {ref['last_error_status']})" if ref.get("last_error_status") else ""
    last = f"; the last error: {ref['last_error']}{status}" if ref.get("last_error") else ""
    still = " It was still retrying when the run ended." if ref.get("retrying_at_end") else ""
    count = int(ref.get("count") or 0)
    who = ref.get("provider") or "The provider"
    sentence = f"{who} retried its API {_plural(count, 'time')}{last}.{still}"
    return Explained("provider_retries", "provider retries", sentence)


def _artifact(ref: Mapping[str, Any]) -> Explained:
    sentence = f"Artifact {ref.get('id')} ({ref.get('path')}): {ref.get('label') or 'missing'}."
    return Explained("artifact", "artifact check", sentence)


def _owner_died(ref: Mapping[str, Any]) -> Explained:
    killed = ref.get("killed") or []
    sentence = (
        f"Its owner, pid {ref.get('owner_pid')}, died; "
        f"{_plural(len(killed), 'process')} it ran {'was' if len(killed) == 1 else 'were'} killed."
    )
    return Explained("owner_died", "owner died", sentence)


_EXPLAIN: dict[str, Callable[[Mapping[str, Any]], Explained]] = {
    "git": _work,
    "cwd": _work,
    "killed_descendants": _killed,
    "provider_error": _provider_error,
    "provider_retries": _retries,
    "artifact": _artifact,
    "owner_died": _owner_died,
    "assistant_output": lambda ref: Explained(
        "assistant_output",
        "reply",
        "The agent replied; the reply did not count as evidence of work."
        if ref.get("counted") is False
        else "The agent's final reply counted as evidence of its work.",
    ),
    "exit_code": lambda ref: Explained(
        "exit_code", "exit code", f"The process exited with code {ref.get('exit_code')}."
    ),
    "signal": lambda ref: Explained(
        "signal", "signal", f"The run ended on {ref.get('signal') or 'a signal'}."
    ),
}


def explain(ref: object) -> Explained:
    """One evidence entry as a sentence (and a table where it lists things)."""
    if not isinstance(ref, Mapping):
        return Explained("note", "note", str(ref))
    kind = str(ref.get("kind") or "note")
    known = _EXPLAIN.get(kind)
    if known is not None:
        return known(ref)
    fields = "; ".join(f"{k}: {v}" for k, v in ref.items() if k != "kind" and v not in (None, ""))
    return Explained(kind, kind.replace("_", " "), (fields or kind) + ".")


def explain_all(refs: object) -> list[Explained]:
    return [explain(ref) for ref in refs] if isinstance(refs, list) else []

"""What an agent leg did, as row columns and summary words: tokens, the reply, retries.

Pure functions of the stream's verdict and the process result, used by ``agent_legs.judge_agent``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lirun.exec.supervisor import ProcessResult
    from lirun.exec.verdict import StreamVerdict

__all__ = ["MAX_REPLY_CHARS", "agent_record", "retry_note", "retrying_fact", "token_counts"]

# Replies longer than this are cut on the row (the tail is kept); the stream files hold all.
MAX_REPLY_CHARS = 64 * 1024


def present(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def token_counts(usage: dict[str, Any] | None) -> dict[str, int]:
    """Token columns from a provider's usage (Claude ``result.usage``; Codex's running
    total): only the counts the provider reported, never estimated."""
    if not usage:
        return {}
    sources = {
        "input_tokens": ("input_tokens",),
        "output_tokens": ("output_tokens",),
        "cache_read_tokens": ("cache_read_input_tokens", "cached_input_tokens"),
        "cache_write_tokens": ("cache_creation_input_tokens",),
    }
    counts: dict[str, int] = {}
    for column, keys in sources.items():
        for key in keys:
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                counts[column] = value
                break
    return counts


def agent_record(
    result: ProcessResult | None, verdict: StreamVerdict, *, stopped: bool = False
) -> dict[str, Any]:
    """What the stream and the process said, as row columns (RECORD_FIELDS).

    ``stopped``: li's timer or signal ended the child, so the stream's own verdict is not
    the failure; the provider's last error (if any) is still kept.
    """
    error = None if stopped else verdict.exception
    record = {
        "model": verdict.model,
        "provider_version": verdict.provider_version,
        "cost_usd": verdict.cost,
        "num_turns": verdict.num_turns,
        "reply_text": verdict.reply[-MAX_REPLY_CHARS:] if verdict.reply else None,
        "child_exit_code": result.exit_code if result is not None else None,
        "duration_s": round(result.duration, 3) if result is not None else None,
        "provider_error": str(error)[:2000] if error is not None else verdict.last_error,
        "provider_retries": verdict.retries or None,
        **token_counts(verdict.usage),
    }
    kept = present(record)
    if verdict.no_model_call:
        # No model answered: the column must not name the one asked for (--model, init).
        kept["model"] = None
    if verdict.exception is None and not stopped:
        # The provider ended well: a retry it got past is evidence (provider_retries),
        # not how the run ended; clear what the running row said.
        kept["provider_error"] = None
    return kept


def retry_note(result: ProcessResult | None, verdict: StreamVerdict) -> str | None:
    """ "after 60 s, claude was retrying the API (7 attempts; last error: HTTP 529: ...)":
    what the provider was doing when li stopped it, for the summary; None with no retry."""
    if not verdict.retries:
        return None
    took = f"after {result.duration:.0f} s, " if result is not None else ""
    tries = "1 attempt" if verdict.retries == 1 else f"{verdict.retries} attempts"
    last = verdict.last_error or "no error text"
    status = verdict.last_error_status
    if status is not None and f"HTTP {status}" not in last and str(status) not in last:
        last = f"HTTP {status}: {last}"
    doing = "was retrying the API" if verdict.retrying else "had retried the API earlier"
    return f"{took}{verdict.provider} {doing} ({tries}; last error: {last})"


def retrying_fact(verdict: StreamVerdict) -> dict[str, Any]:
    """Evidence of a run li stopped while its provider was retrying an API call."""
    return {
        "kind": "provider_retrying",
        "provider": verdict.provider,
        "attempts": verdict.retries,
        "last_error_status": verdict.last_error_status,
        "last_error": verdict.last_error,
        "class": verdict.retry_class,
    }

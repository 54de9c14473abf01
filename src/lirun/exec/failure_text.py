"""What a provider's failure signals mean: HTTP statuses, error codes and texts → a class.

The one place that knows the wording of the real CLIs (Claude Code 2.1.197 to 2.1.332,
Codex 0.171.0; docs/providers.md, "Failure shapes of the real CLIs"). Each function
answers with a name from :data:`lirun.provider_errors.FAILURE_CLASSES` or None when the
signal says nothing a person acts on; the parsers decide what to do with it, structure
first (an HTTP status, an error code or type), these words second: wording drifts from
release to release, structure much less. Texts are matched in table order, the more
specific first: "stream disconnected before completion: 503
Service Unavailable" is a server error, not a network one.
"""

from __future__ import annotations

import re

__all__ = [
    "class_for_code",
    "class_for_status",
    "class_for_text",
    "is_auth_status",
    "is_catch_all_code",
    "is_warning_text",
    "status_in_text",
]

_S = r"(?:status|http|code|error)\D{0,12}"

# (class, pattern), in the order they are tried.
TEXT_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        (
            "auth",
            r"unexpected status 40[13]\b|\b40[13] (?:unauthorized|forbidden)|invalid api key"
            r"|invalid x-api-key|incorrect api key|not logged in|please run /login"
            r"|authentication[_ ](?:failed|error)|missing bearer|" + _S + r"40[13]\b",
        ),
        (
            "rejected",
            r"prompt is too long|prompt_too_long|context[_ ]length|context window"
            r"|maximum context|invalid_request_error|unexpected status 4(?:00|13|22)\b"
            r"|\b400 bad request|model_not_found|not_found_error"
            r"|\bmodel\b.{0,80}\b(?:does|may) not exist",
        ),
        ("rate_limit", r"rate[ _-]?limit|too many requests|\b429\b"),
        ("overloaded", r"overload|\b529\b"),
        (
            "server_error",
            r"high demand|internal server error|service unavailable|bad gateway"
            r"|gateway timeout|server[_ ]error|" + _S + r"5\d\d\b"
            r"|\b5\d\d (?:internal|service|bad gateway|gateway)"
            # The API answered, but with something that does not parse (Claude Code
            # 2.1.332: "empty or malformed response (HTTP 200) … failed with: other,
            # SyntaxError"): the connection worked, the answer did not. Older versions say
            # only "empty or malformed response", as for a cut stream: network, below.
            r"|syntaxerror|could not parse"
            # A JSON parser's words (Node's, in the CLIs built on it): the answer was not
            # the JSON the API promised.
            r"|in json at position|unexpected token .{0,40}json|is not valid json"
            r"|unexpected end of json|incomplete json",
        ),
        (
            "network",
            r"stream disconnected|failed to lookup address|error sending request"
            r"|unable to connect|connection ?refused|connection (?:reset|failed|closed)"
            r"|waiting for network|network is unreachable|dns error|timed out connecting"
            r"|could not resolve host|econnrefused|econnreset|enotfound|etimedout|epipe"
            r"|connection (?:dropped|lost)|connection\b.{0,40}\blost\b|socket hang up"
            r"|stream[_ ]?truncated|stream closed before"
            # Claude Code on a 200 stream cut short; it blames the path (a proxy, a gateway).
            r"|empty or malformed response"
            # Node's fetch (undici) and the SDKs on it, in the CLIs built on Node: a call
            # that never got its answer, or lost it midway ("TypeError: terminated").
            r"|fetch failed|socket hang up|other side closed|und_err|err_stream_premature_close"
            r"|\bterminated\b|request timed out|^connection error\.?$",
        ),
    )
)

# Notices that are not failures: the CLI goes on (a transport fallback, a model it has no
# metadata for). Shown and kept, never the run's error.
_WARNING_TEXT = re.compile(
    r"^falling back from websockets|^model metadata for .* not found", re.IGNORECASE
)

# Claude's error codes (assistant ``error``, ``api_retry.error``) and the API's error types.
_CODE_CLASSES = {
    "authentication_failed": "auth",
    "authentication_error": "auth",
    "permission_error": "auth",
    # No usable account until a person fixes the billing: like a bad key, a retry will
    # not fix it, so it is an auth failure (docs/providers.md).
    "billing_error": "auth",
    "rate_limit": "rate_limit",
    "rate_limit_error": "rate_limit",
    "invalid_request": "rejected",
    "invalid_request_error": "rejected",
    "request_too_large": "rejected",
    "overloaded": "overloaded",
    "overloaded_error": "overloaded",
    "server_error": "server_error",
    "api_error": "server_error",
    # The model asked for is not there (Claude's assistant ``error``, OpenAI's ``code``,
    # Anthropic's 404 type): a retry asks for the same model.
    "model_not_found": "rejected",
    "not_found_error": "rejected",
    # Claude Code 2.1.332's result ``api_error``: the API was never reached or the
    # connection ended before an answer.
    "connection_failed": "network",
    "connection_error": "network",
}

# Codes a CLI puts on any failure it has no better word for (Claude Code's assistant
# ``error`` is ``server_error`` for a dropped connection too): they lose to anything more
# exact, lirun's own retry evidence included.
_CATCH_ALL_CODES = frozenset({"server_error", "unknown"})

_STATUS_IN_TEXT = re.compile(
    r"(?:unexpected status|last status:?|status:?|http|api error:?)\s*(\d{3})\b", re.IGNORECASE
)


def is_auth_status(status: int | None) -> bool:
    return status in (401, 403)


def class_for_status(status: int | None) -> str | None:
    """401/403 auth, 429 rate limit, 529 overloaded, other 5xx server error, other 4xx
    rejected; None for no status (or one that is not an error)."""
    if status is None or status < 400:
        return None
    if is_auth_status(status):
        return "auth"
    if status == 429:
        return "rate_limit"
    if status == 529:
        return "overloaded"
    if status >= 500:
        return "server_error"
    return "rejected"


def class_for_code(code: str | None) -> str | None:
    """Claude's ``error`` codes; ``unknown`` and anything new say nothing."""
    return _CODE_CLASSES.get(code or "")


def is_catch_all_code(code: str | None) -> bool:
    """A code that names no cause (``unknown``, Claude's ``server_error`` on any failure)."""
    return code in _CATCH_ALL_CODES


def class_for_text(text: str | None) -> str | None:
    """The class the provider's wording names, or None (unknown wording: unclassified)."""
    if not text:
        return None
    return next((name for name, pattern in TEXT_CLASSES if pattern.search(text)), None)


def is_warning_text(text: str | None) -> bool:
    """A notice the CLI prints as an error but carries on after (not a failure)."""
    if not text:
        return False
    return _WARNING_TEXT.search(text.strip()) is not None


def status_in_text(text: str | None) -> int | None:
    """The HTTP status a message names ("unexpected status 401", "last status: 429")."""
    match = _STATUS_IN_TEXT.search(text or "")
    return int(match.group(1)) if match else None

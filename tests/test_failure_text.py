"""The real CLIs' failure wording → failure class (docs/providers.md, "Failure shapes")."""

from __future__ import annotations

import pytest

from lirun.exec.failure_text import (
    class_for_code,
    class_for_status,
    class_for_text,
    is_warning_text,
    status_in_text,
)
from lirun.provider_errors import FAILURE_CLASSES

TEXTS = [
    # auth
    ("unexpected status 401 Unauthorized: invalid x-api-key, url: http://x/v1", "auth"),
    ("unexpected status 401 Unauthorized: Missing bearer or basic authentication", "auth"),
    ("Invalid API key · Fix external API key", "auth"),
    ("Not logged in · Please run /login", "auth"),
    ("unexpected status 403 Forbidden", "auth"),
    # rejected
    ("Prompt is too long", "rejected"),
    ('API Error: 400 {"error":{"type":"invalid_request_error","message":"x"}}', "rejected"),
    ("unexpected status 400 Bad Request: context_length_exceeded", "rejected"),
    ("Your input exceeds the context window of this model.", "rejected"),
    # an unknown model (Codex 0.171.0, Claude Code 2.1.197 and 2.1.332, the raw API)
    ("The model `gpt-5-codex` does not exist or you do not have access to it.", "rejected"),
    (
        "There's an issue with the selected model (claude-x). It may not exist or you may not "
        "have access to it. Run --model to pick a different model.",
        "rejected",
    ),
    ('{"code":"model_not_found"}', "rejected"),
    # rate limit
    ("exceeded retry limit, last status: 429 Too Many Requests", "rate_limit"),
    ("API Error: Rate limit reached", "rate_limit"),
    # overloaded
    ("API Error: 529 overloaded", "overloaded"),
    ("Overloaded", "overloaded"),
    # server error
    ("We're currently experiencing high demand, which may cause temporary errors.", "server_error"),
    ("exceeded retry limit, last status: 503 Service Unavailable", "server_error"),
    ("stream disconnected before completion: 503 Service Unavailable", "server_error"),
    ("unexpected status 500 Internal Server Error", "server_error"),
    # network
    (
        "Reconnecting... 2/5 (stream disconnected before completion: failed to lookup address "
        "information: Try again)",
        "network",
    ),
    ("Reconnecting... waiting for network (Connection failed: error sending request)", "network"),
    ("API Error: Unable to connect to API (ConnectionRefused)", "network"),
    # the newest wordings of a dropped connection (Claude Code 2.1.332 and others)
    ("API Error: Unable to connect to API (ECONNRESET)", "network"),
    (
        "API Error: Connection dropped (ECONNRESET). Check the gateway set in "
        "ANTHROPIC_BASE_URL, then try again.",
        "network",
    ),
    ("Reconnecting... (connection lost)", "network"),
    (
        "API Error: Connection to the API was lost (ECONNRESET). This is usually temporary — "
        "try again.",
        "network",
    ),
    (
        "stream disconnected before completion: Transport error: network error: error "
        "decoding response body",
        "network",
    ),
    ("the connection to the server was lost", "network"),
    ("stream disconnected before completion: stream closed before response.completed", "network"),
    (
        "API Error: API returned an empty or malformed response (HTTP 200) — check for a proxy",
        "network",
    ),
    ("which failed with: stream_truncated, StreamTruncatedError", "network"),
    # Node's fetch and JSON parser, in every CLI built on Node (Gemini CLI, pi)
    ("[API Error: exception TypeError: fetch failed sending request]", "network"),
    ("[API Error: terminated]", "network"),
    ("Connection error.", "network"),
    ("Request timed out.", "network"),
    ("[API Error: Incomplete JSON segment at the end]", "server_error"),
    ("Unexpected token 'h', \"{this is not json\" is not valid JSON", "server_error"),
    (
        "API Error: API returned an empty or malformed response (HTTP 200) — check for a proxy "
        "or gateway intercepting the request. … which failed with: other, SyntaxError",
        "server_error",
    ),
    # nothing a person acts on: unclassified
    ("something odd happened", None),
    ("", None),
    ("Reconnecting... 2/5", None),
]


@pytest.mark.parametrize(("text", "expected"), TEXTS)
def test_class_for_text(text: str, expected: str | None) -> None:
    assert class_for_text(text) == expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (401, "auth"),
        (403, "auth"),
        (400, "rejected"),
        (413, "rejected"),
        (429, "rate_limit"),
        (529, "overloaded"),
        (500, "server_error"),
        (503, "server_error"),
        (None, None),
        (200, None),
    ],
)
def test_class_for_status(status: int | None, expected: str | None) -> None:
    assert class_for_status(status) == expected


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("authentication_failed", "auth"),
        ("billing_error", "auth"),
        ("rate_limit", "rate_limit"),
        ("invalid_request", "rejected"),
        ("server_error", "server_error"),
        ("overloaded_error", "overloaded"),
        ("unknown", None),
        (None, None),
    ],
)
def test_class_for_code(code: str | None, expected: str | None) -> None:
    assert class_for_code(code) == expected


def test_every_class_named_exists() -> None:
    named = {c for _, c in TEXTS if c} | {class_for_status(s) for s in (401, 400, 429, 529, 500)}
    assert named <= set(FAILURE_CLASSES)


@pytest.mark.parametrize(
    ("text", "warning"),
    [
        ("Falling back from WebSockets to HTTPS transport. stream disconnected", True),
        ("Model metadata for `o4-mini` not found. Defaulting to fallback metadata", True),
        ("unexpected status 401 Unauthorized", False),
        ("Reconnecting... waiting for network", False),
        (None, False),
    ],
)
def test_warnings_are_told_from_errors(text: str | None, warning: bool) -> None:
    assert is_warning_text(text) is warning


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("unexpected status 401 Unauthorized: x", 401),
        ("exceeded retry limit, last status: 429 Too Many Requests", 429),
        ("API Error: 400 {...}", 400),
        ("Reconnecting... 2/5 (failed to lookup address information)", None),
    ],
)
def test_status_in_text(text: str, status: int | None) -> None:
    assert status_in_text(text) == status

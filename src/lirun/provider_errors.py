"""Provider failures and the rule that decides whether one is worth retrying.

Teardown's linked-engine reconciliation (ADR D4 step 5) applies only to an exception of
exactly type :class:`ProviderError`, so the base class is reserved for *unclassified*
failures (the stream ended with no terminal event). A provider that told us how it failed
yields one of the two subclasses.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from lirun.errors import LirunError, UsageError
from lirun.hints import Any

RETRYABLE_ERROR_CODES: frozenset[str] = frozenset(
    {"rate_limit", "rate_limit_error", "server_error", "overloaded", "overloaded_error"}
)

# Wording seen in provider error texts for rate limits, overload and HTTP 5xx/429.
_RETRYABLE_TEXT = re.compile(
    r"overload|rate[ _-]?limit|too many requests|internal server error|service unavailable"
    r"|bad gateway|gateway timeout|(?:status|http|code|error)\D{0,12}(?:429|5\d\d)\b"
    r"|\b(?:429|5\d\d) (?:too many|internal|bad gateway|service|gateway|overloaded)",
    re.IGNORECASE,
)


class ProviderError(LirunError, RuntimeError):
    """The agent CLI's run failed and the stream did not say why (no terminal event).

    Look at the execution's stream buffer and stderr; the run may be retried.
    Subclasses carry a classified cause; this exact type is left for the unclassified case.
    """

    exit_code = 1

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        retryable: bool = False,
        detail: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.retryable = retryable
        self.detail: dict[str, Any] = dict(detail or {})


class ProviderRetryableError(ProviderError):
    """The provider reported a transient failure (rate limit, overload, 5xx); retry later."""

    def __init__(
        self, message: str, *, provider: str, detail: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message, provider=provider, retryable=True, detail=detail)


class ProviderNonRetryableError(ProviderError):
    """The provider reported a failure a retry will not fix; change the prompt, limits or setup."""

    def __init__(
        self, message: str, *, provider: str, detail: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message, provider=provider, retryable=False, detail=detail)


class ProviderNotFoundError(UsageError):
    """The agent CLI executable is missing or not executable.

    Install it, or point lirun at it with the provider's environment variable or flag.
    """


def is_retryable_cause(
    *,
    api_error_status: int | None = None,
    error_codes: Iterable[str] = (),
    messages: Iterable[str] = (),
) -> bool:
    """True when the cause is a rate limit, an overload or a server-side (5xx/429) error."""
    if api_error_status is not None and (api_error_status == 429 or api_error_status >= 500):
        return True
    if any(code in RETRYABLE_ERROR_CODES for code in error_codes):
        return True
    return any(_RETRYABLE_TEXT.search(text) for text in messages if text)


def classified_error(
    message: str, *, provider: str, retryable: bool, detail: Mapping[str, Any] | None = None
) -> ProviderError:
    """The subclass matching ``retryable``; never the bare (unclassified) base."""
    cls = ProviderRetryableError if retryable else ProviderNonRetryableError
    return cls(message, provider=provider, detail=detail)

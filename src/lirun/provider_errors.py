"""Provider failures, their classes and the rule that decides whether one is worth retrying.

Teardown's linked-engine reconciliation (design.md D4 step 5) applies only to an exception of
exactly type :class:`ProviderError`, so the base class is reserved for *unclassified*
failures (the stream ended with no terminal event). A provider that told us how it failed
yields one of the two subclasses.

A failure is classified by what a person does next (:data:`FAILURE_CLASSES`): log in,
shorten the prompt, or wait and let it be retried. Each class has its own reason code
(``run.failed.provider_<class>``), so scripts and owners act on the record, not on text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from lirun.errors import LirunError, UsageError

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


@dataclass(frozen=True, slots=True)
class FailureClass:
    """One class of provider failure: its reason code, whether a retry may fix it, and
    what a person does about it (shown on the board, ``li status`` and the dashboard)."""

    name: str
    reason_code: str
    retryable: bool
    advice: str


FAILURE_CLASSES: dict[str, FailureClass] = {
    c.name: c
    for c in (
        FailureClass(
            "auth",
            "run.failed.provider_auth",
            False,
            "log in or fix the API key of the agent CLI (its own login command or its API "
            "key variable), then run it again",
        ),
        FailureClass(
            "rejected",
            "run.failed.provider_rejected",
            False,
            "change the request (shorten the prompt or its context, fix the model or "
            "options), then run it again",
        ),
        FailureClass(
            "rate_limit",
            "run.failed.provider_rate_limit",
            True,
            "wait for the rate limit to reset or run fewer agents at once; retries may fix it",
        ),
        FailureClass(
            "overloaded",
            "run.failed.provider_overloaded",
            True,
            "the provider is overloaded: try again later; retries may fix it",
        ),
        FailureClass(
            "server_error",
            "run.failed.provider_server_error",
            True,
            "the provider's API failed: try again later; retries may fix it",
        ),
        FailureClass(
            "network",
            "run.failed.provider_network",
            True,
            "check the network, proxy and API base URL of the machine that ran it",
        ),
        FailureClass(
            "stalled",
            "run.failed.provider_stalled",
            True,
            "the agent made no progress: look at its stream; raise --stall-timeout if it "
            "was working",
        ),
    )
}


def failure_class_for_reason(code: str | None) -> FailureClass | None:
    """The failure class whose reason code is ``code`` (None for any other code)."""
    return next((c for c in FAILURE_CLASSES.values() if c.reason_code == code), None)


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
        failure_class: str | None = None,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.retryable = retryable
        self.detail: dict[str, Any] = dict(detail or {})
        # One of FAILURE_CLASSES, when the provider said what went wrong.
        self.failure_class = failure_class


class ProviderRetryableError(ProviderError):
    """The provider reported a transient failure (rate limit, overload, 5xx); retry later."""

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        detail: Mapping[str, Any] | None = None,
        failure_class: str | None = None,
    ) -> None:
        super().__init__(
            message, provider=provider, retryable=True, detail=detail, failure_class=failure_class
        )


class ProviderNonRetryableError(ProviderError):
    """The provider reported a failure a retry will not fix; change the prompt, limits or setup."""

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        detail: Mapping[str, Any] | None = None,
        failure_class: str | None = None,
    ) -> None:
        super().__init__(
            message, provider=provider, retryable=False, detail=detail, failure_class=failure_class
        )


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
    message: str,
    *,
    provider: str,
    retryable: bool | None = None,
    failure_class: str | None = None,
    detail: Mapping[str, Any] | None = None,
) -> ProviderError:
    """The subclass matching ``retryable`` (or ``failure_class``'s); never the bare base.

    A known ``failure_class`` decides retryability; ``retryable`` alone is for a failure
    the provider reported without saying which class it is.
    """
    known = FAILURE_CLASSES.get(failure_class) if failure_class else None
    if failure_class is not None and known is None:
        raise ValueError(f"unknown provider failure class {failure_class!r}")
    if known is not None:
        retryable = known.retryable
    cls = ProviderRetryableError if retryable else ProviderNonRetryableError
    return cls(message, provider=provider, detail=detail, failure_class=failure_class)


def _exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then its causes, contexts and group members, breadth first, each once."""
    queue, seen = [exc], set()
    while queue:
        current = queue.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        queue.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        if isinstance(current, BaseExceptionGroup):
            queue.extend(current.exceptions)


def find_provider_error(exc: BaseException | None) -> ProviderError | None:
    """The outermost ProviderError (or subclass) anywhere in ``exc``'s cause/context chain."""
    if exc is None:
        return None
    return next((e for e in _exception_chain(exc) if isinstance(e, ProviderError)), None)

"""Signed webhooks (docs/schedules.md, "Webhook triggers"). Pure: no I/O.

A ``--webhook`` schedule's events are POSTed to ``li ui`` at ``/hooks/NAME``. The body is
the event, a JSON object of at most MAX_BODY_BYTES. It must be signed: the HMAC-SHA256 of
the raw body with the schedule's secret, as ``sha256=<hex>`` in ``X-Hub-Signature-256``
(GitHub's scheme) or ``X-Lirun-Signature``; ``signature_ok`` compares in constant time.
The event's key is the delivery id (``X-GitHub-Delivery``), else the value at the
schedule's ``--key``: a redelivery has the same key, so it fires nothing new. Its
subject is the value at ``--key`` (else the delivery id): two deliveries about one pull
request are two events with one subject, and ``--overlap skip`` runs one at a time.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

from lirun.schedules.events import DEFAULT_KEY, MAX_KEY_CHARS, Event, check_key_path, key_of

MAX_BODY_BYTES = 1024 * 1024
HOOK_PATH = "/hooks/"
SIGNATURE_HEADERS = ("x-hub-signature-256", "x-lirun-signature")
DELIVERY_HEADER = "x-github-delivery"
EVENT_HEADER = "x-github-event"
_PREFIX = "sha256="


class HookRefused(Exception):
    """A request the hook answers with ``status`` and ``message``, writing nothing."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def sign(secret: str, body: bytes) -> str:
    """The signature header's value for ``body``: ``sha256=<hex>``."""
    return _PREFIX + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def signature_ok(secret: str, body: bytes, headers: Mapping[str, str]) -> bool:
    """Whether ``headers`` (lower-case names) carry a valid signature of ``body``; a
    request with both headers must have both right."""
    given = [headers[name] for name in SIGNATURE_HEADERS if name in headers]
    if not given or not secret:
        return False
    expected = sign(secret, body).encode()
    return all(hmac.compare_digest(value.strip().lower().encode(), expected) for value in given)


def is_ping(headers: Mapping[str, str]) -> bool:
    """GitHub's ``ping``, sent when a webhook is created: answered, never an event."""
    return headers.get(EVENT_HEADER, "").strip().lower() == "ping"


def parse_event(body: bytes, headers: Mapping[str, str], key: str | None) -> Event:
    """The event a (signed) body carries; HookRefused 400 when it is not a JSON object
    or has no key (neither a delivery id nor a text or number at ``key``)."""
    try:
        data: Any = json.loads(body)
    except ValueError as exc:  # UnicodeDecodeError is a ValueError
        raise HookRefused(400, f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise HookRefused(400, f"the body is a JSON {type(data).__name__}, not an object")
    path = key or DEFAULT_KEY
    found = key_of(data, check_key_path(path))
    delivery = headers.get(DELIVERY_HEADER, "").strip()
    if delivery:
        if len(delivery) > MAX_KEY_CHARS:
            raise HookRefused(400, f"{DELIVERY_HEADER} is longer than {MAX_KEY_CHARS} characters")
        return Event(delivery, data, subject=found)
    if found is None:
        raise HookRefused(
            400,
            f"no delivery id: send {DELIVERY_HEADER}, or a text or number at {path!r} "
            "in the body (the schedule's --key)",
        )
    return Event(found, data)


def webhook_words(name: str, trigger: Mapping[str, Any]) -> str:
    """``POST /hooks/NAME, signed with the secret in $VAR, key: X-GitHub-Delivery, else
    id``: the trigger as ``li schedule show`` says it."""
    return (
        f"POST {HOOK_PATH}{name} on li ui, signed with the secret in "
        f"${trigger.get('secret_env')} (li ui's environment); event key: the "
        f"X-GitHub-Delivery header, else the body's {trigger.get('key') or DEFAULT_KEY!r}"
    )

"""Database URLs made safe to print: no backend module, no driver, imported by the CLI.

Every message that names a database URL names it through ``redact_url``, which does not
need the URL to parse: its user-info is read as running from ``//`` to the *last* ``@``
(libpq and ``urllib`` disagree on a malformed one, so the widest reading is masked), and
every ``password``/``sslpassword`` parameter is masked whatever its spelling.

Each function reads every form libpq accepts: a URL naming one host or several
(``postgresql://u@h1:5432,h2:5433/db``, ``?host=h1,h2&port=…``) and the keyword string
(``host=h1,h2 port=5432,5433 dbname=db``, read by ``store.conninfo``).
"""

from __future__ import annotations

from urllib.parse import quote, unquote, urlsplit

from lirun.errors import UsageError
from lirun.paths import is_keyword_conninfo

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType

_SECRET_PARAMS = ("password", "sslpassword")
_PG_SCHEMES = ("postgresql://", "postgres://")
_MASK = "***"
_HEX = frozenset("0123456789abcdefABCDEF")
# What the user name and password must percent-encode: each would move where libpq or
# urllib thinks the host starts, so part of the password would be read (and shown) as
# the host, the port or the database.
_NEEDS_ENCODING = {"@": "%40", "/": "%2F", "?": "%3F", "#": "%23"}


def _keywords() -> ModuleType:
    """``store.conninfo``, loaded for a keyword string only: a URL or a SQLite path (the
    `li status` fast path) never pays for it."""
    from lirun.store import conninfo

    return conninfo


def _split(url: str) -> tuple[str, str | None, str]:
    """(``scheme://``, user-info or None, the rest): user-info runs to the last ``@``.

    With no ``@``, a ``user:secret`` where ``host:port`` belongs (a port that is no
    number: the host was left out) is user-info too.
    """
    scheme, sep, rest = url.partition("://")
    at = rest.rfind("@")
    if at >= 0:
        return scheme + sep, rest[:at], rest[at:]
    end = min((i for i in map(rest.find, "/?#") if i >= 0), default=len(rest))
    if any(_port_is_not_a_number(host) for host in rest[:end].split(",")):
        return scheme + sep, rest[:end], rest[end:]
    return scheme + sep, None, rest


def _port_is_not_a_number(host: str) -> bool:
    """``host:port`` whose port is no number (an IPv6 ``[…]`` host is not judged here)."""
    port = host.rpartition(":")[2] if ":" in host else ""
    return bool(port) and not port.isdigit() and not host.startswith("[")


def _params(rest: str) -> tuple[str, list[str]]:
    """(what comes before the query, the query's ``&``-separated items)."""
    head, question, query = rest.partition("?")
    return head, query.split("&") if question else []


def _is_secret(item: str) -> bool:
    # libpq decodes a parameter's name too: ``pass%77ord=`` is a password.
    return unquote(item.partition("=")[0]).strip().lower() in _SECRET_PARAMS


def _is_parameter(item: str) -> bool:
    name, equals, value = item.partition("=")
    return bool(equals) and "=" not in value and name.replace("_", "a").isalnum()


def _mask_params(items: list[str]) -> tuple[list[str], list[str]]:
    """(the items with each password masked, the passwords): a password runs on over
    the ``&`` pieces after it that are no ``name=value`` (an unencoded ``&`` in it)."""
    shown: list[str] = []
    found: list[str] = []
    in_secret = False
    for item in items:
        if _is_secret(item):
            shown.append(f"{item.partition('=')[0]}={_MASK}")
            found.append(item.partition("=")[2])
            in_secret = True
        elif in_secret and not _is_parameter(item):
            found[-1] += "&" + item
        else:
            shown.append(item)
            in_secret = False
    return shown, found


def redact_url(url: str) -> str:
    """The URL with every password (user-info or ``?password=``) replaced by ``***``.

    A SQLite path or ``sqlite://`` URL, which holds no password, comes back as it is.
    """
    if is_keyword_conninfo(url):
        return _keywords().redact(url, _MASK)
    scheme, userinfo, rest = _split(url)
    if not scheme.endswith("://") or scheme.lower() == "sqlite://":
        return url
    if userinfo is not None:
        user, colon, _ = userinfo.partition(":")
        rest = f"{user}:{_MASK}{rest}" if colon else userinfo + rest
    head, items = _params(rest)
    if not items:
        return scheme + rest
    return f"{scheme}{head}?{'&'.join(_mask_params(items)[0])}"


def url_secrets(url: str) -> list[str]:
    """Every password the URL holds, as written and decoded, longest first."""
    found = []
    if is_keyword_conninfo(url):
        found = _keywords().secrets(url)
    else:
        _, userinfo, rest = _split(url)
        if userinfo is not None and ":" in userinfo:
            found.append(userinfo.partition(":")[2])
        found += _mask_params(_params(rest)[1])[1]
    both = {s for raw in found for s in (raw, unquote(raw)) if s}
    return sorted(both, key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """``text`` (a driver's message, which may echo the URL) with the URL's passwords masked."""
    for secret in url_secrets(url):
        text = text.replace(secret, _MASK)
    return text


def _malformation(url: str) -> str | None:
    """What makes libpq or ``urllib`` misread the URL (None: nothing)."""
    if is_keyword_conninfo(url):
        return _keywords().problem(url)
    if any(c.isspace() for c in url):
        return "has a space in it; write a space as %20"
    for at, char in enumerate(url):
        if char == "%" and not (len(url) > at + 2 and set(url[at + 1 : at + 3]) <= _HEX):
            return "has a '%' that is not followed by two hex digits; write a '%' as %25"
    _, userinfo, rest = _split(url)
    if any(item.count("=") != 1 for item in _params(rest)[1] if item):
        # libpq names the parameter it cannot read: a piece of a password after a '&'.
        return "has a parameter that is not one name=value; percent-encode & as %26 and = as %3D"
    bad = sorted({c for c in userinfo or "" if c in _NEEDS_ENCODING})
    if bad:
        codes = ", ".join(f"{c} as {_NEEDS_ENCODING[c]}" for c in bad)
        return (
            f"has {' '.join(repr(c) for c in bad)} in its user name or password (before "
            f"its last '@'), which hides where its host starts; percent-encode {codes}"
        )
    return None


def check_url(url: str) -> None:
    """Refuse a PostgreSQL URL libpq or ``urlsplit`` would misread, naming it masked."""
    problem = _malformation(url)
    keyword = is_keyword_conninfo(url)
    if problem is None and not keyword:
        problem = _host_problem(url)
    if problem is not None:
        kind, form = (
            ("keyword string", "host=host1,host2 port=5432,5432 dbname=dbname user=user")
            if keyword
            else ("URL", "postgresql://user:password@host1:port1,host2:port2/dbname")
        )
        raise UsageError(f"the database {kind} {redact_url(url)} {problem} ({form})") from None


def _host_problem(url: str) -> str | None:
    """What ``urllib`` finds wrong with one of the URL's hosts (a bad IPv6 host or port)."""
    _, _, rest = _split(url)
    hosts = rest.removeprefix("@")
    end = min((i for i in map(hosts.find, "/?#") if i >= 0), default=len(hosts))
    for host in hosts[:end].split(","):
        try:
            urlsplit(f"//{host}").port  # noqa: B018 (parses host and port)
        except ValueError as exc:
            return f"is not valid ({scrub(str(exc), url)})"
    return None


def url_without_credentials(url: str) -> str | None:
    """The database URL with no password (user-info or query); None if it cannot be parsed.

    A SQLite path holds none. A nested ``li`` connects with it when the server needs no
    password from the URL (trust or peer auth, ``PGPASSFILE``, ``PGPASSWORD``).
    """
    if is_keyword_conninfo(url):
        return None if _keywords().problem(url) else _keywords().without(url, *_SECRET_PARAMS)
    if not url.startswith(_PG_SCHEMES):
        import os  # absolute: the child may run in another directory (--cwd)

        return url if url.startswith("sqlite:") else os.path.abspath(url)
    if _malformation(url) is not None:
        return None
    scheme, userinfo, rest = _split(url)
    user = (userinfo or "").partition(":")[0]
    rest = user + rest if user else rest.removeprefix("@")
    head, items = _params(rest)
    kept = [i for i in _mask_params(items)[0] if not _is_secret(i)]
    return f"{scheme}{head}?{'&'.join(kept)}" if kept else scheme + head


def url_password(url: str) -> str | None:
    """The password a PostgreSQL URL gives (user-info, else ``?password=``), decoded as
    libpq decodes it; None when it gives none (or an empty one) or is not a PostgreSQL
    URL."""
    if is_keyword_conninfo(url):
        return _keywords().last_value(url, "password") or None
    if not url.startswith(_PG_SCHEMES):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    userinfo = parts.netloc.rsplit("@", 1)[0] if "@" in parts.netloc else ""
    if ":" in userinfo:
        return unquote(userinfo.split(":", 1)[1]) or None
    # libpq decodes %XX only (a + stays a +), so parse_qsl would change the password.
    pairs = [item.partition("=") for item in parts.query.split("&")]
    given = [unquote(value) for key, _, value in pairs if unquote(key) == "password"]
    return (given[-1] or None) if given else None


def with_passfile(url: str, path: str) -> str:
    """The PostgreSQL ``url`` (one without a password) that reads its password from the
    libpq password file ``path``: ``?passfile=`` in place of any the URL had."""
    if is_keyword_conninfo(url):
        return f"{_keywords().without(url, 'passfile')} passfile={_keywords().quote(path)}".lstrip()
    base, _, fragment = url.partition("#")
    base, _, query = base.partition("?")
    kept = [item for item in query.split("&") if item and unquote(item.split("=")[0]) != "passfile"]
    kept.append(f"passfile={quote(path, safe='/')}")
    return f"{base}?{'&'.join(kept)}" + (f"#{fragment}" if fragment else "")

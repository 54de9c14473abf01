"""``li ui``: serve the web dashboard (the optional extra ``ui``)."""

from __future__ import annotations

import contextlib
import signal
import socket
import sys
import threading
import webbrowser
from collections.abc import Iterator
from typing import TYPE_CHECKING

from lirun.cli.common import add_db_option, make_parser
from lirun.errors import LirunError
from lirun.paths import resolve_db_url
from lirun.settings import Settings
from lirun.store import open_store
from lirun.ui.security import LOCAL_HOSTS, is_local_host
from lirun.ui.streams import MAX_CONNECTIONS, MAX_STREAMS, MAX_STREAMS_PER_CLIENT

if TYPE_CHECKING:
    import argparse

EXIT_CODES = """  0  stopped (Ctrl-C or SIGTERM)
  2  usage error; the `ui` extra is not installed; another address than this machine's
     without a token; the address cannot be listened on; the database cannot be opened"""

DESCRIPTION = """Serve the live web dashboard of the record: runs, flows, shows, schedules,
a JSON API (/api/..., described at /api/openapi.json) and live updates (/events). Prints
its URL on stdout. It only reads the database.

Safe by default: it listens on 127.0.0.1. Any other --host needs a token (--token or
$LIRUN_UI_TOKEN), checked on every request; a browser presents it once as ?token=TOKEN
and keeps it in an HttpOnly cookie. It holds its ground: live-update streams and
connections are capped (answered 503 past the caps)."""

INSTALL_HINT = "li ui: the dashboard needs the `ui` extra: pip install 'lirun[ui]'\n"
TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/=")
MIN_TOKEN = 16


def _has_extra() -> bool:
    try:  # the `ui` extra, probed before anything needs it
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        return False
    return True


def _token_problem(token: str) -> str | None:
    if len(token) < MIN_TOKEN:
        return f"the token must have at least {MIN_TOKEN} characters"
    if not set(token) <= TOKEN_CHARS:
        return "the token may hold only letters, digits and - . _ ~ + / ="
    return None


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)  # from now on a browser's connection waits for the server
    sock.set_inheritable(True)
    return sock


def main(argv: list[str], settings: Settings) -> int:
    parser = make_parser("li ui", DESCRIPTION, EXIT_CODES)
    add_db_option(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=8765, help="port to listen on (8765; 0 picks a free one)"
    )
    parser.add_argument(
        "--token",
        default=None,
        help="the token every request must present (default $LIRUN_UI_TOKEN); "
        "required for any --host other than this machine's",
    )
    parser.add_argument("--open", action="store_true", help="open the dashboard in a browser")
    parser.add_argument(
        "--max-streams",
        type=int,
        default=MAX_STREAMS,
        metavar="N",
        help=f"live-update streams open at once, in all ({MAX_STREAMS}); past it: 503",
    )
    parser.add_argument(
        "--max-streams-per-client",
        type=int,
        default=MAX_STREAMS_PER_CLIENT,
        metavar="N",
        help=f"live-update streams open at once per client address ({MAX_STREAMS_PER_CLIENT})",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=MAX_CONNECTIONS,
        metavar="N",
        help=f"connections served at once ({MAX_CONNECTIONS}, less if the open-file limit "
        "is lower); past it: 503",
    )
    args = parser.parse_args(argv)
    if not _has_extra():
        sys.stderr.write(INSTALL_HINT)
        return 2

    settings = settings.with_flags(ui_token=args.token or None, db_url=args.db)
    token = settings.ui_token
    local = is_local_host(args.host)
    if not local and token is None:
        sys.stderr.write(
            f"li ui: --host {args.host} can be reached from other machines: give --token "
            "TOKEN or set LIRUN_UI_TOKEN (every request is then checked), or drop --host\n"
        )
        return 2
    if token is not None and (problem := _token_problem(token)) is not None:
        sys.stderr.write(f"li ui: {problem}\n")
        return 2
    if not 0 <= args.port <= 65535:
        sys.stderr.write(f"li ui: --port {args.port} is not a port (0-65535)\n")
        return 2
    for option in ("max_streams", "max_streams_per_client", "max_connections"):
        if not 1 <= getattr(args, option) <= 1_000_000:
            flag = "--" + option.replace("_", "-")
            sys.stderr.write(f"li ui: {flag} must be from 1 to 1000000\n")
            return 2
    return _serve(args, settings, None if not local else {*LOCAL_HOSTS, args.host})


def _serve(args: argparse.Namespace, settings: Settings, allowed_hosts: set[str] | None) -> int:
    from lirun.ui.app import create_app  # these need the `ui` extra (starlette, uvicorn)
    from lirun.ui.server import DashboardServer

    host, port = args.host, args.port
    try:
        sock = _listen(host, port)
    except OSError as exc:
        sys.stderr.write(
            f"li ui: cannot listen on {host}:{port}: {exc.strerror or exc}; "
            "choose another --port (0 picks a free one)\n"
        )
        return 2
    url = resolve_db_url(settings.db_url)
    if settings.db_url is None:
        # The default database, created (and migrated) as any li command would, so a
        # dashboard opened before the first run shows runs as they come. A database
        # named with --db or LIRUN_DB_URL must exist: a typo is not a new empty one.
        open_store(None).close()
    else:
        _migrate_if_writable(url)
    app = create_app(
        url,
        token=settings.ui_token,
        allowed_hosts=allowed_hosts,
        max_streams=args.max_streams,
        max_streams_per_client=args.max_streams_per_client,
    )
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}/"
    print(url, flush=True)
    sys.stderr.write(f"li ui: serving {url} (Ctrl-C stops)\n")
    if args.open:
        token = settings.ui_token
        target = f"{url}?token={token}" if token else url
        threading.Timer(0.5, webbrowser.open, (target,)).start()
    with _stop_quietly():
        DashboardServer(app, max_connections=args.max_connections).run(sockets=[sock])
    return 0


class _Stopped(Exception):
    """SIGINT or SIGTERM after uvicorn's graceful shutdown (it raises the signal again)."""


@contextlib.contextmanager
def _stop_quietly() -> Iterator[None]:
    """Ctrl-C and SIGTERM stop the server and ``li ui`` returns 0: uvicorn handles them
    while it runs and raises them again once it has shut down; this catches that."""

    def stopped(signum: int, frame: object) -> None:
        raise _Stopped

    previous = {s: signal.signal(s, stopped) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    except _Stopped:
        pass
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _migrate_if_writable(url: str) -> None:
    """Bring a named database to this lirun's schema (the dashboard reads it read-only),
    when it exists and can be written; a read-only one is shown as it is."""
    with contextlib.suppress(LirunError):
        open_store(url, create=False).close()

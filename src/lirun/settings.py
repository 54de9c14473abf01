"""lirun's settings: every ``LIRUN_*`` variable lirun reads, read here and nowhere else.

``Settings.from_env()`` reads the environment once (a bad value is one ``UsageError``
line, exit 2); ``with_flags`` lays the command line over it (a flag given wins). The
boundary reads it: ``cli.main`` once per command, handing it to the command's
``main(argv, settings)``, which lays its flags over it and passes it down (to
``execute()`` as ``RunRequest.settings``, and through ``FlowOptions`` /
``ShowOptions`` / ``RunnerConfig`` to ``build_request`` for every leg, play, gate and
scheduled run); a library entry point given none (``execute``, ``build_request``,
``run_flow``, ``run_show``, ``Runner``, ``allocate_run``) reads it once itself. Below
them, library code takes the value it is given.

Some are read where they are used, through the functions at the end of this module,
since no caller could hand them a value: the home and the default database
(``env_home``, ``env_db_url``: every path under the home, ``paths``, and
``open_store(None)``, the `li wait` / `li status` fast path among them), the platform
layer (``env_platform``: ``lirun.platform``, one process-wide choice), a write's retry
bound (``env_write_retry_seconds``: ``store.retry``, asked by every write transaction)
and the `li` that started this process (``li_path``). An owner's lease asks
``Settings.from_env().guard`` (``exec.guard.renew``: the owner's switch, not a run's).

``LIRUN_*`` variables lirun *sets* for the processes it starts are not settings: the
child reads them as its own environment, by design (``exec/environment.py``: the run's
``LIRUN_DB_URL``, ``LIRUN_PARENT_RUN_ID``, ``LIRUN_ARTIFACT_DIR``, ``LIRUN_LI``,
``LIRUN_FENCE``; ``schedules/runner.py``: ``LIRUN_EVENT``, ``LIRUN_EVENT_KEY``;
``teams/membership.py``: ``LIRUN_TEAM``, ``LIRUN_MEMBER``;
``exec/detach.py``: a detached worker's database; ``exec/supervisor.py``: ``LIRUN_TREE``;
``schedules/outcomes.py``: the ``--notify`` fields). A child that is a `li` reads them
here, as any `li` does. docs/configuration.md is the table of them all; a test
(tests/test_settings.py) fails when another module reads a ``LIRUN_*`` variable from
``os.environ``.

Light on purpose: the fast path imports this module, so it imports nothing the `li wait`
start-up path does not already load (no ``dataclasses``, no ``typing``): ``Settings`` is
a plain frozen class with slots.
"""

from __future__ import annotations

import os
import sys
from functools import cache

from lirun.errors import UsageError
from lirun.hints import Any, NamedTuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

HOME_ENV = "LIRUN_HOME"
DB_URL_ENV = "LIRUN_DB_URL"
PLATFORM_ENV = "LIRUN_PLATFORM"
HEARTBEAT_ENV = "LIRUN_HEARTBEAT_INTERVAL"
WRITE_RETRY_ENV = "LIRUN_WRITE_RETRY_SECONDS"
# Bounds on every PostgreSQL connection (docs/configuration.md, "PostgreSQL connections").
DB_CONNECT_TIMEOUT_ENV = "LIRUN_DB_CONNECT_TIMEOUT"
DB_STATEMENT_TIMEOUT_ENV = "LIRUN_DB_STATEMENT_TIMEOUT"
CGROUP_ENV = "LIRUN_CGROUP"
GUARD_ENV = "LIRUN_GUARD"
# The fence of the lease a worker's run holds (``<run id>:<epoch>:<worker id>``): set by
# the worker for the work it starts, read by `li lease check` (docs/queue.md).
FENCE_ENV = "LIRUN_FENCE"
# The event an event schedule's run is for (docs/schedules.md): set by the worker for
# the work it starts, read by that work; lirun reads neither.
EVENT_ENV = "LIRUN_EVENT"
EVENT_KEY_ENV = "LIRUN_EVENT_KEY"
RUN_ID_ENV_VARS = ("LIRUN_RUN_ID", "LIONAGI_RUN_ID")
# The absolute path of the `li` that started a child (set for every child, read by a
# nested lirun started as `python -m lirun`: ``li_path``).
LI_ENV = "LIRUN_LI"
# The names lirun's console scripts have (pyproject.toml).
LI_NAMES = ("li", "lirun")
# ``LIRUN_<NAME>_BIN``: where a provider's executable is (``provider_bin_env``).
_BIN_PREFIX, _BIN_SUFFIX = "LIRUN_", "_BIN"

DEFAULT_WRITE_RETRY_SECONDS = 30.0
DEFAULT_DB_CONNECT_TIMEOUT = 10.0
DEFAULT_DB_STATEMENT_TIMEOUT = 60.0
_OFF = frozenset({"off", "0", "no", "false"})
_ON = frozenset({"", "on", "1", "yes", "true"})


class Settings(NamedTuple):
    """One process's settings, a frozen value (a named tuple: compared, hashed, copied
    and pickled by its fields). ``None``: not set (the reader's own default applies)."""

    db_url: str | None = None  # --db > LIRUN_DB_URL (else <home>/state.db)
    heartbeat_interval: float | None = None  # LIRUN_HEARTBEAT_INTERVAL (else 15 s)
    write_retry_seconds: float = DEFAULT_WRITE_RETRY_SECONDS  # LIRUN_WRITE_RETRY_SECONDS
    cgroup: bool = True  # LIRUN_CGROUP=off: no cgroup per run
    guard: bool = True  # LIRUN_GUARD=off: no guard process
    run_id: str | None = None  # --run-id > LIRUN_RUN_ID > LIONAGI_RUN_ID
    # Every LIRUN_<NAME>_BIN set (variable, value): --bin > it > PATH (``provider_bin``).
    provider_bins: tuple[tuple[str, str], ...] = ()
    ui_token: str | None = None  # --token > LIRUN_UI_TOKEN
    member: str | None = None  # --from / --as > LIRUN_MEMBER (set by a team's owner)
    parent_run_id: str | None = None  # LIRUN_PARENT_RUN_ID (set by a supervising li)
    fence: str | None = None  # --fence > LIRUN_FENCE (set by a worker for its run's work)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings ``environ`` (default ``os.environ``) gives; a bad value raises
        ``UsageError`` naming the variable."""
        env = os.environ if environ is None else environ

        def text(name: str) -> str | None:
            return env.get(name, "").strip() or None

        # Read where a connection is opened (``env_db_*``); refused here, up front.
        _db_seconds(DB_CONNECT_TIMEOUT_ENV, text(DB_CONNECT_TIMEOUT_ENV), 0.0)
        _db_seconds(DB_STATEMENT_TIMEOUT_ENV, text(DB_STATEMENT_TIMEOUT_ENV), 0.0)

        return cls(
            db_url=text(DB_URL_ENV),
            heartbeat_interval=_seconds(HEARTBEAT_ENV, text(HEARTBEAT_ENV)),
            write_retry_seconds=_retry_seconds(text(WRITE_RETRY_ENV)),
            cgroup=_switch(CGROUP_ENV, env.get(CGROUP_ENV, "")),
            guard=_switch(GUARD_ENV, env.get(GUARD_ENV, "")),
            run_id=next(filter(None, map(text, RUN_ID_ENV_VARS)), None),
            provider_bins=tuple(
                sorted(
                    (name, value)
                    for name in env
                    if name.startswith(_BIN_PREFIX) and name.endswith(_BIN_SUFFIX)
                    if (value := text(name)) is not None
                )
            ),
            ui_token=text("LIRUN_UI_TOKEN"),
            member=text("LIRUN_MEMBER"),
            parent_run_id=text("LIRUN_PARENT_RUN_ID"),
            fence=text(FENCE_ENV),
        )

    def with_flags(self, **flags: Any) -> Settings:
        """Internal (for the CLI flags): these settings with the flags given (not ``None``)
        laid over them."""
        unknown = sorted(set(flags) - set(self._fields))
        if unknown:
            raise TypeError(f"not a setting: {', '.join(unknown)}")
        given = {name: value for name, value in flags.items() if value is not None}
        return self._replace(**given) if given else self

    def provider_bin(self, provider: str) -> str | None:
        """Internal: ``$LIRUN_<PROVIDER>_BIN`` for ``provider``, if set (any provider: the
        variable is derived from the name, so a new provider needs nothing here)."""
        return dict(self.provider_bins).get(provider_bin_env(provider))


def provider_bin_env(provider: str) -> str:
    """The variable naming ``provider``'s executable: ``LIRUN_<NAME>_BIN``, where ``my-cli``
    is ``MY_CLI``."""
    word = "".join(c if c.isascii() and c.isalnum() else "_" for c in provider.upper())
    return f"{_BIN_PREFIX}{word}{_BIN_SUFFIX}"


def _seconds(name: str, raw: str | None) -> float | None:
    if raw is None:
        return None
    from lirun.durations import parse_seconds  # not on the fast path, which parses none

    return parse_seconds(raw, name)  # 15, 2.5 or a DURATION such as 30s or 1m


def _retry_seconds(raw: str | None) -> float:
    """0 turns retrying off; a negative bound is 0, as before."""
    if raw is None:
        return DEFAULT_WRITE_RETRY_SECONDS
    text = raw.strip()
    if text.startswith("-") and text[1:].replace(".", "", 1).isdigit():
        return 0.0
    from lirun.durations import parse_seconds

    return parse_seconds(text, WRITE_RETRY_ENV, zero=True)


def _switch(name: str, raw: str) -> bool:
    word = raw.strip().lower()
    if word in _OFF:
        return False
    if word in _ON:
        return True
    raise UsageError(f"{name}: expected on or off (1/0, yes/no, true/false), got {raw!r}")


@cache
def li_path() -> str | None:
    """The absolute path of the `li` this process runs as, for the children it starts
    (``LIRUN_LI``, the team preamble), or None when there is none to give; decided once."""
    return choose_li_path(
        sys.argv[0] if sys.argv else "",
        sys.executable,
        os.environ.get(LI_ENV, ""),  # the inherited one, read once (cached)
        is_program=lambda p: os.path.isfile(p) and os.access(p, os.X_OK),
    )


def choose_li_path(
    argv0: str, executable: str, inherited: str, *, is_program: Callable[[str], bool]
) -> str | None:
    """Which `li` a child should run: this process's own script when it was started as
    one (``.venv/bin/li``, ``li`` found on PATH: ``argv0``, its real path); else the
    ``LIRUN_LI`` it inherited (a `python -m lirun` that a lirun started, such as a
    detached worker); else the ``li`` beside the interpreter (a venv's or an
    installation's `bin/`); else None (`python -m lirun` from a source tree)."""
    candidates = []
    if os.path.basename(argv0) in LI_NAMES:  # a link to it (the one a child finds on
        candidates.append(os.path.realpath(argv0))  # PATH) is its target
    if inherited.strip() and os.path.isabs(inherited.strip()):
        candidates.append(inherited.strip())
    if executable:
        here = os.path.dirname(os.path.abspath(executable))
        candidates += [os.path.join(here, name) for name in LI_NAMES]
    return next((path for path in candidates if is_program(path)), None)


# --- read where they are used (see the module's docstring) ------------------------------


def env_home() -> str | None:
    """``$LIRUN_HOME`` as given, None when unset or empty (``paths``: ``~/.lirun``)."""
    return os.environ.get(HOME_ENV) or None


def env_db_url() -> str | None:
    """``$LIRUN_DB_URL`` as given, None when unset or empty (``paths.resolve_db_url``)."""
    return os.environ.get(DB_URL_ENV) or None


def env_platform() -> str:
    """``$LIRUN_PLATFORM``, stripped and lower case ("" when unset: ``lirun.platform``)."""
    return os.environ.get(PLATFORM_ENV, "").strip().lower()


def env_write_retry_seconds() -> float:
    """``$LIRUN_WRITE_RETRY_SECONDS`` alone (``store.retry``: every write transaction asks),
    else the default, which a bad value keeps too (a teardown does not fail on a setting;
    ``li`` refuses it up front through ``from_env``)."""
    try:
        return _retry_seconds(os.environ.get(WRITE_RETRY_ENV, "").strip() or None)
    except UsageError:
        return DEFAULT_WRITE_RETRY_SECONDS


def _db_seconds(name: str, raw: str | None, default: float) -> float:
    """A PostgreSQL bound in seconds; 0 turns it off."""
    if raw is None:
        return default
    from lirun.durations import parse_seconds

    return parse_seconds(raw, name, zero=True)


def env_db_connect_timeout() -> float:
    """``$LIRUN_DB_CONNECT_TIMEOUT`` (``store.pg_connect``, at every connect): seconds one
    connection attempt may take, else 10; 0 leaves it to libpq (no limit). A bad value
    keeps the default here (``li`` refuses it up front)."""
    raw = os.environ.get(DB_CONNECT_TIMEOUT_ENV, "").strip() or None
    try:
        return _db_seconds(DB_CONNECT_TIMEOUT_ENV, raw, DEFAULT_DB_CONNECT_TIMEOUT)
    except UsageError:
        return DEFAULT_DB_CONNECT_TIMEOUT


def env_db_statement_timeout() -> float:
    """``$LIRUN_DB_STATEMENT_TIMEOUT`` (``store.pg_connect``, at every connect): the
    server's ``statement_timeout`` of lirun's sessions, else 60; 0 turns it (and the
    client-side limit derived from it) off. A bad value keeps the default here."""
    raw = os.environ.get(DB_STATEMENT_TIMEOUT_ENV, "").strip() or None
    try:
        return _db_seconds(DB_STATEMENT_TIMEOUT_ENV, raw, DEFAULT_DB_STATEMENT_TIMEOUT)
    except UsageError:
        return DEFAULT_DB_STATEMENT_TIMEOUT

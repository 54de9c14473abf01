"""Item 9 of the fault suite: `li` with generated arguments and environment never prints a
traceback and exits only with documented codes.

`li` runs in-process (``lirun.cli.main.main(argv)``; `li run` and `li agent` in a
subprocess) with its environment, working directory and ``HOME`` pointed into a fresh
temporary directory per example, so nothing outside it is touched. What `li run` /
`li agent` would start is fixed: ``true`` or the fake provider. No PostgreSQL URL here
reaches a server: they are malformed, or point at port 1 of 127.0.0.1, which refuses.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lirun.cli.main import main
from lirun.lifecycle import EXIT_CODE_BY_STATUS
from support.providerkit import make_fake_bin_dir

pytestmark = [pytest.mark.faults]

RUN_CODES = frozenset(EXIT_CODE_BY_STATUS.values()) | {2}
# Documented exit codes per command (each command's --help); anything else is a bug.
ALLOWED: dict[str, frozenset[int]] = {
    "run": RUN_CODES,
    "agent": RUN_CODES,
    "invoke": RUN_CODES,
    "wait": frozenset({0, 1, 2, 3}),
    "status": frozenset({0, 2}),
    "reap": frozenset({0, 2}),
    "db": frozenset({0, 2}),
    "override": frozenset({0, 1, 2}),
    "team": frozenset({0, 2}),
}
TOP_LEVEL = frozenset({0, 2})
# Commands that start a child run in a process of their own: supervision changes process
# state (signal handlers, a child subreaper) that must not leak into the test process.
IN_SUBPROCESS = frozenset({"run", "agent"})
TMP = "@TMP@"  # replaced by the example's temporary directory
EXAMPLES = int(os.environ.get("LIRUN_FUZZ_EXAMPLES") or 150)

_bins: Path | None = None


def fake_bins() -> Path:
    global _bins
    if _bins is None:
        _bins = make_fake_bin_dir(Path(tempfile.mkdtemp(prefix="lirun-fuzz-bin-")))
    return _bins


# --- strategies ----------------------------------------------------------------------------

SAFE_TEXT = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x00", exclude_categories=["Cs"]),
    max_size=30,
)
PATHISH = st.text(alphabet="abc./:?=%@[]~-_ ", max_size=40)

DB_VALUES = st.one_of(
    st.sampled_from(
        [
            f"{TMP}/db/state.db",
            f"sqlite://{TMP}/s3.db",  # sqlite:///abs/path
            f"sqlite://{TMP}/nested/dir/s3.db",
            f"sqlite:///{TMP}/s4.db",  # the four-slash absolute form
            f"sqlite:///{TMP}/s4.db?mode=ro",
            f"sqlite:{TMP}/s5.db",
            "sqlite:",
            "sqlite://",
            "sqlite:///",
            "mysql://x",
            "mysql://u:p@127.0.0.1:1/db",
            "postgresql://u:p@[::1:5432/db",
            "postgresql://u:p@[::1]:1/db",
            "postgresql://u@127.0.0.1:1/db?password=hunter2",
            "postgresql://u:hunter2@127.0.0.1:1/db?schema=Bad-Schema",
            "postgresql://u@127.0.0.1:1/db?schema=ok&connect_timeout=1",
            "postgresql://",
            "postgres://:@:/",
            "",
            " ",
            f"{TMP}/" + "a" * 300,
            f"{TMP}/" + "a" * 300 + "/state.db",
            f"{TMP}/regular-file",
            f"{TMP}/regular-file/state.db",
            f"{TMP}/a-directory",
            f"{TMP}/empty.db",
            f"{TMP}/garbage.db",
        ]
    ),
    PATHISH.map(lambda s: f"{TMP}/{s}"),
)

HOME_VALUES = st.one_of(
    st.sampled_from(
        [
            f"{TMP}/home",
            f"{TMP}/regular-file",
            f"{TMP}/regular-file/home",
            f"{TMP}/" + "h" * 300,
            f"{TMP}/a-directory",
            "relative/home",
            "",
        ]
    ),
    PATHISH.map(lambda s: f"{TMP}/{s}"),
)

IDS = st.one_of(
    st.sampled_from(["ok-1", "", "..", "../x", "a/b", "a" * 300, "-x", "x,y", " "]),
    SAFE_TEXT,
)
NUMBERS = st.sampled_from(["1", "0", "-1", "0.5", "abc", "1e9", "nan", "inf", ""])


def _given(flag: str, value: str) -> list[str]:
    return [flag, value]


def options(pairs: list[tuple[str, st.SearchStrategy[str] | None]]) -> st.SearchStrategy:
    """Any subset of the options, each flag alone or with a generated value."""
    parts = [
        st.just([flag]) if values is None else values.map(partial(_given, flag))
        for flag, values in pairs
    ]
    return st.lists(st.one_of(*parts), max_size=4).map(lambda xs: [a for x in xs for a in x])


RUN_OPTIONS = options(
    [
        ("--run-id", IDS),
        ("--timeout", NUMBERS),
        ("--idle-timeout", NUMBERS),
        ("--artifact", st.sampled_from(["r=a", "r=a?", "=x", "r=", "r=/abs", "r=../x", "rr"])),
        ("--cwd", st.sampled_from([TMP, f"{TMP}/nope", f"{TMP}/regular-file", ""])),
        ("--db", DB_VALUES),
        ("--json", None),
        ("--grace", NUMBERS),
        ("--bogus", None),
    ]
)


@st.composite
def command_argv(draw: st.DrawFn) -> list[str]:
    kind = draw(
        st.sampled_from(
            ["run", "agent", "wait", "status", "reap", "db", "override", "invoke", "team", "junk"]
        )
    )
    if kind == "run":
        tail = draw(st.sampled_from([["--", "true"], ["true"], ["--"], []]))
        return ["run", *draw(RUN_OPTIONS), *tail]
    if kind == "agent":
        provider = draw(st.sampled_from(["claude", "codex", "claude/some-model", "nope", ""]))
        prompt = draw(SAFE_TEXT)
        return ["agent", *draw(RUN_OPTIONS), provider, prompt]
    if kind == "wait":
        ids = draw(st.lists(IDS, max_size=3))
        extra = draw(options([("--interval", NUMBERS), ("--json", None), ("--db", DB_VALUES)]))
        # Always bounded: a generated id may match a row this very example left running.
        return ["wait", *ids, *extra, "--timeout", "1"]
    if kind == "status":
        ids = draw(st.lists(IDS, max_size=1))
        extra = draw(
            options(
                [
                    ("--json", None),
                    ("--running", None),
                    ("--status", st.sampled_from(["running", "completed", "nope", ""])),
                    ("--since", st.sampled_from(["2h", "0s", "-1h", "abc", ""])),
                    ("--limit", NUMBERS),
                    ("--db", DB_VALUES),
                ]
            )
        )
        return ["status", *ids, *extra]
    if kind == "reap":
        return ["reap", *draw(options([("--dry-run", None), ("--json", None)]))]
    if kind == "db":
        return ["db", *draw(st.lists(st.sampled_from(["path", "migrate", "nope", "--json"])))]
    if kind == "override":
        entity = draw(st.sampled_from(["session", "sessions", "nope", ""]))
        extra = draw(
            options(
                [
                    ("--to", st.sampled_from(["completed", "running", "nope"])),
                    ("--reason", st.sampled_from(["run.completed.admin", "nope"])),
                    ("--actor", SAFE_TEXT),
                    ("--justification", SAFE_TEXT),
                ]
            )
        )
        return ["override", entity, draw(IDS), *extra]
    if kind == "team":  # never --follow: it would wait for messages
        sub = draw(st.sampled_from(
            ["create", "join", "list", "show", "send", "inbox", "log", "archive", "nope"]
        ))  # fmt: skip
        extra = draw(
            options(
                [
                    ("--member", SAFE_TEXT),
                    ("--from", SAFE_TEXT),
                    ("--to", SAFE_TEXT),
                    ("--as", SAFE_TEXT),
                    ("--since", IDS),
                    ("--unread", None),
                    ("--json", None),
                    ("--status", st.sampled_from(["active", "archived", "nope"])),
                    ("--actor", SAFE_TEXT),
                    ("--justification", SAFE_TEXT),
                ]
            )
        )
        return ["team", sub, *draw(st.lists(SAFE_TEXT, max_size=3)), *extra]
    if kind == "invoke":
        sub = draw(st.sampled_from(["start", "end", "nope"]))
        return ["invoke", sub, *draw(st.lists(SAFE_TEXT, max_size=3))]
    return draw(st.lists(SAFE_TEXT, max_size=3))


@st.composite
def invocation(draw: st.DrawFn) -> tuple[list[str], dict[str, str | None]]:
    argv = draw(command_argv())
    prefix = draw(st.sampled_from(["none", "none", "db", "db=", "db-alone", "help", "version"]))
    if prefix == "db":
        argv = ["--db", draw(DB_VALUES), *argv]
    elif prefix == "db=":
        argv = [f"--db={draw(DB_VALUES)}", *argv]
    elif prefix == "db-alone":
        argv = ["--db"]
    elif prefix == "help":
        argv = [*argv[:1], "--help"]
    elif prefix == "version":
        argv = ["--version"]
    env: dict[str, str | None] = {
        "LIRUN_HOME": draw(HOME_VALUES),
        "LIRUN_DB_URL": draw(st.one_of(st.none(), DB_VALUES)),
        "LIRUN_RUN_ID": draw(st.one_of(st.none(), IDS)),
        "LIRUN_HEARTBEAT_INTERVAL": draw(st.one_of(st.none(), NUMBERS)),
        "LIRUN_WRITE_RETRY_SECONDS": draw(st.one_of(st.none(), NUMBERS)),
    }
    return argv, env


# --- the property --------------------------------------------------------------------------


@contextlib.contextmanager
def sandbox(env: dict[str, str | None]) -> Iterator[Path]:
    """A temporary directory as cwd and HOME, with the generated environment applied."""
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    tmp = Path(tempfile.mkdtemp(prefix="lirun-fuzz-"))
    (tmp / "regular-file").write_text("not a directory\n")
    (tmp / "a-directory").mkdir()
    (tmp / "empty.db").touch()
    (tmp / "garbage.db").write_bytes(b"this is not a SQLite database" * 100)
    bins = fake_bins()
    try:
        os.chdir(tmp)
        os.environ["HOME"] = str(tmp / "user")
        os.environ["LIRUN_CLAUDE_BIN"] = str(bins / "claude")
        os.environ["LIRUN_CODEX_BIN"] = str(bins / "codex")
        os.environ["LIRUN_FAKE_FIXTURE"] = "claude/success.jsonl"
        for var, value in env.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value.replace(TMP, str(tmp))
        yield tmp
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        shutil.rmtree(tmp, ignore_errors=True)


_UNKNOWN_SCHEME = re.compile(r"^(?!(sqlite|postgresql|postgres)://)[A-Za-z][A-Za-z0-9+.-]*://")


def effective_db(argv: list[str]) -> str | None:
    """The database a command would use: its --db, else li's --db, else $LIRUN_DB_URL."""
    chosen = os.environ.get("LIRUN_DB_URL")
    for index, arg in enumerate(argv):
        if arg == "--db" and index + 1 < len(argv):
            chosen = argv[index + 1]
        elif arg.startswith("--db="):
            chosen = arg.split("=", 1)[1]
    return chosen


def command_of(argv: list[str]) -> str | None:
    rest = list(argv)
    if rest[:1] == ["--db"] and len(rest) >= 2:
        rest = rest[2:]
    elif rest[:1] and rest[0].startswith("--db="):
        rest = rest[1:]
    return rest[0] if rest else None


def allowed_codes(argv: list[str]) -> frozenset[int]:
    command = command_of(argv)
    return ALLOWED.get(command, TOP_LEVEL) if command else TOP_LEVEL


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=False,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=invocation())
# The reproductions of issue 8 item 9, always tried.
@example(case=(["--db", "postgresql://u:p@[::1:5432/db", "status"], {"LIRUN_HOME": f"{TMP}/h"}))
@example(case=(["status", "--db", f"{TMP}/" + "a" * 300], {"LIRUN_HOME": f"{TMP}/h"}))
@example(case=(["run", "--", "true"], {"LIRUN_DB_URL": f"{TMP}/" + "a" * 300}))
@example(case=(["wait", "x", "--timeout", "1"], {"LIRUN_HOME": f"{TMP}/regular-file"}))
@example(case=(["run", "--", "true"], {"LIRUN_HOME": f"{TMP}/regular-file/home"}))
@example(case=(["--db", "mysql://x", "status"], {"LIRUN_HOME": f"{TMP}/h"}))
@example(case=(["--db", "mysql://x", "run", "--", "true"], {"LIRUN_HOME": f"{TMP}/h"}))
@example(case=(["--db"], {"LIRUN_HOME": f"{TMP}/h"}))
def test_li_never_tracebacks(
    case: tuple[list[str], dict[str, str | None]], capfd: pytest.CaptureFixture[str]
) -> None:
    argv, env = case
    with sandbox(env) as tmp:
        argv = [a.replace(TMP, str(tmp)) for a in argv]
        if command_of(argv) in IN_SUBPROCESS:
            done = subprocess.run(
                [sys.executable, "-m", "lirun", *argv],
                env=dict(os.environ),
                cwd=tmp,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=60,
            )
            code, out, err = done.returncode, done.stdout, done.stderr
        else:
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
                code = exc.code if isinstance(exc.code, int) else 2
            out, err = capfd.readouterr()
    shown = f"li {argv!r} with {env!r}"
    assert "Traceback (most recent call last)" not in err + out, f"{shown}:\n{err}"
    assert code in allowed_codes(argv), f"{shown} exited {code}:\n{err}"
    with sandbox(env):
        db = effective_db(argv)
    if db and _UNKNOWN_SCHEME.match(db) and not {"-h", "--help", "--version"} & set(argv):
        assert code == 2, f"{shown}: an unknown scheme must be refused, got exit {code}:\n{err}"

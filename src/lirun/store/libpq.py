"""libpq, PostgreSQL's C client library, through ``ctypes``: finding it, and one connection.

Where the library comes from, first found wins: ``libpq.so.5`` through the dynamic loader
(the system's, e.g. Debian's ``libpq5``), then the copy bundled in the ``psycopg-binary``
wheel (``psycopg_binary.libs/libpq*.so*``, located with ``importlib.util.find_spec``
without importing psycopg). ``ctypes.util.find_library`` is not used: it runs
subprocesses.

``PgConn`` talks to the server without blocking in C: it connects with
``PQconnectStartParams``/``PQconnectPoll`` and sends each statement with
``PQsendQueryParams`` (``PQexecParams`` split in two), waiting in ``select`` between the
steps, so a signal handler runs while a statement waits for a lock, and a
``KeyboardInterrupt`` cancels the statement on the server before the connection is closed.
Values are bound as text parameters, never written into the SQL; results are converted by
column type to what psycopg returns. Errors are ``PqError`` (SQLSTATE, first line, and
whether the connection was lost); the connector translates them.
"""

from __future__ import annotations

import ctypes
import os
import select
import time
from collections.abc import Callable, Iterator, Sequence

from lirun.hints import Any

_c = ctypes
_NAMES = ("libpq.so.5", "libpq.5.dylib")
_BUNDLED_DIRS = ("psycopg_binary.libs", os.path.join("psycopg_binary", ".dylibs"))

CONNECTION_OK, CONNECTION_BAD = 0, 1
POLLING_FAILED, POLLING_READING, POLLING_WRITING, POLLING_OK = 0, 1, 2, 3
_FATAL_ERROR, _BAD_RESPONSE = 7, 5
_TUPLES_OK = 2
_DIAG_SQLSTATE, _DIAG_MESSAGE_PRIMARY = ord("C"), ord("M")
_NUL_MESSAGE = "PostgreSQL text fields cannot contain NUL (0x00) bytes"


class PqError(Exception):
    """A libpq failure: ``sqlstate`` (None without a server answer), ``lost`` when the
    connection itself failed. ``str()`` is the message's first line."""

    def __init__(self, message: str, sqlstate: str | None = None, *, lost: bool = False) -> None:
        text = message.strip()
        super().__init__(text.splitlines()[0] if text else "no error details available")
        self.sqlstate = sqlstate
        self.lost = lost


class _Notify(_c.Structure):
    _fields_ = (
        ("relname", _c.c_char_p),
        ("be_pid", _c.c_int),
        ("extra", _c.c_char_p),
        ("next", _c.c_void_p),
    )


class _ConninfoOption(_c.Structure):
    _fields_ = (
        ("keyword", _c.c_char_p),
        ("envvar", _c.c_char_p),
        ("compiled", _c.c_char_p),
        ("val", _c.c_char_p),
        ("label", _c.c_char_p),
        ("dispchar", _c.c_char_p),
        ("dispsize", _c.c_int),
    )


# name: (restype, argtypes); p = PGconn*, r = PGresult*
_P, _S, _I = _c.c_void_p, _c.c_char_p, _c.c_int
_SIGNATURES: dict[str, tuple[Any, tuple[Any, ...]]] = {
    "PQconnectStartParams": (_P, (_c.POINTER(_S), _c.POINTER(_S), _I)),
    "PQconnectPoll": (_I, (_P,)),
    "PQstatus": (_I, (_P,)),
    "PQerrorMessage": (_S, (_P,)),
    "PQsocket": (_I, (_P,)),
    "PQfinish": (None, (_P,)),
    "PQsendQueryParams": (
        _I,
        (_P, _S, _I, _c.POINTER(_c.c_uint), _c.POINTER(_S), _c.c_void_p, _c.c_void_p, _I),
    ),
    "PQconsumeInput": (_I, (_P,)),
    "PQisBusy": (_I, (_P,)),
    "PQgetResult": (_P, (_P,)),
    "PQresultStatus": (_I, (_P,)),
    "PQresultErrorMessage": (_S, (_P,)),
    "PQresultErrorField": (_S, (_P, _I)),
    "PQntuples": (_I, (_P,)),
    "PQnfields": (_I, (_P,)),
    "PQfname": (_S, (_P, _I)),
    "PQftype": (_c.c_uint, (_P, _I)),
    "PQgetvalue": (_S, (_P, _I, _I)),
    "PQgetisnull": (_I, (_P, _I, _I)),
    "PQcmdTuples": (_S, (_P,)),
    "PQclear": (None, (_P,)),
    "PQnotifies": (_c.POINTER(_Notify), (_P,)),
    "PQfreemem": (None, (_c.c_void_p,)),
    "PQgetCancel": (_P, (_P,)),
    "PQcancel": (_I, (_P, _S, _I)),
    "PQfreeCancel": (None, (_P,)),
    "PQconninfoParse": (_c.POINTER(_ConninfoOption), (_S, _c.POINTER(_c.c_void_p))),
    "PQconninfoFree": (None, (_c.POINTER(_ConninfoOption),)),
    "PQsetNoticeProcessor": (_c.c_void_p, (_P, _c.c_void_p, _c.c_void_p)),
}
# Server notices ("relation already exists, skipping") are not printed, as with psycopg.
_IGNORE_NOTICE = _c.CFUNCTYPE(None, _c.c_void_p, _c.c_char_p)(lambda _arg, _message: None)

_lib: Any = None
_tried = False


def _candidates() -> Iterator[str]:
    """Library names for the loader, then the psycopg-binary wheel's bundled copies
    (looked for only when the loader finds none)."""
    yield from _NAMES
    import importlib.util

    try:
        spec = importlib.util.find_spec("psycopg_binary")  # finds, never imports
    except (ImportError, ValueError):
        spec = None
    for location in (spec.submodule_search_locations or []) if spec else []:
        site = os.path.dirname(location)
        for folder in _BUNDLED_DIRS:
            directory = os.path.join(site, folder)
            try:
                names = sorted(os.listdir(directory))
            except OSError:
                continue
            yield from (os.path.join(directory, n) for n in names if n.startswith("libpq"))


def load() -> Any:
    """The loaded library with its signatures declared, or None if none can be loaded."""
    global _lib, _tried
    if not _tried:  # two threads may both look: loading twice is harmless
        for name in _candidates():
            try:
                lib = _c.CDLL(name)
                for func, (restype, argtypes) in _SIGNATURES.items():
                    getattr(lib, func).restype = restype
                    getattr(lib, func).argtypes = argtypes
            except (OSError, AttributeError):  # missing, or too old for a function above
                continue
            _lib = lib
            break
        _tried = True
    return _lib


def parse_conninfo(conninfo: str) -> dict[str, str]:
    """The settings a URL or ``key=value`` string gives (PQconninfoParse); PqError if it
    is not valid."""
    pq = load()
    error = _c.c_void_p()
    options = pq.PQconninfoParse(conninfo.encode(), _c.byref(error))
    if not options:
        message = _c.string_at(error.value).decode(errors="replace") if error.value else ""
        if error.value:
            pq.PQfreemem(error)
        raise PqError(message or "the connection string cannot be parsed")
    try:
        given = {}
        i = 0
        while options[i].keyword is not None:
            if options[i].val is not None:
                given[options[i].keyword.decode()] = options[i].val.decode(errors="replace")
            i += 1
        return given
    finally:
        pq.PQconninfoFree(options)


def _wait(fd: int, *, write: bool = False, deadline: float | None = None) -> bool:
    """Sleep in ``select`` until ``fd`` is ready; False if ``deadline`` passed first."""
    left = None if deadline is None else max(0.0, deadline - time.monotonic())
    ready = select.select([] if write else [fd], [fd] if write else [], [], left)
    return bool(ready[0] or ready[1])


def _text(raw: bytes) -> str:
    return raw.decode()


def _json(raw: bytes) -> Any:
    import json

    return json.loads(raw)


def _numeric(raw: bytes) -> Any:
    from decimal import Decimal

    return Decimal(raw.decode())


# Column type OID → loader; any other type arrives as text, as psycopg gives an unknown type.
_LOADERS: dict[int, Callable[[bytes], Any]] = {
    16: lambda raw: raw == b"t",  # bool
    20: int,  # int8
    21: int,  # int2
    23: int,  # int4
    26: int,  # oid
    700: float,  # float4
    701: float,  # float8
    1700: _numeric,
    114: _json,
    3802: _json,  # jsonb
}


def _bound(value: object) -> tuple[bytes | None, int]:
    """A Python value as (text, type OID), as psycopg binds it (a str as ``unknown``)."""
    if value is None:
        return None, 0
    if isinstance(value, bool):
        return (b"t" if value else b"f"), 16
    if isinstance(value, int):
        if -(2**15) <= value < 2**15:
            return str(value).encode(), 21
        if -(2**31) <= value < 2**31:
            return str(value).encode(), 23
        return str(value).encode(), 20 if -(2**63) <= value < 2**63 else 1700
    if isinstance(value, float):
        return repr(value).encode(), 701
    if isinstance(value, str):
        if "\x00" in value:
            raise PqError(_NUL_MESSAGE, "22021")
        return value.encode(), 0
    raise PqError(f"cannot adapt type {type(value).__name__!r} to a query parameter")


class Result:
    """What a statement returned: its rows (dicts, as psycopg's ``dict_row``) and count."""

    __slots__ = ("rowcount", "rows")

    def __init__(self, rows: list[dict[str, Any]], rowcount: int) -> None:
        self.rows = rows
        self.rowcount = rowcount


class PgConn:
    """One connection. Not thread-safe: its owner holds a lock around every call."""

    def __init__(self, params: dict[str, str], timeout: float | None) -> None:
        self._pq = load()
        keys = (_S * (len(params) + 1))(*[k.encode() for k in params], None)
        values = (_S * (len(params) + 1))(*[v.encode() for v in params.values()], None)
        self._handle = self._pq.PQconnectStartParams(keys, values, 1)
        if not self._handle:
            raise PqError("out of memory starting a connection", lost=True)
        self._pq.PQsetNoticeProcessor(self._handle, _IGNORE_NOTICE, None)
        try:
            self._poll_until_connected(None if timeout is None else time.monotonic() + timeout)
        except BaseException:
            self.close()
            raise

    def _poll_until_connected(self, deadline: float | None) -> None:
        pq, handle = self._pq, self._handle
        state = POLLING_WRITING  # as if PQconnectPoll had asked to write (libpq's rule)
        while True:
            if pq.PQstatus(handle) == CONNECTION_BAD or state == POLLING_FAILED:
                raise self._connection_error()
            if state == POLLING_OK:
                return
            fd = pq.PQsocket(handle)
            if fd < 0:
                raise self._connection_error()
            if not _wait(fd, write=state == POLLING_WRITING, deadline=deadline):
                raise PqError("connection timeout expired", lost=True)
            state = pq.PQconnectPoll(handle)

    def _connection_error(self) -> PqError:
        message = self._pq.PQerrorMessage(self._handle) if self._handle else None
        text = message.decode(errors="replace") if message else "the connection is closed"
        return PqError(text, lost=True)

    @property
    def closed(self) -> bool:
        return not self._handle

    @property
    def broken(self) -> bool:
        """True once the connection is closed or the server has gone away."""
        return not self._handle or self._pq.PQstatus(self._handle) != CONNECTION_OK

    def fileno(self) -> int:
        fd = self._pq.PQsocket(self._handle) if self._handle else -1
        if fd < 0:
            raise self._connection_error()
        return int(fd)

    def execute(self, sql: str, values: Sequence[object] = ()) -> Result:
        """Run one statement with ``$n`` parameters; PqError if it or the connection fails."""
        if not self._handle:
            raise self._connection_error()
        bound = [_bound(v) for v in values]
        n = len(bound)
        texts = (_S * n)(*[b[0] for b in bound])
        types = (_c.c_uint * n)(*[b[1] for b in bound])
        if not self._pq.PQsendQueryParams(
            self._handle, sql.encode(), n, types, texts, None, None, 0
        ):
            raise self._connection_error()
        try:
            return self._collect()
        except (PqError, OSError):
            raise
        except BaseException:  # a signal's exception: stop the statement, drop the connection
            self.cancel()
            self.close()
            raise

    def _collect(self) -> Result:
        """Every result of the statement sent: the last one, or the first error."""
        pq, handle = self._pq, self._handle
        error: PqError | None = None
        result: Result | None = None
        while True:
            while pq.PQisBusy(handle):
                fd = pq.PQsocket(handle)
                if fd < 0 or not (_wait(fd) and pq.PQconsumeInput(handle)):
                    raise self._connection_error()
            res = pq.PQgetResult(handle)
            if not res:
                break
            try:
                if pq.PQresultStatus(res) in (_FATAL_ERROR, _BAD_RESPONSE):
                    error = error or self._result_error(res)
                else:
                    result = self._convert(res)
            finally:
                pq.PQclear(res)
        if error is not None:
            raise error
        if result is None:  # no result at all: the connection failed
            raise self._connection_error()
        return result

    def _result_error(self, res: int) -> PqError:
        pq = self._pq
        state = pq.PQresultErrorField(res, _DIAG_SQLSTATE)
        primary = pq.PQresultErrorField(res, _DIAG_MESSAGE_PRIMARY)
        message = primary or pq.PQresultErrorMessage(res) or b""
        lost = pq.PQstatus(self._handle) != CONNECTION_OK
        return PqError(
            message.decode(errors="replace"), state.decode() if state else None, lost=lost
        )

    def _convert(self, res: int) -> Result:
        pq = self._pq
        if pq.PQresultStatus(res) != _TUPLES_OK:
            count = pq.PQcmdTuples(res)
            return Result([], int(count) if count else -1)
        nfields, ntuples = pq.PQnfields(res), pq.PQntuples(res)
        names = [pq.PQfname(res, c).decode() for c in range(nfields)]
        loaders = [_LOADERS.get(pq.PQftype(res, c), _text) for c in range(nfields)]
        getvalue, isnull = pq.PQgetvalue, pq.PQgetisnull
        rows = []
        for r in range(ntuples):
            row: dict[str, Any] = {}
            for c in range(nfields):
                raw = getvalue(res, r, c)
                row[names[c]] = None if not raw and isnull(res, r, c) else loaders[c](raw)
            rows.append(row)
        return Result(rows, ntuples)

    def notifies(self) -> list[str]:
        """Payloads of the notifications the socket holds now (never blocks)."""
        pq, handle = self._pq, self._handle
        if not handle or not pq.PQconsumeInput(handle) or pq.PQstatus(handle) != CONNECTION_OK:
            raise self._connection_error()
        payloads: list[str] = []
        while True:
            note = pq.PQnotifies(handle)
            if not note:
                return payloads
            try:
                payloads.append((note.contents.extra or b"").decode(errors="replace"))
            finally:
                pq.PQfreemem(note)

    def cancel(self) -> None:
        """Ask the server to stop the running statement (best effort)."""
        if not self._handle:
            return
        token = self._pq.PQgetCancel(self._handle)
        if token:
            self._pq.PQcancel(token, _c.create_string_buffer(256), 256)
            self._pq.PQfreeCancel(token)

    def close(self) -> None:
        handle, self._handle = self._handle, None
        if handle:
            self._pq.PQfinish(handle)

    def __del__(self) -> None:
        if getattr(self, "_handle", None):
            self.close()

"""Every form of a database URL libpq accepts, through every function that reads,
masks or rewrites one (issue 33, item 1): a URL naming several hosts, the same hosts as
``?host=…&port=…``, and the keyword string ``host=h1,h2 port=… dbname=…``.

What libpq makes of a rewritten string is asked of libpq itself (``conninfo_to_dict``),
so a rewrite that changes anything but the word it means to is caught.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict

from lirun.errors import UsageError
from lirun.paths import is_keyword_conninfo, looks_like_db_file, resolve_db_url
from lirun.record.credential import child_url
from lirun.record.spool import database_identity
from lirun.store import conninfo, is_postgres_url
from lirun.store.pg_connect import host_list_problem, split_schema, writable_target
from lirun.store.queue_records import queue_conninfo
from lirun.store.urls import (
    check_url,
    redact_url,
    scrub,
    url_password,
    url_secrets,
    url_without_credentials,
    with_passfile,
)

PW = "Pw7'sec ret"  # a quote and a space: what a keyword value must escape
PW_URL = "Pw7%27sec%20ret"
FORMS = {
    "hosts-in-url": f"postgresql://u:{PW_URL}@h1:5432,h2:5433/db?schema=s1&connect_timeout=3",
    "hosts-in-query": (
        f"postgresql:///db?host=h1,h2&port=5432,5433&user=u&password={PW_URL}"
        "&schema=s1&connect_timeout=3"
    ),
    "keyword": (
        "host=h1,h2 port = 5432,5433 dbname=db user=u password='Pw7\\'sec ret' "
        "schema=s1 connect_timeout=3"
    ),
}
EXPECTED = {
    "host": "h1,h2",
    "port": "5432,5433",
    "dbname": "db",
    "user": "u",
    "connect_timeout": "3",
}


def libpq(text: str) -> dict[str, str]:
    return {k: str(v) for k, v in conninfo_to_dict(text).items()}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_schema_is_taken_out_and_the_rest_is_what_libpq_read(form: str) -> None:
    rest, schema = split_schema(FORMS[form])
    assert schema == "s1"
    assert libpq(rest) == {**EXPECTED, "password": PW}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_form_is_checked_and_taken_for_postgresql(form: str) -> None:
    check_url(FORMS[form])
    assert is_postgres_url(FORMS[form])
    assert resolve_db_url(FORMS[form]) == FORMS[form]


@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_password_is_masked_and_found(form: str) -> None:
    url = FORMS[form]
    shown = redact_url(url)
    assert "sec" not in shown
    assert "***" in shown
    assert "h1" in shown
    assert "5433" in shown
    assert url_password(url) == PW
    assert PW in url_secrets(url)
    message = f"connection to {url} failed for password {PW}"
    assert "sec" not in scrub(message, url)
    assert "sec" not in database_identity(url)  # the spool's directory is named from it


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_child_gets_the_url_without_its_password(form: str, tmp_path: Path) -> None:
    safe = url_without_credentials(FORMS[form])
    assert safe is not None
    assert libpq(split_schema(safe)[0]) == EXPECTED
    assert split_schema(safe)[1] == "s1"
    passfile = tmp_path / "run dir's" / "db.pgpass"
    given = child_url(FORMS[form], passfile)
    assert given is not None
    assert libpq(split_schema(given)[0]) == {**EXPECTED, "passfile": str(passfile)}
    again = with_passfile(given, "/other")  # a passfile already named is replaced
    assert libpq(split_schema(again)[0])["passfile"] == "/other"


@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_queue_asks_for_the_writable_host(form: str) -> None:
    text, queue_schema = queue_conninfo(FORMS[form])
    got = libpq(text)
    assert queue_schema == "s1_queue"
    assert got["target_session_attrs"] == "read-write"
    assert (got["host"], got["port"], got["password"]) == ("h1,h2", "5432,5433", PW)
    assert got["options"].endswith("-c search_path=s1_queue")


@pytest.mark.parametrize(
    ("given", "wanted"),
    [
        ({"host": "h1,h2"}, {"target_session_attrs": "read-write"}),
        ({"hostaddr": "127.0.0.1,127.0.0.2"}, {"target_session_attrs": "read-write"}),
        ({"host": "h1,h2", "target_session_attrs": "any"}, {}),  # the URL's own choice
        ({"host": "h1,h2", "target_session_attrs": "primary"}, {}),
        ({"host": "h1"}, {}),  # one host: nothing to choose among
        ({}, {}),
    ],
)
def test_several_hosts_ask_for_the_one_that_takes_writes(
    given: dict[str, str], wanted: dict[str, str]
) -> None:
    assert writable_target(given) == wanted


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("host=h1 password='open", "an unterminated quoted string"),
        ("host=h1 dbname", "no \"=\" after 'dbname'"),
        ("host=h1,h2 port=5432,5433", None),
        ("host = h1  port= 5432 ", None),
    ],
)
def test_a_keyword_string_libpq_would_refuse(text: str, problem: str | None) -> None:
    assert conninfo.problem(text) == problem
    if problem is None:
        check_url(text)
        assert libpq(conninfo.join(conninfo.words(text))) == libpq(text)
    else:
        with pytest.raises(UsageError, match="the database keyword string"):
            check_url(text)


def test_an_unterminated_password_is_still_masked() -> None:
    text = "host=h1 password='Pw7 sec ret"
    assert redact_url(text) == "host=h1 password=***"
    assert url_without_credentials(text) is None  # not given to a child as it is


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("postgresql://u@h1:5432,h2:port/db", "Port could not be cast to integer"),
        ("postgresql://u@h1:5432,[::1:5433/db", "Invalid IPv6 URL"),
        ("postgresql://u@h1:5432,h2:99999/db", "out of range"),
    ],
)
def test_a_bad_host_among_several_is_named(url: str, needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        check_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u@h1:5432,h2:5433/db",
        "postgresql://u@h1,h2/db",
        "postgresql://u@[::1]:5432,[::2]:5433/db",
        "postgresql://h1:5432,h2/db?target_session_attrs=read-write",
    ],
)
def test_several_hosts_in_the_url_are_accepted(url: str) -> None:
    check_url(url)
    assert redact_url(url) == url  # nothing taken for a password
    assert url_without_credentials(url) == url


@pytest.mark.parametrize(
    "value",
    [
        "host=h1",
        "dbname=x user=y",
        " host = h1",
        "service=prod",  # any libpq keyword, not only those lirun knows
        "hots=h1,h2 port=1,2",  # a typo'd key: libpq names it, nothing is made a file
        "password=x",
    ],
)
def test_keyword_strings_are_recognised(value: str) -> None:
    assert is_keyword_conninfo(value)
    assert is_postgres_url(value)


@pytest.mark.parametrize(
    ("value", "is_file"),
    [
        ("/tmp/x/state.db", True),
        ("rel/dir/state", True),
        ("state.db", True),
        ("runs.sqlite3", True),
        ("~/lirun.db", True),
        ("sqlite:rel.db", True),
        (":memory:", True),
        ("/data/user=x/state.db", True),
        ("localhost", False),
        ("h1:5432,h2:5433", False),
        ("mydatabase", False),
    ],
)
def test_what_is_taken_for_a_database_file(
    value: str, is_file: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    assert not is_keyword_conninfo(value)
    assert looks_like_db_file(value) is is_file
    if is_file:
        assert resolve_db_url(value) == value
    else:
        with pytest.raises(UsageError, match="neither a URL, a keyword string nor"):
            resolve_db_url(value)


def test_an_existing_file_of_any_name_is_a_database_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("mydatabase").write_bytes(b"")
    assert resolve_db_url("mydatabase") == "mydatabase"


def test_a_refusal_never_echoes_user_info() -> None:
    with pytest.raises(UsageError) as caught:
        resolve_db_url("u:secret@h1:5432,h2:5433")
    assert "secret" not in str(caught.value)


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ({"host": "h1,h2", "port": "5432,5433"}, None),
        ({"host": "h1,h2", "port": "5432"}, None),  # one port for every host
        ({"host": "h1,h2"}, None),
        ({"host": "h1", "port": "5432"}, None),
        (
            {"host": "h1,h2", "port": "1,2,3"},
            "3 ports for 2 hosts (give one port, or one per host)",
        ),
        ({"host": "h1,h2", "hostaddr": "127.0.0.1"}, "2 host names but 1 host addresses"),
        ({"hostaddr": "127.0.0.1,127.0.0.2", "port": "1,2"}, None),
    ],
)
def test_a_host_list_libpq_would_refuse_is_named_before_connecting(
    given: dict[str, str], problem: str | None
) -> None:
    assert host_list_problem(given) == problem

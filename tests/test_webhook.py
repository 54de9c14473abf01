"""Signed webhooks (issue 32, item 3) through a real dashboard server (uvicorn, real HTTP)
on both backends: a good delivery is stored with its queued run and answered 202; a
wrong, missing or replayed-with-changed-body signature, a body past the bound, an
unknown hook and an unset secret write nothing; a redelivery fires once, also 100
deliveries each sent twice at once."""

from __future__ import annotations

import http.client
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lirun.schedules import registry
from lirun.schedules.actions import parse_action
from lirun.schedules.definition import Definition
from lirun.schedules.triggers import parse_trigger
from lirun.schedules.webhooks import MAX_BODY_BYTES, sign
from lirun.store import Store
from support.uikit import serve

SECRET = "hook-secret-0123456789"
VAR = "LIRUN_TEST_HOOK_SECRET"


def add_hook(store: Store, tmp_path: Path, name: str = "hook", key: str | None = None) -> None:
    trigger = parse_trigger(now=1, webhook=True, secret_env=VAR, key=key)
    action = parse_action(["run", "--cwd", str(tmp_path), "echo", "{{ event.title }}"])
    registry.add(store, Definition(name, trigger, action), now=1, actor="test")


def post(
    url: str, body: bytes, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=body, method="POST", headers=headers or {})
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        text = exc.read()
        return exc.code, json.loads(text) if text.startswith(b"{") else {"text": text}


def signed(body: bytes, delivery: str | None = None, secret: str = SECRET) -> dict[str, str]:
    headers = {"X-Hub-Signature-256": sign(secret, body)}
    if delivery is not None:
        headers["X-GitHub-Delivery"] = delivery
    return headers


def counts(store: Store) -> tuple[int, int]:
    events = store.connector.read("SELECT COUNT(*) AS n FROM schedule_events", {})
    runs = store.connector.read("SELECT COUNT(*) AS n FROM schedule_runs", {})
    return int(events[0]["n"]), int(runs[0]["n"])


@pytest.fixture
def server(
    store: Store, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    monkeypatch.setenv(VAR, SECRET)
    add_hook(store, tmp_path)
    with serve(db_url, token="dashboard-token-0123456789") as base:
        yield base


def test_a_good_delivery_is_stored_with_its_queued_run_and_answered_202(
    store: Store, server: str
) -> None:
    body = json.dumps({"id": 7, "title": "Fix it"}).encode()
    status, answer = post(f"{server}/hooks/hook", body, signed(body, "d-1"))
    assert status == 202, answer
    assert answer["event_key"] == "d-1"
    assert answer["duplicate"] is False
    run = store.schedules.get_run(answer["schedule_run_id"])
    assert run is not None
    assert run.status == "queued"
    assert run.event_key == "d-1"
    assert json.loads(run.event_json or "{}") == {"id": 7, "title": "Fix it"}
    row = store.schedules.get("hook")
    assert row is not None
    event = store.events.get(row.id, "d-1")
    assert event is not None
    assert event.source == "webhook"
    # the rest of the dashboard keeps its token
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{server}/api/runs", timeout=10)
    assert refused.value.code == 401


def test_the_key_field_is_the_event_key_without_a_delivery_header(
    store: Store, server: str
) -> None:
    body = json.dumps({"id": "abc", "title": "t"}).encode()
    headers = {"X-Lirun-Signature": sign(SECRET, body)}
    first = post(f"{server}/hooks/hook", body, headers)
    again = post(f"{server}/hooks/hook", body, headers)
    assert first[0] == 202
    assert first[1]["event_key"] == "abc"
    assert again[0] == 200
    assert again[1]["duplicate"] is True
    assert again[1]["schedule_run_id"] == first[1]["schedule_run_id"]
    assert counts(store) == (1, 1)


@pytest.mark.parametrize("case", ["wrong", "missing", "replayed", "other-secret"])
def test_a_bad_signature_is_401_and_writes_nothing(store: Store, server: str, case: str) -> None:
    body = json.dumps({"id": 1, "title": "x"}).encode()
    headers = signed(body, "d-1")
    if case == "wrong":
        headers["X-Hub-Signature-256"] = "sha256=" + "0" * 64
    elif case == "missing":
        del headers["X-Hub-Signature-256"]
    elif case == "other-secret":
        headers = signed(body, "d-1", secret="not-the-secret")
    else:  # the signature of the first body, sent with another
        body = json.dumps({"id": 1, "title": "changed"}).encode()
    status, answer = post(f"{server}/hooks/hook", body, headers)
    assert status == 401, answer
    assert "signature" in answer["error"]
    assert counts(store) == (0, 0)


def test_githubs_ping_is_answered_and_fires_nothing(store: Store, server: str) -> None:
    body = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 1}).encode()
    headers = {**signed(body, "ping-1"), "X-GitHub-Event": "ping"}
    status, answer = post(f"{server}/hooks/hook", body, headers)
    assert status == 200
    assert answer["status"] == "ping"
    assert counts(store) == (0, 0)
    headers["X-Hub-Signature-256"] = "sha256=" + "0" * 64
    assert post(f"{server}/hooks/hook", body, headers)[0] == 401


def test_a_redelivery_fires_once(store: Store, server: str) -> None:
    body = json.dumps({"id": 1, "title": "x"}).encode()
    first = post(f"{server}/hooks/hook", body, signed(body, "same"))
    again = post(f"{server}/hooks/hook", body, signed(body, "same"))
    assert first[0] == 202
    assert again[0] == 200
    assert again[1]["duplicate"] is True
    assert again[1]["schedule_run_id"] == first[1]["schedule_run_id"]
    assert counts(store) == (1, 1)


def send_streamed(base: str, body: bytes, headers: dict[str, str], *, chunked: bool) -> int:
    """The status of a POST whose body is sent piece by piece (the server may answer
    before it has all of it: a broken pipe while sending is expected then)."""
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.putrequest("POST", "/hooks/hook")
    for name, value in headers.items():
        conn.putheader(name, value)
    if chunked:
        conn.putheader("Transfer-Encoding", "chunked")
    else:
        conn.putheader("Content-Length", str(len(body)))
    conn.endheaders()
    try:
        for start in range(0, len(body), 65536):
            piece = body[start : start + 65536]
            conn.send(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
        if chunked:
            conn.send(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass
    try:
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.parametrize("chunked", [False, True], ids=["declared", "chunked"])
def test_a_body_past_the_bound_is_413_and_writes_nothing(
    store: Store, server: str, chunked: bool
) -> None:
    body = json.dumps({"id": 1, "pad": "x" * MAX_BODY_BYTES}).encode()
    assert send_streamed(server, body, signed(body, "big"), chunked=chunked) == 413
    assert counts(store) == (0, 0)
    small = json.dumps({"id": 1}).encode()  # the bound is the body's, not the route's
    assert send_streamed(server, small, signed(small, "ok"), chunked=chunked) == 202


def test_an_unknown_hook_or_a_schedule_of_another_kind_is_404(
    store: Store, server: str, tmp_path: Path
) -> None:
    trigger = parse_trigger(now=1, every="1h")
    action = parse_action(["run", "--cwd", str(tmp_path), "true"])
    registry.add(store, Definition("hourly", trigger, action), now=1, actor="test")
    body = b'{"id": 1}'
    assert post(f"{server}/hooks/nope", body, signed(body, "d"))[0] == 404
    assert post(f"{server}/hooks/hourly", body, signed(body, "d"))[0] == 404
    assert counts(store)[0] == 0


def test_an_unset_secret_is_503_and_writes_nothing(
    store: Store, server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(VAR)
    body = b'{"id": 1}'
    status, answer = post(f"{server}/hooks/hook", body, signed(body, "d"))
    assert status == 503
    assert VAR in answer["error"]
    assert counts(store) == (0, 0)


def test_100_deliveries_each_sent_twice_at_once_make_exactly_100_runs(
    store: Store, server: str
) -> None:
    statuses: list[int] = []
    lock = threading.Lock()

    def deliver(number: int) -> None:
        body = json.dumps({"id": number, "title": f"t{number}"}).encode()
        status, _ = post(f"{server}/hooks/hook", body, signed(body, f"delivery-{number}"))
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=deliver, args=(n % 100,)) for n in range(200)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert sorted(set(statuses)) == [200, 202]
    assert statuses.count(202) == 100
    assert counts(store) == (100, 100)


def test_the_schedule_page_says_the_hook_and_its_events(store: Store, server: str) -> None:
    body = json.dumps({"id": 5, "title": "x"}).encode()
    assert post(f"{server}/hooks/hook", body, signed(body, "page-1"))[0] == 202
    request = urllib.request.Request(
        f"{server}/schedules/hook", headers={"Authorization": "Bearer dashboard-token-0123456789"}
    )
    with urllib.request.urlopen(request, timeout=10) as page:
        html = page.read().decode()
    assert "POST /hooks/hook" in html
    assert f"${VAR}" in html
    assert "1 seen, 1 fired a run" in html
    assert "page-1" in html
    assert "last poll" not in html

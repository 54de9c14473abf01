"""The dashboard's pages and JSON API through Starlette's TestClient, on both backends:
what each page shows, filters and keyset pagination, flows, shows, schedules, lineage,
the transcript (and a run whose files are on another host), escaping, the OpenAPI
document."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from lirun.store import Store
from lirun.ui.app import create_app
from support.storekit import raw_write
from support.system import need_graphviz
from support.uikit import PAYLOADS, XSS_IMG, XSS_SCRIPT, make_run, run_flow


@pytest.fixture
def client(store: Store, db_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(db_url, watch=False)) as c:
        yield c


def ids_on(page: str) -> list[str]:
    return re.findall(r'<tr id="run-([^"]+)"', page)


def test_runs_page_lists_every_kind_newest_first(
    store: Store, client: TestClient, lirun_home: Path
) -> None:
    make_run(store, lirun_home, "r-old", prompt="first")
    inv = store.invocations.create(skill="review", prompt="a manual invocation")
    make_run(
        store,
        lirun_home,
        "r-new",
        prompt="second",
        status="failed",
        reason="run.failed.exception",
        summary="boom",
    )
    page = client.get("/")
    assert page.status_code == 200
    assert ids_on(page.text) == ["r-new", inv.id, "r-old"]
    assert "run.failed.exception" in page.text
    assert "boom" in page.text
    assert 'class="chip st-failed"' in page.text
    assert "20 in / 40 out" in page.text
    assert "$0.0123" in page.text
    data = client.get("/api/runs").json()
    assert [r["id"] for r in data["runs"]] == ["r-new", inv.id, "r-old"]
    assert data["runs"][1]["href"] == f"/flows/{inv.id}"


def test_filters_by_status_kind_provider_text_and_time(
    store: Store, client: TestClient, lirun_home: Path
) -> None:
    make_run(store, lirun_home, "a1", prompt="refactor the parser")
    make_run(
        store,
        lirun_home,
        "a2",
        prompt="write docs",
        status="timed_out",
        reason="run.timed_out.deadline",
    )
    cut = time.time()
    make_run(store, lirun_home, "a3", prompt="Parser tests", summary="flaky")
    store.invocations.create(skill="x", prompt="parser invocation")

    def ids(**query: str) -> list[str]:
        return [r["id"] for r in client.get("/api/runs", params=query).json()["runs"]]

    assert ids(status="timed_out") == ["a2"]
    assert ids(kind="run") == ["a3", "a2", "a1"]
    assert ids(kind="session") == ["a3", "a2", "a1"]  # the old word, still read
    assert client.get("/api/runs", params={"kind": "session"}).json()["filters"]["kind"] == "run"
    assert ids(provider="claude") == ["a3", "a2", "a1"]
    assert ids(q="PARSER", kind="run") == ["a3", "a1"]
    assert ids(q="flaky") == ["a3"]
    assert ids(q="a2", kind="run") == ["a2"]
    assert ids(since=str(cut), kind="run") == ["a3"]
    assert ids(until=str(cut), kind="run") == ["a2", "a1"]
    assert ids(q="100%_") == []  # LIKE wildcards are literal
    page = client.get("/", params={"status": "timed_out"})
    assert ids_on(page.text) == ["a2"]
    assert '<option value="timed_out" selected>' in page.text


@pytest.mark.parametrize(
    "query",
    [{"status": "nope"}, {"kind": "team"}, {"since": "yesterday"}, {"cursor": "x"}],
)
def test_a_bad_filter_is_a_clear_400(client: TestClient, query: dict[str, str]) -> None:
    api = client.get("/api/runs", params=query)
    assert api.status_code == 400
    assert next(iter(query)) in api.json()["error"]
    assert client.get("/", params=query).status_code == 400


def test_keyset_pages_cover_every_run_once(store: Store, client: TestClient) -> None:
    now = time.time()
    rows: list[dict[str, Any]] = [
        {
            "id": f"k{i:03d}",
            "status": "completed",
            "reason_code": "run.completed.ok",
            "created_at": now - 1000 + (i // 3),
            "provider": "codex",
            "prompt": f"task {i}",
        }
        for i in range(130)  # three rows share each created_at: the id breaks ties
    ]
    assert store.sessions.import_many(rows) == 130
    seen: list[str] = []
    query: dict[str, str] = {}
    pages = 0
    while True:
        data = client.get("/api/runs", params=query).json()
        seen += [r["id"] for r in data["runs"]]
        pages += 1
        if not data["next_cursor"]:
            break
        query = {"cursor": data["next_cursor"]}
    assert pages == 3
    assert seen == sorted((r["id"] for r in rows), reverse=True)
    html = client.get("/").text
    assert 'id="next-page"' in html


def test_run_page_shows_outcome_history_evidence_usage_and_transcript(
    store: Store, client: TestClient, lirun_home: Path
) -> None:
    make_run(
        store,
        lirun_home,
        "r1",
        reply="All green.",
        summary="done it",
        artifacts={"report.md": b"# hi", "sub/data.json": b"{}"},
    )
    page = client.get("/runs/r1").text
    for needle in (
        "run.completed.ok",
        "done it",
        "run.running.started",
        "assistant_output",
        "All green.",
        "tool call: Bash",
        "tool result",
        "$0.0123",
        "/runs/r1/artifacts/report.md",
        "/runs/r1/artifacts/sub/data.json",
    ):
        assert needle in page, needle
    assert page.index("run.running.started") < page.index(
        'chip st-completed">completed</span>\n    <code'
    )
    data = client.get("/api/runs/r1").json()
    assert [t["status"] for t in data["transitions"]] == ["running", "completed"]
    assert data["transcript"]["state"] == "ok"
    assert {e["kind"] for e in data["transcript"]["entries"]} >= {"assistant", "tool_call"}
    assert client.get("/runs/nope").status_code == 404
    assert client.get("/api/runs/nope").status_code == 404


def test_a_commands_stdout_is_shown_as_its_output_never_a_reply(
    store: Store, client: TestClient, lirun_home: Path
) -> None:
    store.sessions.create(id="c1", owner_pid=None, provider="command", command_json=["make"])
    store.update_fields("session", "c1", {"reply_text": "built 3 targets"})
    store.update_status(
        "session",
        "c1",
        new_status="completed",
        reason_code="run.completed.ok",
        reason_summary="completed: command exited 0",
        evidence_refs=[{"kind": "exit_code", "exit_code": 0, "label": "command exited 0"}],
    )
    page = client.get("/runs/c1").text
    assert 'id="run-output">built 3 targets</pre>' in page
    assert "<summary>output</summary>" in page
    assert "reply" not in page
    assert "assistant" not in page
    run = client.get("/api/runs/c1").json()["run"]
    assert run["reply"] == "built 3 targets"
    assert run["output_text"] == run["reply"]  # its old key, deprecated
    assert "reply_text" not in run


def test_a_failed_tool_result_is_highlighted(
    store: Store, client: TestClient, lirun_home: Path
) -> None:
    from support.uikit import claude_stream

    stream = claude_stream(text="trying", result="Permission denied", error=True)
    make_run(store, lirun_home, "r-err", stream=stream)
    page = client.get("/runs/r-err").text
    assert 'class="entry tool_result is-error"' in page
    assert "Permission denied" in page


def test_a_run_on_another_host_says_so(store: Store, client: TestClient, lirun_home: Path) -> None:
    make_run(store, lirun_home, "r-far", owner_host="build-box-7", with_files=False)
    page = client.get("/runs/r-far").text
    assert 'id="transcript-remote"' in page
    assert "build-box-7" in page
    make_run(store, lirun_home, "r-gone", with_files=False)
    assert 'id="transcript-missing"' in client.get("/runs/r-gone").text


def test_lineage_links_resumes_invocations_and_plays(
    store: Store, client: TestClient, lirun_home: Path
) -> None:
    inv = store.invocations.create(skill="flow")
    make_run(store, lirun_home, "first", invocation_id=inv.id)
    make_run(store, lirun_home, "second", resumed_from="first")
    show = store.shows.create(topic="auth")
    store.shows.create_play(show_id=show.id, name="models", session_id="first")
    page = client.get("/runs/first").text
    assert 'resumed as <a href="/runs/second">' in page
    assert f'href="/flows/{inv.id}"' in page
    assert f'href="/shows/{show.id}#play-' in page
    assert 'resumed from <a href="/runs/first">' in client.get("/runs/second").text


def test_stored_text_is_escaped_everywhere(
    store: Store, client: TestClient, lirun_home: Path
) -> None:
    from support.uikit import claude_stream

    make_run(
        store,
        lirun_home,
        "x1",
        prompt=XSS_SCRIPT,
        reply=XSS_IMG,
        summary="javascript:alert(1) " + XSS_SCRIPT,
        stream=claude_stream(text=XSS_SCRIPT, tool=XSS_IMG, result=XSS_IMG),
        artifacts={"<b>bold</b>.html": XSS_SCRIPT.encode()},
    )
    for path in ("/", "/runs/x1", "/?q=script"):
        html = client.get(path).text
        for payload in PAYLOADS[:2]:
            assert payload not in html, (path, payload)
        assert "&lt;script&gt;" in html
        # The only scripts are the dashboard's own file, and no attribute handler exists.
        assert re.findall(r"<script[^>]*>", html) == ['<script src="/static/app.js" defer>']
        assert not re.search(r"<[^>]+\son\w+\s*=", html)
        assert 'href="javascript:' not in html
    assert client.get("/api/runs/x1").json()["run"]["prompt"] == XSS_SCRIPT


def test_flow_page_draws_the_leg_graph_linked_to_runs(
    store: Store, client: TestClient, tmp_path: Path, li_env: dict[str, str]
) -> None:
    flow_id = run_flow(
        tmp_path,
        li_env,
        "legs:\n  - id: plan\n    run: [sh, -c, 'echo planned']\n"
        "  - id: check\n    depends_on: [plan]\n    run: [sh, -c, 'exit 1']\n",
    )
    data = client.get(f"/api/flows/{flow_id}").json()
    assert data["flow"]["status"] == "failed"
    nodes = {n["id"]: n for n in data["nodes"]}
    assert nodes["plan"]["status"] == "completed"
    assert nodes["check"]["status"] == "failed"
    assert nodes["check"]["depends_on"] == ["plan"]
    page = client.get(f"/flows/{flow_id}").text
    assert "<svg" in page
    assert 'id="flow-graph"' in page
    for node in nodes.values():
        assert node["href"]
        assert node["href"] in page
    assert client.get("/flows/nope").status_code == 404


def test_flow_graph_without_graphviz_is_drawn_by_depth(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from lirun.flows.dag import DagNode
    from lirun.ui.graph import flow_svg

    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no dot on PATH
    nodes = [
        DagNode("a", "a\ncompleted", "completed", ()),
        DagNode("b", "<b>\nfailed", "failed", ("a",)),
    ]
    svg = str(flow_svg(nodes, {"a": "/runs/ra"}))
    assert svg.startswith("<svg")
    assert 'href="/runs/ra"' in svg
    assert "&lt;b&gt;" in svg
    assert "<b>" not in svg
    assert 'fill="#ffa8a8"' in svg


@pytest.mark.graphviz
def test_graphviz_labels_stay_text() -> None:
    from lirun.flows.dag import DagNode
    from lirun.ui.graph import dot_svg

    need_graphviz()
    nodes = [DagNode("x", f"{XSS_SCRIPT}\n{XSS_IMG}", "failed", ())]
    svg = dot_svg(nodes, {"x": "/runs/rx"})
    assert svg is not None
    assert svg.startswith("<svg")
    assert "<script" not in svg
    assert "<img" not in svg
    assert "&lt;script&gt;" in svg
    assert "/runs/rx" in svg


def test_show_page_is_a_board_of_plays(store: Store, client: TestClient) -> None:
    show = store.shows.create(topic="add-auth")
    p1 = store.shows.create_play(show_id=show.id, name="models")
    p2 = store.shows.create_play(show_id=show.id, name="<api>")
    store.update_status("play", p1.id, new_status="running", reason_code="play.running.started")
    raw_write(
        store,
        "UPDATE plays SET merge_sha = 'abcdef0123456789', attempt = 2 WHERE id = :id",
        {"id": p1.id},
    )
    page = client.get(f"/shows/{show.id}").text
    assert "abcdef012345" in page
    assert ">attempt</span> 2" in page
    assert f'id="play-{p1.id}"' in page
    assert "&lt;api&gt;" in page
    assert page.index('data-status="pending"') < page.index('data-status="running"')
    data = client.get(f"/api/shows/{show.id}").json()
    assert [c["status"] for c in data["board"]] == ["pending", "running"]
    assert p2.id in {p["id"] for p in data["plays"]}
    assert client.get("/shows/nope").status_code == 404


def test_schedules_page_shows_recent_runs_and_success_rate(
    store: Store, client: TestClient
) -> None:
    now = time.time()
    raw_write(
        store,
        "INSERT INTO schedules (id, name, spec, action_kind, enabled, created_at, updated_at) "
        "VALUES ('s1', 'nightly', '0 3 * * *', 'run', 1, :now, :now)",
        {"now": now},
    )
    for status, reason, cost in (
        ("completed", "run.completed.ok", 0.25),
        ("failed", "run.failed.exception", 0.5),
    ):
        inv = store.invocations.create(skill="scheduled")
        raw_write(
            store,
            "UPDATE invocations SET cost_usd = :c WHERE id = :id",
            {"c": cost, "id": inv.id},
        )  # what sum_flow_usage sets when a scheduled flow ends
        run = store.schedules.create_run(action_kind="run", schedule_id="s1", invocation_id=inv.id)
        store.update_status("schedule_run", run.id, new_status=status, reason_code=reason)
    page = client.get("/schedules").text
    assert 'id="schedule-s1"' in page
    assert "nightly" in page
    assert "50%" in page
    assert page.count('class="cell st-') == 2
    assert page.count('<rect class="bar st-') == 2
    assert "$0.7500" in page
    data = client.get("/api/schedules").json()
    assert data["schedules"][0]["success_rate"] == 0.5
    assert [b["height"] for b in data["schedules"][0]["chart"]] == [13.0, 24.0]
    assert "No live workers" in client.get("/workers").text
    assert client.get("/api/workers").json() == {"workers": []}


def test_workers_page_lists_live_workers_and_what_they_run(
    store: Store, client: TestClient
) -> None:
    from lirun.liveness import current_owner

    worker = store.workers.register(
        owner=current_owner(), concurrency=2, transport="local", lease_seconds=60
    )
    page = client.get("/workers").text
    assert f'id="worker-{worker}"' in page
    assert "local" in page
    [shown] = client.get("/api/workers").json()["workers"]
    assert (shown["id"], shown["pid"], shown["concurrency"]) == (worker, os.getpid(), 2)
    assert shown["running"] == []
    assert shown["heartbeat_age"] < 60


def test_every_api_route_is_in_the_openapi_document(client: TestClient) -> None:
    doc = client.get("/api/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    app: Any = client.app
    starlette_app = app.app  # inside the Guard
    api_paths = {r.path for r in starlette_app.routes if getattr(r, "path", "").startswith("/api")}
    assert api_paths
    assert api_paths <= set(doc["paths"])
    assert set(doc["paths"]) <= api_paths


def test_pages_are_read_only_and_carry_a_strict_csp(client: TestClient) -> None:
    page = client.get("/")
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp
    assert "default-src 'none'" in csp
    assert "unsafe-inline" not in csp
    assert page.headers["x-content-type-options"] == "nosniff"
    assert client.post("/").status_code == 405
    assert client.get("/static/app.js").headers["content-type"].startswith("text/javascript")


def _li(env: dict[str, str], cwd: Path, command: str, *args: str) -> str:
    """Run ``li run`` / ``li agent`` for real; the run id its ``--json`` line names."""
    import json
    import subprocess

    from support.cli import li_command

    proc = subprocess.run(
        li_command(command, "--json", *args),
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return str(json.loads(proc.stdout.splitlines()[-1])["run_id"])


def test_a_real_agent_run_reads_as_a_transcript(
    client: TestClient, li_env: dict[str, str], repo: Path, fake_bin: Path
) -> None:
    from support.providerkit import env_with_fake_bin

    env = env_with_fake_bin("claude/success.jsonl", base=li_env, fake_bin=fake_bin)
    run_id = _li(env, repo, "agent", "claude", "fix the test")
    page = client.get(f"/runs/{run_id}").text
    for needle in (
        "Fixing the test.",
        "tool call: Bash",
        "pytest -q",
        "1 passed",
        "Done: test fixed.",
    ):
        assert needle in page, needle
    transcript = page[page.index('id="transcript"') :]
    assert transcript.index("Fixing the test.") < transcript.index("Done: test fixed.")
    assert "fix the test" in page  # the prompt
    data = client.get(f"/api/runs/{run_id}").json()
    assert data["run"]["status"] == "completed"
    assert data["usage"]["output_tokens"] == 40


def test_a_real_command_run_shows_its_output_and_why_it_failed(
    client: TestClient, li_env: dict[str, str], tmp_path: Path
) -> None:
    run_id = _li(
        li_env, tmp_path, "run", "--", "sh", "-c", "echo out-line; echo err-line >&2; exit 3"
    )
    page = client.get(f"/runs/{run_id}").text
    assert "out-line" in page
    assert "err-line" in page
    assert "run.failed.exit_nonzero" in page
    assert 'class="chip st-failed"' in page


def test_a_running_runs_transcript_is_followed_from_its_files(
    store: Store, client: TestClient, lirun_home: Path
) -> None:
    import json as jsonlib

    make_run(store, lirun_home, "busy", status="running", reply="step one")
    page = client.get("/runs/busy").text
    assert 'data-follow="/runs/busy/transcript"' in page
    first = client.get("/runs/busy/transcript")
    assert first.status_code == 200
    assert "step one" in first.text
    signature = first.headers["x-transcript-signature"]
    assert client.get(f"/runs/busy/transcript?since={signature}").status_code == 204
    line = {"type": "assistant", "message": {"content": [{"type": "text", "text": "step two"}]}}
    with open(lirun_home / "runs" / "busy" / "stream" / "busy.jsonl", "a") as stream:
        stream.write(jsonlib.dumps(line) + "\n")
    grown = client.get(f"/runs/busy/transcript?since={signature}")
    assert grown.status_code == 200
    assert "step two" in grown.text
    assert grown.headers["x-transcript-signature"] != signature
    assert client.get("/runs/nope/transcript").status_code == 404
    store.update_status("session", "busy", new_status="completed", reason_code="run.completed.ok")
    assert "data-follow" not in client.get("/runs/busy").text  # an ended run is not followed


def test_a_scheduled_agent_or_commands_cost_is_its_sessions(
    store: Store, client: TestClient, lirun_home: Path
) -> None:
    """`li schedule add -- agent ...` runs one session, no invocation: its cost is the
    session's, not nothing."""
    now = time.time()
    raw_write(
        store,
        "INSERT INTO schedules (id, name, spec, action_kind, enabled, created_at, updated_at) "
        "VALUES ('s2', 'hourly', 'every 1h', 'agent', 1, :now, :now)",
        {"now": now},
    )
    session = make_run(store, lirun_home, "run-sched-agent")  # cost 0.0123
    run = store.schedules.create_run(action_kind="agent", schedule_id="s2")
    raw_write(
        store,
        "UPDATE schedule_runs SET session_id = :sid WHERE id = :id",
        {"sid": session["id"], "id": run.id},
    )
    store.update_status(
        "schedule_run", run.id, new_status="completed", reason_code="schedule.completed.ok"
    )
    [shown] = client.get("/api/schedules").json()["schedules"]
    assert shown["recent"][0]["cost_usd"] == pytest.approx(0.0123)
    assert shown["cost_usd"] == pytest.approx(0.0123)
    page = client.get("/schedules").text
    assert "$0.0123" in page
    # A cell of the strip opens the run it made and says why it ended.
    assert f'<a class="cell st-completed" href="/runs/{session["id"]}"' in page
    assert "completed schedule.completed.ok 20" in page


def test_a_schedule_run_links_to_what_it_ran(
    store: Store, client: TestClient, lirun_home: Path
) -> None:
    """A `li submit` run has no schedule: its row linked to '/schedules#schedule-None'.
    A schedule run that ran something links to that run; one that did not, to its
    schedule."""
    session = make_run(store, lirun_home, "run-submitted")
    submitted = store.schedules.create_run(action_kind="agent")
    raw_write(
        store,
        "UPDATE schedule_runs SET session_id = :sid WHERE id = :id",
        {"sid": session["id"], "id": submitted.id},
    )
    flow = store.invocations.create(skill="flow")
    fired = store.schedules.create_run(action_kind="flow", schedule_id="s9", invocation_id=flow.id)
    queued = store.schedules.create_run(action_kind="run", schedule_id="s9")
    queued_alone = store.schedules.create_run(action_kind="run")
    hrefs = {r["id"]: r["href"] for r in client.get("/api/runs?kind=schedule_run").json()["runs"]}
    assert hrefs == {
        submitted.id: f"/runs/{session['id']}",
        fired.id: f"/flows/{flow.id}",
        queued.id: "/schedules#schedule-s9",
        queued_alone.id: "/schedules",
    }
    assert "None" not in client.get("/?kind=schedule_run").text


FEEDBACK = (
    "the gate failed on the merge result 8c22df37d874 (run.failed.exit_nonzero); it printed nothing"
)


def test_show_board_reads_gate_verdicts_attempts_and_the_integration_head(
    store: Store, client: TestClient
) -> None:
    """The columns the shows engine writes, as `li show run` left them after a merged play
    and a play escalated by its gate: a verdict is a chip linked to its gate run, not a
    cut-off dict; attempts read 'n of m'; the integration branch and its head are shown."""
    show = store.shows.create(topic="qa")
    good = store.shows.create_play(show_id=show.id, name="good")
    bad = store.shows.create_play(show_id=show.id, name="bad")
    head = "47de1bc7bfac33cb7dbe68db4c24c1498002c90b"
    raw_write(
        store,
        "UPDATE shows SET integration = 'show/qa', integration_head = :h, base = 'main' "
        "WHERE id = :id",
        {"h": head, "id": show.id},
    )
    for play, verdict, reason, attempt, merge in (
        (good, "pass", "run.completed_empty.no_evidence", 1, head),
        (bad, "fail", "run.failed.exit_nonzero", 2, None),
    ):
        gate = {"commit": "8c22df37d8748bc1", "reason": reason, "session_id": f"gate-{attempt}"}
        raw_write(
            store,
            "UPDATE plays SET attempt = :a, attempts = 2, merge_sha = :m, merged_at = :t, "
            "gate_json = :g, worktree = :w, depends_on_json = '[]', feedback = :f WHERE id = :id",
            {
                "a": attempt,
                "m": merge,
                "t": 1796050281.5 if merge else None,
                "g": json.dumps({**gate, "verdict": verdict}),
                "w": None if merge else "/home/me/.lirun/worktrees/20261130T145121-112f81/bad",
                "f": None if merge else FEEDBACK,
                "id": play.id,
            },
        )
    page = client.get(f"/shows/{show.id}").text
    assert 'show/qa</code> at <code class="sha">47de1bc7bfac' in page
    assert ">attempt</span> 1 of 2" in page
    assert ">attempt</span> 2 of 2" in page
    assert '<span class="chip st-passed">passed</span> <code>run.completed_empty' in page
    assert '<span class="chip st-failed">failed</span> <code>run.failed.exit_nonzero' in page
    assert 'href="/runs/gate-2">gate run</a>' in page
    assert "{&#39;commit" not in page
    assert "1796050281" not in page
    assert "2026-11-30 14:51:21 UTC" in page
    # Where an escalated play's work is, whole (a person goes there); no empty lists.
    assert '<code class="path">/home/me/.lirun/worktrees/20261130T145121-112f81/bad</code>' in page
    assert "depends on json" not in page
    assert FEEDBACK in page  # why it is escalated, not its first 40 characters
    data = client.get(f"/api/shows/{show.id}").json()
    assert data["final_gate"] is None
    assert {p["gate"]["verdict"] for c in data["board"] for p in c["plays"]} == {"pass", "fail"}


def test_schedule_names_worker_hosts_and_transports_stay_text(
    store: Store, client: TestClient
) -> None:
    """The engines refuse such names, but the dashboard shows whatever a row holds."""
    from lirun.liveness import current_owner

    raw_write(
        store,
        "INSERT INTO schedules (id, name, spec, action_kind, enabled, created_at, updated_at) "
        "VALUES ('s-x', :name, :name, 'run', 1, 1.0, 1.0)",
        {"name": XSS_SCRIPT},
    )
    run = store.schedules.create_run(action_kind=XSS_IMG, schedule_id="s-x")
    store.update_status(
        "schedule_run",
        run.id,
        new_status="failed",
        reason_code="schedule.failed.action",
        reason_summary=XSS_IMG,
    )
    worker = store.workers.register(
        owner={**current_owner(), "host": XSS_IMG},
        concurrency=1,
        transport=XSS_SCRIPT,
        lease_seconds=60,
    )
    for path in ("/schedules", "/workers", "/?kind=schedule_run"):
        html = client.get(path).text
        assert XSS_SCRIPT not in html, path
        assert XSS_IMG not in html, path
        assert re.findall(r"<script[^>]*>", html) == ['<script src="/static/app.js" defer>']
        assert not re.search(r"<[^>]+\son\w+\s*=", html), path
    assert f'id="worker-{worker}"' in client.get("/workers").text


def test_lineage_names_the_schedule_run_that_made_an_agent_run(
    store: Store, client: TestClient, lirun_home: Path
) -> None:
    """A scheduled or submitted agent or command names its session, not an invocation:
    its page said it had started on its own."""
    raw_write(
        store,
        "INSERT INTO schedules (id, name, spec, action_kind, enabled, created_at, updated_at) "
        "VALUES ('s3', 'nightly-review', 'every 1h', 'agent', 1, 1.0, 1.0)",
        {},
    )
    for run_id, schedule in (("by-schedule", "s3"), ("by-submit", None)):
        make_run(store, lirun_home, run_id)
        made = store.schedules.create_run(action_kind="agent", schedule_id=schedule)
        raw_write(
            store,
            "UPDATE schedule_runs SET session_id = :sid WHERE id = :id",
            {"sid": run_id, "id": made.id},
        )
    page = client.get("/runs/by-schedule").text
    assert 'of <a href="/schedules/nightly-review">nightly-review</a>' in page
    assert "Started on its own" not in page
    page = client.get("/runs/by-submit").text
    assert "queued by li submit" in page
    assert "None" not in page
    [made] = client.get("/api/runs/by-schedule").json()["lineage"]["schedule_runs"]
    assert made["schedule_name"] == "nightly-review"


def test_a_workers_running_runs_link_to_what_they_made(
    store: Store, client: TestClient, lirun_home: Path
) -> None:
    """A worker holds schedule runs; they have no page of their own: /runs/<schedule run>
    was a 404. Each links to the run it made (or, not started yet, its schedule)."""
    from lirun.liveness import current_owner

    worker = store.workers.register(
        owner=current_owner(), concurrency=2, transport="local", lease_seconds=60
    )
    make_run(store, lirun_home, "held-session", status="running")
    held = store.schedules.create_run(action_kind="agent", schedule_id="s4")
    assert store.schedules.claim_run(held.id, worker_id=worker, lease_seconds=60)
    raw_write(
        store,
        "UPDATE schedule_runs SET session_id = 'held-session' WHERE id = :id",
        {"id": held.id},
    )
    page = client.get("/workers").text
    assert '<a href="/runs/held-session">agent ' in page
    assert f'href="/runs/{held.id}"' not in page
    [shown] = client.get("/api/workers").json()["workers"]
    assert shown["running"] == [held.id]
    assert shown["runs"][0]["href"] == "/runs/held-session"


def test_skipped_fires_are_not_failures_in_the_success_rate(
    store: Store, client: TestClient
) -> None:
    """A due time skipped because the last run was still going (overlap: skip, the
    default) ran nothing: a schedule whose every run succeeded read 50%."""
    raw_write(
        store,
        "INSERT INTO schedules (id, name, spec, action_kind, enabled, created_at, updated_at) "
        "VALUES ('s5', 'often', 'every 1m', 'run', 1, 1.0, 1.0)",
        {},
    )
    for status, reason in (
        ("completed", "schedule.completed.ok"),
        ("skipped", "schedule.skipped.overlap"),
    ):
        run = store.schedules.create_run(action_kind="run", schedule_id="s5")
        store.update_status("schedule_run", run.id, new_status=status, reason_code=reason)
    [shown] = client.get("/api/schedules").json()["schedules"]
    assert shown["success_rate"] == 1.0
    page = client.get("/schedules").text
    assert "100%" in page
    assert page.count('class="cell st-') == 2


def test_a_gate_or_an_earlier_attempt_names_its_play(
    store: Store, client: TestClient, lirun_home: Path
) -> None:
    """The shows engine notes play, show, role and attempt in a run's metadata; only the
    play's latest work run was linked, so a gate run's page did not say whose gate it was."""
    show = store.shows.create(topic="qa")
    play = store.shows.create_play(show_id=show.id, name="bad")
    meta = {"play_id": play.id, "show_id": show.id, "play": "bad", "attempt": 2}
    make_run(store, lirun_home, "gate-2", metadata_json={**meta, "role": "gate"})
    make_run(store, lirun_home, "work-1", metadata_json={**meta, "attempt": 1, "role": "agent"})
    link = f'<a href="/shows/{show.id}#play-{play.id}">bad</a>'
    assert f"gate of play {link}, attempt 2" in client.get("/runs/gate-2").text
    assert f"work of play {link}, attempt 1" in client.get("/runs/work-1").text
    assert client.get("/api/runs/gate-2").json()["play_of"]["role"] == "gate"


def test_a_running_runs_page_shows_its_provider_trouble_so_far(
    store: Store, client: TestClient, lirun_home: Path
) -> None:
    """What a running agent's row holds while the provider retries (the execution writes
    it as the events arrive): the retries so far, the last error, the model, the CLI
    version; once it ended, the same facts without "so far"."""
    trouble: dict[str, Any] = {
        "provider_retries": 3,
        "provider_error": "API retry 3/10: overloaded_error (HTTP 529)",
        "provider_version": "2.1.197",
    }
    make_run(store, lirun_home, "busy", status="running", **trouble)
    page = client.get("/runs/busy").text
    assert '<dd id="run-retries">3 so far</dd>' in page
    assert "last provider error" in page
    assert "overloaded_error (HTTP 529)" in page
    assert "claude/sonnet" in page
    assert "2.1.197" in page
    make_run(
        store,
        lirun_home,
        "done",
        status="timed_out",
        reason="run.timed_out.deadline",
        **trouble,
    )
    ended = client.get("/runs/done").text
    assert '<dd id="run-retries">3</dd>' in ended
    assert "<dt>provider error</dt>" in ended


def test_a_play_its_provider_stopped_shows_the_providers_words_and_what_to_do(
    store: Store, client: TestClient, lirun_home: Path
) -> None:
    show = store.shows.create(topic="keys")
    play = store.shows.create_play(show_id=show.id, name="login")
    make_run(
        store,
        lirun_home,
        "refused",
        status="failed",
        reason="run.failed.provider_auth",
        provider_error="Invalid API key · Please run /login",
    )
    raw_write(
        store,
        "UPDATE plays SET status = 'escalated', status_reason_code = 'play.escalated.provider', "
        "session_id = 'refused', attempt = 1, attempts = 2 WHERE id = :id",
        {"id": play.id},
    )
    page = client.get(f"/shows/{show.id}").text
    assert "the provider said" in page
    assert "Invalid API key · Please run /login" in page
    assert "what to do</span> log in or fix the API key" in page
    data = client.get(f"/api/shows/{show.id}").json()
    [shown] = [p for c in data["board"] for p in c["plays"]]
    assert shown["provider"]["class"] == "auth"

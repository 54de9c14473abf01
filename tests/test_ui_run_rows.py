"""The runs list names things by what they are: a command run by its command as typed,
a flow by its file's name, a schedule run by its schedule (folded one row per schedule
on request), a fan-out leg by its item. Real ``li`` processes, both backends; the row
rules as a table."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from lirun.store import Store
from lirun.ui.app import create_app
from lirun.ui.run_rows import command_text, describe, fold_schedules
from support.cli import li_command
from support.uikit import XSS_SCRIPT, make_run


@pytest.fixture
def client(store: Store, db_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(db_url, watch=False)) as c:
        yield c


def li(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(li_command(*args), env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("row", "kind_label", "label", "what"),
    [
        (
            {"kind": "run", "provider": "command", "command": '["sh", "-c", "echo hi"]'},
            "run",
            None,
            "sh -c 'echo hi'",
        ),
        (
            {"kind": "run", "provider": "claude", "prompt": "fix it", "command": '["claude"]'},
            "run",
            None,
            None,  # its prompt says it: sent once, as prompt
        ),
        (
            {"kind": "invocation", "origin": "flow", "label": "/tmp/abc/def/fan.yaml"},
            "flow",
            "fan.yaml",
            None,
        ),
        ({"kind": "invocation", "origin": None, "label": "review"}, "invocation", "review", None),
        (
            {"kind": "schedule_run", "origin": "flow", "label": "nightly", "parent_id": "s1"},
            "schedule run",
            "nightly",
            "flow fired by its schedule",
        ),
        (
            {"kind": "schedule_run", "origin": "agent", "parent_id": None},
            "schedule run",
            "submitted",
            "agent submitted by li submit (no schedule)",
        ),
    ],
)
def test_how_a_row_reads(row: dict[str, Any], kind_label: str, label: str, what: str) -> None:
    shown = describe(row)
    assert (shown["kind_label"], shown["label"], shown["what"]) == (kind_label, label, what)


def test_a_command_reads_as_typed_and_schedules_fold_into_their_newest_row() -> None:
    assert command_text(["git", "commit", "-m", "two words"]) == "git commit -m 'two words'"
    assert command_text("not json") is None
    assert command_text([]) is None
    rows = [
        {"kind": "schedule_run", "id": "r3", "parent_id": "a"},
        {"kind": "run", "id": "s1"},
        {"kind": "schedule_run", "id": "r2", "parent_id": "a"},
        {"kind": "schedule_run", "id": "r1", "parent_id": "b"},
    ]
    folded = fold_schedules(rows)
    assert [(r["id"], r.get("folded")) for r in folded] == [("r3", 2), ("s1", None), ("r1", 1)]


def test_the_runs_list_shows_commands_flows_and_schedules_by_name(
    store: Store, client: TestClient, tmp_path: Path, li_env: dict[str, str]
) -> None:
    ran = li(li_env, "run", "--", "sh", "-c", "echo 'a b'")
    assert ran.returncode == 0, ran.stderr
    flow_file = tmp_path / "deeply" / "nested" / "directory" / "fan-out-review.yaml"
    flow_file.parent.mkdir(parents=True)
    flow_file.write_text(
        "legs:\n  - id: each\n    for_each: [alpha, beta]\n    run: [echo, '{{ item }}']\n"
    )
    flowed = li(li_env, "flow", "run", str(flow_file))
    assert flowed.returncode == 0, flowed.stderr
    flow_id = flowed.stdout.split("\t", 1)[0].strip()
    schedule = store.schedules.create(
        name="nightly", fields={"spec": "every 1h", "action_kind": "run"}
    )
    for _ in range(3):
        store.schedules.create_run(action_kind="run", schedule_id=schedule.id)
    runs = client.get("/api/runs").json()["runs"]
    [command] = [r for r in runs if r["kind"] == "run" and not r.get("label")]
    assert command["command"] == ["sh", "-c", "echo 'a b'"]
    assert command["what"] == command["command_line"] == "sh -c 'echo '\"'\"'a b'\"'\"''"
    found = client.get("/api/runs", params={"q": "echo 'a"}).json()["runs"]
    assert [r["id"] for r in found] == [command["id"]]  # the text filter reads commands
    [flow] = [r for r in runs if r["id"] == flow_id]
    assert (flow["kind_label"], flow["label"]) == ("flow", "fan-out-review.yaml")
    assert flow["label_title"] == str(flow_file)
    scheduled = [r for r in runs if r["kind"] == "schedule_run"]
    assert len(scheduled) == 3
    assert {r["label"] for r in scheduled} == {"nightly"}
    page = client.get("/").text
    assert f'<b title="{flow_file}">fan-out-review.yaml</b>' in page
    assert "<b>nightly</b>" in page
    assert '<code class="command">sh -c' in page
    folded = client.get("/api/runs?fold=schedule").json()["runs"]
    [one] = [r for r in folded if r["kind"] == "schedule_run"]
    assert one["folded"] == 3
    assert one["href"] == "/schedules/nightly"
    assert "\u00d73" in client.get("/?fold=schedule").text  # the count of folded runs
    # a fan-out instance shows its item on its flow's page
    flow_page = client.get(f"/flows/{flow_id}").text
    assert "alpha" in flow_page
    assert "beta" in flow_page
    assert "fan-out-review.yaml" in flow_page


def test_a_schedule_name_in_the_runs_list_stays_text(store: Store, client: TestClient) -> None:
    from support.storekit import raw_write

    raw_write(
        store,
        "INSERT INTO schedules (id, name, spec, action_kind, enabled, created_at, updated_at) "
        "VALUES ('s-x', :name, 'every 1h', 'run', 1, 1.0, 1.0)",
        {"name": XSS_SCRIPT},
    )
    store.schedules.create_run(action_kind="run", schedule_id="s-x")
    for path in ("/", "/?fold=schedule"):
        page = client.get(path).text
        assert XSS_SCRIPT not in page
        assert "&lt;script&gt;" in page


def test_li_status_of_a_fan_out_flow_names_each_instances_item(
    tmp_path: Path, li_env: dict[str, str]
) -> None:
    flow_file = tmp_path / "fan.yaml"
    flow_file.write_text(
        "legs:\n  - id: each\n    for_each: [alpha, beta]\n    run: [echo, '{{ item }}']\n"
    )
    flowed = li(li_env, "flow", "run", str(flow_file))
    assert flowed.returncode == 0, flowed.stderr
    shown = li(li_env, "status", flowed.stdout.split("\t", 1)[0].strip())
    assert "each[0] (alpha)" in shown.stdout
    assert "each[1] (beta)" in shown.stdout
    # a flow is called a flow, by its file's name, with the whole path beside it
    assert re.search(r"\bflow\s+fan\.yaml\n", shown.stdout), shown.stdout
    assert re.search(rf"flow file\s+{re.escape(str(flow_file))}", shown.stdout)
    assert "skill" not in shown.stdout


def test_each_prompt_is_sent_once_and_a_long_one_is_cut_in_lists(
    store: Store, client: TestClient, lirun_home: Path
) -> None:
    """Two 2 MB prompts made a page of 8 MB (each twice, as ``prompt`` and ``what``): the
    list now sends each once and cut to 500 characters with a marker and the link to the
    answer that has it whole; a short prompt is sent whole, once."""
    big = {name: f"{name} " + "x" * (2 * 1024 * 1024) for name in ("first", "second")}
    for name, prompt in big.items():
        make_run(store, lirun_home, name, prompt=prompt)
    make_run(store, lirun_home, "short", prompt="fix the flaky test")
    answer = client.get("/api/runs")
    assert len(answer.content) < 60_000, len(answer.content)
    rows = {r["id"]: r for r in answer.json()["runs"]}
    for name, prompt in big.items():
        row = rows[name]
        assert row["prompt"] == prompt[:500] + "…"
        assert row["prompt_truncated"] is True
        assert row["what"] is None
        assert answer.text.count(prompt[:100]) == 1
        assert client.get(row["prompt_href"]).json()["run"]["prompt"] == prompt
    short = rows["short"]
    assert (short["prompt"], short["prompt_truncated"], short["what"]) == (
        "fix the flaky test",
        False,
        None,
    )
    assert "prompt_href" not in short
    assert answer.text.count("fix the flaky test") == 1
    page = client.get("/")
    assert len(page.content) < 80_000, len(page.content)
    assert "fix the flaky test" in page.text


def test_a_flows_long_prompt_is_cut_in_the_flows_list(store: Store, client: TestClient) -> None:
    flow = store.invocations.create_flow(skill="big.yaml", flow={"legs": []})
    big = "review " + "y" * (1024 * 1024)
    store.update_fields("invocation", flow.id, {"prompt": big})
    answer = client.get("/api/flows")
    assert len(answer.content) < 20_000
    [row] = answer.json()["flows"]
    assert (row["prompt"], row["prompt_truncated"]) == (big[:500] + "…", True)
    assert row["prompt_href"] == f"/api/flows/{flow.id}"
    assert client.get(row["prompt_href"]).json()["flow"]["prompt"] == big

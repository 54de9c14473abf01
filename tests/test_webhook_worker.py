"""A webhook end to end with real processes on both backends: ``li schedule add
--webhook``, a real ``li ui`` taking a signed delivery, a real ``li worker`` running the
action with ``{{ event.FIELD }}`` and ``LIRUN_EVENT``; ``li schedule show`` saying the
trigger in words; the apply file's ``webhook:`` keys, with ``file:line`` errors."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from lirun.schedules.events import MAX_EVENT_BYTES
from lirun.schedules.webhooks import sign
from support.cli import li_command
from support.workerkit import until, workers
from test_ui_cli import serve_li_ui, stop
from test_worker_poll import RECORD

SECRET = "hook-secret-0123456789"


def li(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        li_command(*args), env=env, capture_output=True, text=True, timeout=60, check=False
    )


def deliver(li_env: dict[str, str], name: str, event: dict[str, Any]) -> dict[str, Any]:
    """POST ``event``, signed, to a real ``li ui``'s hook ``name``; its 202 answer."""
    proc, url = serve_li_ui({**li_env, "PR_HOOK_SECRET": SECRET})
    try:
        body = json.dumps(event).encode()
        request = urllib.request.Request(
            f"{url}hooks/{name}",
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "X-Hub-Signature-256": sign(SECRET, body)},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.status == 202
            accepted: dict[str, Any] = json.loads(answer.read())
    finally:
        assert stop(proc) == 0
    return accepted


def add_recording_hook(
    li_env: dict[str, str], tmp_path: Path, name: str, key: str, prompt: str
) -> tuple[Any, Path]:
    """``li schedule add NAME --webhook --key KEY`` whose action writes what it was given
    (``record.py``) into the directory returned; and what ``li`` answered."""
    (tmp_path / "record.py").write_text(RECORD)
    out = tmp_path / "out"
    out.mkdir()
    added = li(
        li_env,
        "schedule", "add", name, "--webhook", "--secret-env", "PR_HOOK_SECRET", "--key", key,
        "--", "run", "--cwd", str(tmp_path), sys.executable, "record.py", str(out), prompt,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    return added, out


def test_a_delivered_event_is_run_by_a_worker_with_the_event(
    store: Any, li_env: dict[str, str], tmp_path: Path
) -> None:
    added, out = add_recording_hook(
        li_env, tmp_path, "prs", "pull_request.number",
        "Review {{ event.pull_request.number }}: {{ event.pull_request.title }}",
    )  # fmt: skip
    assert "no next run" in added.stdout
    show = li(li_env, "schedule", "show", "prs")
    assert "POST /hooks/prs" in show.stdout
    assert "$PR_HOOK_SECRET" in show.stdout
    assert "'pull_request.number'" in show.stdout
    assert SECRET not in show.stdout
    event = {"action": "opened", "pull_request": {"number": 12, "title": "Fix it"}}
    accepted = deliver(li_env, "prs", event)
    assert accepted["event_key"] == "12"
    with workers(li_env, tmp_path):
        until(lambda: (out / "seen-12").exists(), timeout=30, what="the event's run")
    seen = [json.loads(x) for x in (out / "seen-12").read_text().splitlines()]
    assert seen == [{"argv": ["Review 12: Fix it"], "event": event}]
    run = store.schedules.get_run(accepted["schedule_run_id"])
    assert run is not None
    assert run.status == "completed"
    show = li(li_env, "schedule", "show", "prs")
    assert "1 seen, 1 fired a run" in show.stdout
    listed = li(li_env, "schedule", "list")
    assert "webhook" in listed.stdout


def test_the_secret_is_stored_by_name_only(store: Any, li_env: dict[str, str]) -> None:
    env = {**li_env, "PR_HOOK_SECRET": SECRET}
    added = li(env, "schedule", "add", "h", "--webhook", "--secret-env", "PR_HOOK_SECRET",
               "--json", "--", "run", "echo", "{{ event.id }}")  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert SECRET not in added.stdout
    row = store.schedules.get("h")
    assert row is not None
    assert row.trigger_json["secret_env"] == "PR_HOOK_SECRET"
    assert SECRET not in json.dumps(row.as_dict(), default=str)


def test_schedule_add_refuses_bad_webhook_inputs(li_env: dict[str, str], store: Any) -> None:
    cases = [
        (["--webhook"], "--webhook needs --secret-env VAR"),
        (["--webhook", "--secret-env", "not a name"], "is not an environment variable name"),
        (["--webhook", "--secret-env", "S", "--every", "1m"], "cannot take --every"),
        (["--every", "1m", "--secret-env", "S"], "--secret-env belongs to a webhook"),
    ]
    for args, says in cases:
        done = li(li_env, "schedule", "add", "bad", *args, "--", "run", "echo", "{{ event.id }}")
        assert done.returncode == 2, done.stderr
        assert says in done.stderr
    assert store.schedules.get("bad") is None


def test_an_apply_file_defines_a_webhook_with_file_line_errors(
    li_env: dict[str, str], store: Any, tmp_path: Path
) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(
        "schedules:\n"
        "  - name: hook\n"
        "    webhook: true\n"
        "    secret_env: HOOK_SECRET\n"
        "    key: number\n"
        "    action: run echo '{{ event.number }}'\n"
    )
    done = li(li_env, "schedule", "apply", str(good))
    assert done.returncode == 0, done.stderr
    row = store.schedules.get("hook")
    assert row is not None
    assert row.trigger_json["kind"] == "webhook"
    assert row.trigger_json["key"] == "number"
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "schedules:\n"
        "  - name: other\n"
        "    action: run echo '{{ event.number }}'\n"
        "    webhook: yes please\n"
    )
    done = li(li_env, "schedule", "apply", str(bad))
    assert done.returncode == 2
    assert f"{bad}:4" in done.stderr
    assert "webhook" in done.stderr


def test_a_200_kb_delivery_is_shrunk_and_its_fields_reach_the_action(
    store: Any, li_env: dict[str, str], tmp_path: Path
) -> None:
    _, out = add_recording_hook(
        li_env, tmp_path, "big", "number", "Review {{ event.number }}: {{ event.title }}"
    )
    body = "b" * (200 * 1024)
    event = {"number": 7, "title": "Big", "pull_request": {"number": 7, "body": body}}
    accepted = deliver(li_env, "big", event)
    with workers(li_env, tmp_path):
        until(lambda: (out / "seen-7").exists(), timeout=30, what="the big event's run")
    (seen,) = [json.loads(x) for x in (out / "seen-7").read_text().splitlines()]
    assert seen["argv"] == ["Review 7: Big"]
    assert seen["event"]["_truncated"] == ["pull_request.body"]
    assert seen["event"]["pull_request"]["number"] == 7
    run = store.schedules.get_run(accepted["schedule_run_id"])
    assert run is not None
    assert run.status == "completed"
    assert len(run.event_json or "") <= MAX_EVENT_BYTES

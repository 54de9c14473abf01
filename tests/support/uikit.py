"""What the dashboard's tests share: records with stream files and artifacts on disk,
the XSS payloads, a real uvicorn server in a thread, and `li flow run` for a flow."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lirun.store import Store
from support.cli import li_command

# Stored text that must stay inert wherever the dashboard shows it.
XSS_SCRIPT = "<script>window.__pwned = 1; alert('script')</script>"
XSS_IMG = "<img src=x onerror=\"window.__pwned = 2; alert('img')\">"
XSS_LINK = "javascript:alert('link')"
XSS_NAME = "<img src=x onerror=alert(4)>.html"
PAYLOADS = (XSS_SCRIPT, XSS_IMG, XSS_LINK)


def claude_stream(*, text: str, tool: str = "Bash", result: str = "ok", error: bool = False) -> str:
    """A Claude Code stream-json transcript: a reply, a tool call and its result, the end."""
    uid = "11111111-1111-4111-8111-111111111111"
    lines: list[dict[str, Any]] = [
        {"type": "system", "subtype": "init", "session_id": uid, "model": "claude-sonnet-4-5"},
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": text},
                    {"type": "tool_use", "id": "t1", "name": tool, "input": {"command": text}},
                ],
            },
            "session_id": uid,
        },
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": result,
                        "is_error": error,
                    }
                ],
            },
            "session_id": uid,
        },
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "num_turns": 1,
            "result": text,
            "session_id": uid,
            "total_cost_usd": 0.01,
            "usage": {"input_tokens": 20, "output_tokens": 40},
        },
    ]
    return "".join(json.dumps(line) + "\n" for line in lines)


def make_run(
    store: Store,
    home: Path,
    run_id: str,
    *,
    prompt: str = "fix the test",
    reply: str = "Done.",
    summary: str = "",
    status: str = "completed",
    reason: str = "run.completed.ok",
    stream: str | None = None,
    artifacts: dict[str, bytes] | None = None,
    owner_host: str | None = None,
    with_files: bool = True,
    artifacts_path: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A finished agent execution with its stream file and artifacts on disk (its record
    names ``artifacts_path`` as its artifact directory, when given, not its own)."""
    run_dir = home / "runs" / run_id
    art = run_dir / "artifacts"
    if with_files:
        (run_dir / "stream").mkdir(parents=True)
        (run_dir / "stream" / f"{run_id}.jsonl").write_text(
            stream if stream is not None else claude_stream(text=reply)
        )
        art.mkdir()
        for name, data in (artifacts or {}).items():
            (art / name).parent.mkdir(parents=True, exist_ok=True)
            (art / name).write_bytes(data)
    extra: dict[str, Any] = {"owner_pid": None}
    if owner_host is not None:
        extra["owner_host"] = owner_host
    store.sessions.create(
        id=run_id,
        run_dir=str(run_dir),
        artifacts_path=artifacts_path or str(art),
        provider="claude",
        model="sonnet",
        prompt=prompt,
        **extra,
        **fields,
    )
    store.update_fields(
        "session",
        run_id,
        {"reply_text": reply, "input_tokens": 20, "output_tokens": 40, "cost_usd": 0.0123},
    )
    if status != "running":
        store.update_status(
            "session",
            run_id,
            new_status=status,
            reason_code=reason,
            reason_summary=summary,
            evidence_refs=[{"kind": "assistant_output", "label": "reply"}],
        )
    row = store.get_entity("session", run_id)
    assert row is not None
    return row


def run_flow(tmp: Path, env: dict[str, str], text: str) -> str:
    """Run a flow file with `li flow run`; the invocation id (first field of stdout)."""
    path = tmp / "flow.yaml"
    path.write_text(text)
    proc = subprocess.run(
        li_command("flow", "run", str(path)), env=env, capture_output=True, text=True, timeout=60
    )
    return proc.stdout.split("\t", 1)[0].strip()


def add_hourly_schedule(store: Store, env: dict[str, str]) -> Any:
    """``li schedule add tick --every 1h -- run true`` through the CLI; its row."""
    added = subprocess.run(
        li_command("schedule", "add", "tick", "--every", "1h", "--", "run", "true"),
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    [schedule] = store.schedules.list_all()
    return schedule


def free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextmanager
def serve(db_url: str, *, token: str | None = None) -> Iterator[str]:
    """A real uvicorn server for the dashboard in a thread; yields its base URL."""
    from lirun.ui.app import create_app
    from lirun.ui.security import LOCAL_HOSTS
    from lirun.ui.server import DashboardServer

    sock = free_socket()
    port = sock.getsockname()[1]
    app = create_app(db_url, token=token, allowed_hosts=LOCAL_HOSTS)
    server = DashboardServer(app)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the dashboard server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()

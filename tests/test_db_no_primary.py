"""A command started while no server takes writes (issue 33): between a primary's loss
and its standby's promotion, the standby answers and turns lirun's read-write request
away. A `li run` or a flow started then waits for the promotion (up to
``LIRUN_WRITE_RETRY_SECONDS``) instead of failing its setup; a URL whose servers all
refuse connections still fails at once.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from lirun.store import open_store
from support.cli import li_command
from support.pgcluster import free_port
from support.pgreplica import ReplicaPair

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

FLOW = """\
legs:
  - id: one
    run: [sh, -c, "true"]
  - id: two
    depends_on: [one]
    run: [sh, -c, "true"]
"""


def start_li(*args: str, cwd: Path, **env: str) -> subprocess.Popen[str]:
    clean = {k: v for k, v in os.environ.items() if k != "LIRUN_DB_URL"}
    return subprocess.Popen(
        li_command(*args), cwd=cwd, env={**clean, **env},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def status_on(url: str, run_id: str) -> str | None:
    store = open_store(url, readonly=True)
    try:
        row = store.sessions.get(run_id)
    finally:
        store.close()
    return row.status if row else None


def test_a_run_and_a_flow_started_before_the_promotion_wait_for_it(
    pg_pair: ReplicaPair, tmp_path: Path
) -> None:
    url = pg_pair.url(standby_first=True, schema="np")
    open_store(url).close()  # the schema, on the primary
    pg_pair.wait_replayed()
    (tmp_path / "flow.yaml").write_text(FLOW)
    assert pg_pair.standby is not None
    pg_pair.primary.crash()  # only the standby answers now
    run = start_li("--db", url, "run", "--run-id", "np-run", "--", "true", cwd=tmp_path)
    flow = start_li("--db", url, "flow", "run", "flow.yaml", "--json", cwd=tmp_path)
    time.sleep(4)
    assert run.poll() is None, run.communicate()  # waiting, not failed
    assert flow.poll() is None, flow.communicate()
    pg_pair.standby.promote()
    promoted = time.monotonic()
    _, err = run.communicate(timeout=60)
    assert run.returncode == 0, err
    flow_out, flow_err = flow.communicate(timeout=60)
    assert flow.returncode == 0, flow_err
    assert time.monotonic() - promoted < 20
    new_primary = f"{pg_pair.standby.url}?schema=np"
    assert status_on(new_primary, "np-run") == "completed"
    assert '"status": "completed"' in flow_out.replace('":"', '": "')
    assert "Traceback" not in err + flow_err


def test_servers_that_all_refuse_fail_at_once(tmp_path: Path) -> None:
    ports = f"127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
    url = f"postgresql://postgres@{ports}/postgres?schema=np"
    began = time.monotonic()
    run = start_li("--db", url, "run", "--", "true", cwd=tmp_path)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 2, err
    assert time.monotonic() - began < 10
    assert "Connection refused" in err or "connection refused" in err.lower()


def test_a_standby_alone_is_given_up_on_after_the_write_retry_bound(
    pg_pair: ReplicaPair, tmp_path: Path
) -> None:
    url = pg_pair.url(standby_first=True, schema="np2")
    open_store(url).close()
    pg_pair.wait_replayed()
    pg_pair.primary.crash()
    began = time.monotonic()
    run = start_li("--db", url, "run", "--", "true", cwd=tmp_path, LIRUN_WRITE_RETRY_SECONDS="3")
    _, err = run.communicate(timeout=60)
    assert run.returncode == 2, err
    assert 3 <= time.monotonic() - began < 15
    assert "accepts writes" in err, err

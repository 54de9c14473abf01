"""The store's flow records on both backends: the invocation's owner and heartbeat, the
stored flow, usage sums, and what a reaper lists."""

from __future__ import annotations

import time

from lirun.liveness import current_owner
from lirun.store import Store


def test_a_flow_invocation_records_its_owner_flow_and_usage(store: Store) -> None:
    before = time.time()
    row = store.invocations.create_flow(
        id="flow-1", flow={"spec": {"legs": []}, "graph": []}, flow_digest="sha256:1", run_dir="/r"
    )
    assert (row.kind, row.status, row.skill) == ("flow", "running", "flow")
    assert row.owner_pid == current_owner()["owner_pid"]
    assert row.heartbeat_at is not None
    assert row.heartbeat_at >= before
    assert row.flow_json == {"spec": {"legs": []}, "graph": []}
    assert [r.id for r in store.invocations.list_running_flows()] == ["flow-1"]
    store.invocations.create(skill="manual", id="manual-1")  # kind NULL: never a flow
    assert [r.id for r in store.invocations.list_running_flows()] == ["flow-1"]

    version = row.updated_at
    store.invocations.flow_heartbeat("flow-1")
    beat = store.get_entity("invocation", "flow-1") or {}
    assert beat["heartbeat_at"] >= row.heartbeat_at
    assert beat["updated_at"] == version

    for n, (tokens, cost) in enumerate([(10, 0.5), (5, None)]):
        store.sessions.create(
            id=f"leg-{n}",
            invocation_id="flow-1",
            flow_leg=f"a[{n}]",
            attempt=1,
            input_tokens=tokens,
            output_tokens=tokens,
            cost_usd=cost,
        )
    assert [r.id for r in store.invocations.list_running_legs("flow-1")] == ["leg-0", "leg-1"]
    store.invocations.set_flow_json("flow-1", {"graph": [{"id": "a[0]"}]})
    store.invocations.sum_flow_usage("flow-1")
    summed = store.get_entity("invocation", "flow-1") or {}
    assert (summed["input_tokens"], summed["output_tokens"], summed["cost_usd"]) == (15, 15, 0.5)
    assert summed["flow_json"] == {"graph": [{"id": "a[0]"}]}
    leg = store.get_entity("session", "leg-1") or {}
    assert (leg["flow_leg"], leg["attempt"], leg["retry_of"]) == ("a[1]", 1, None)

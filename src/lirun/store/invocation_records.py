"""Invocations (manual, a skill's, or a flow), ``store.invocations`` (flows in
``sql/<dialect>/flows.sql``, migration 0005).

A flow is one invocation row of kind ``flow`` with an owner that heartbeats (as a running
session has), the resolved flow as JSON, and its run directory; its legs are sessions
with ``invocation_id`` set. Callers above the store name what they want, never a query.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from lirun.hints import Any
from lirun.store.records import column_values, decode_row, entity_id_or_new, require_text, to_json
from lirun.store.repository import Repository
from lirun.store.retry import retry_write
from lirun.store.rows import InvocationRow, SessionRow

FLOW_KIND = "flow"


class Invocations(Repository):
    """``store.invocations``: invocations, and the flows among them."""

    def create(
        self, *, skill: str, prompt: str | None = None, id: str | None = None
    ) -> InvocationRow:
        """Create an invocation row (``running``); ValidationError for an empty skill or bad id."""
        require_text(skill=skill)
        fields = column_values({"skill": skill, "prompt": prompt})
        return InvocationRow.from_row(
            self.store.insert("invocation", {"id": entity_id_or_new(id), **fields})
        )

    def get(self, invocation_id: str) -> InvocationRow | None:
        """The invocation (manual or flow) with this id, or None."""
        rows = self.connector.read(self.sql("get_row", table="invocations"), {"id": invocation_id})
        return InvocationRow.from_row(decode_row(rows[0])) if rows else None

    def create_flow(
        self,
        *,
        id: str | None = None,
        skill: str = FLOW_KIND,
        flow: Mapping[str, Any],
        flow_digest: str | None = None,
        run_dir: str | None = None,
        artifacts_path: str | None = None,
        resumed_from: str | None = None,
        lease_seconds: float | None = None,
    ) -> InvocationRow:
        """A ``running`` invocation of kind ``flow`` owned by this process (pid, start
        time, host, boot id) with a first heartbeat; ValidationError for a bad id."""
        from lirun.liveness import DEFAULT_LEASE_SECONDS, current_owner

        fields = column_values(
            {
                "skill": skill or FLOW_KIND,
                "kind": FLOW_KIND,
                "flow_digest": flow_digest,
                "run_dir": run_dir,
                "artifacts_path": artifacts_path,
                "resumed_from": resumed_from,
                "heartbeat_at": time.time(),
                "lease_seconds": lease_seconds or DEFAULT_LEASE_SECONDS,
                **current_owner(),
            }
        )
        fields["flow_json"] = to_json(dict(flow), "flow")
        return InvocationRow.from_row(
            self.store.insert("invocation", {"id": entity_id_or_new(id), **fields})
        )

    def flow_heartbeat(self, invocation_id: str) -> None:
        """The flow's owner is alive now."""
        from lirun.liveness import DEFAULT_LEASE_SECONDS

        params = {"id": invocation_id, "now": time.time(), "lease": DEFAULT_LEASE_SECONDS}
        with self.connector.write() as tx:
            tx.execute(self.sql("flow_heartbeat"), params)

    def set_flow_json(self, invocation_id: str, flow: Mapping[str, Any]) -> None:
        """Replace the stored flow (the leg graph grows as fan-outs expand)."""
        params = {"id": invocation_id, "flow_json": to_json(dict(flow), "flow")}
        with self.connector.write() as tx:
            tx.execute(self.sql("set_flow_json"), params)

    def sum_flow_usage(self, invocation_id: str) -> None:
        """Sum the legs' tokens and cost onto the invocation row."""
        with self.connector.write() as tx:
            tx.execute(self.sql("sum_flow_usage"), {"id": invocation_id})

    def record_flow_end(self, invocation_id: str, flow: Mapping[str, Any]) -> None:
        """The ended flow's graph and its legs' usage summed, each write retried while the
        database is away (a failover) as a status write is, so the flow's end is recorded
        on the primary that answers instead of leaving its row running with no report."""
        where = self.connector.display_url
        retry_write(lambda _w, _t: self.set_flow_json(invocation_id, flow), where=where)
        retry_write(lambda _w, _t: self.sum_flow_usage(invocation_id), where=where)

    def list_running_flows(self) -> list[InvocationRow]:
        """Flow invocations still ``running`` (what a reaper judges), oldest first."""
        rows = self.connector.read(self.sql("list_running_flows"))
        return [InvocationRow.from_row(decode_row(r)) for r in rows]

    def list_running_legs(self, invocation_id: str) -> list[SessionRow]:
        """The sessions of one invocation still ``running``."""
        rows = self.connector.read(self.sql("list_running_legs"), {"invocation_id": invocation_id})
        return [SessionRow.from_row(decode_row(r)) for r in rows]

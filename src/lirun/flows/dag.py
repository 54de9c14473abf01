"""The leg graph as a picture (``flow_dag.png``, with Graphviz ``dot``) and as text.

Both read either a ``FlowSpec`` (before a run: no statuses) or a flow report (after or
during one: each leg's status). A fan-out leg with many instances is drawn as one node
that counts its instances by status, so a 1,000-item fan-out stays a readable picture.
Without ``dot`` the picture is skipped and that is said once per process on stderr.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from shutil import which
from typing import Any

from lirun.flows.spec import FlowSpec
from lirun.logs import get_logger
from lirun.orchestra.graph import topo_order

__all__ = [
    "COLLAPSE_OVER",
    "DagNode",
    "dag_nodes",
    "dot_quote",
    "dot_source",
    "draw_dag",
    "graph_lines",
]

COLLAPSE_OVER = 12  # instances of one fan-out leg drawn one by one up to this many
DOT_TIMEOUT_SECONDS = 30.0

# Fill colours by status; a status not listed (pending, unknown) is white.
_FILL = {
    "completed": "#b7e4b0",
    "completed_empty": "#ffd8a8",
    "failed": "#ffa8a8",
    "timed_out": "#e5b3f0",
    "aborted": "#d0d0d0",
    "cancelled": "#d0d0d0",
    "running": "#fff3a8",
    "stopped": "#eeeeee",
}
_warned = False
log = get_logger(__name__)


def _field(leg: object, name: str) -> Any:
    """A leg report's field, from the report object or its ``to_dict()`` form."""
    if isinstance(leg, Mapping):
        return leg.get(name)
    return getattr(leg, name, None)


@dataclass(frozen=True, slots=True)
class DagNode:
    """One drawn node: a leg, an instance, or a collapsed fan-out (``count`` > 1)."""

    id: str
    label: str
    status: str | None
    depends_on: tuple[str, ...]  # node ids
    reused: bool = False
    count: int = 1


def _spec_nodes(spec: FlowSpec) -> list[DagNode]:
    ids = {leg.id: (f"{leg.id}[*]" if leg.for_each is not None else leg.id) for leg in spec.legs}
    nodes = []
    by_id = {leg.id: leg for leg in spec.legs}  # not spec.leg(): a scan per leg
    for leg_id in topo_order({leg.id: leg.depends_on for leg in spec.legs}):
        leg = by_id[leg_id]
        label = ids[leg.id]
        if leg.for_each is not None and leg.for_each.items is not None:
            label += f"\n{len(leg.for_each.items)} item(s)"
        elif leg.for_each is not None:
            label += f"\nitems from {leg.for_each.artifact}"
        deps = tuple(ids[d] for d in leg.depends_on if d in ids)
        nodes.append(DagNode(id=ids[leg.id], label=label, status=None, depends_on=deps))
    return nodes


def _summary(statuses: Iterable[str]) -> str:
    counts: dict[str, int] = {}
    for status in statuses:
        counts[status] = counts.get(status, 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


def _worst(statuses: Sequence[str]) -> str:
    for status in ("failed", "timed_out", "cancelled", "aborted", "running", "completed_empty"):
        if status in statuses:
            return status
    return statuses[0] if statuses else "completed"


def _report_nodes(legs: Sequence[object]) -> list[DagNode]:
    groups: dict[str, list[object]] = {}
    for leg in legs:
        groups.setdefault(str(_field(leg, "leg") or _field(leg, "id")), []).append(leg)
    node_of: dict[str, list[str]] = {}  # a leg id or an instance id → its drawn node ids
    for name, members in groups.items():
        collapse = len(members) > COLLAPSE_OVER
        ids = [str(_field(m, "id")) for m in members]
        for ident in ids:
            node_of[ident] = [f"{name}[*]"] if collapse else [ident]
        node_of[name] = [f"{name}[*]"] if collapse else ids
    nodes: list[DagNode] = []
    for name, members in groups.items():
        deps: list[str] = []
        for dep in _field(members[0], "depends_on") or ():
            for target in node_of.get(str(dep), []):
                if target not in deps:
                    deps.append(target)
        statuses = [str(_field(m, "status")) for m in members]
        if len(members) > COLLAPSE_OVER:
            label = f"{name}[*]\n{_summary(statuses)}"
            nodes.append(
                DagNode(f"{name}[*]", label, _worst(statuses), tuple(deps), count=len(members))
            )
            continue
        for leg, status in zip(members, statuses, strict=True):
            ident = str(_field(leg, "id"))
            reused = bool(_field(leg, "reused"))
            label = f"{ident}\n{status}{' (reused)' if reused else ''}"
            nodes.append(DagNode(ident, label, status, tuple(deps), reused=reused))
    return nodes


def dag_nodes(source: FlowSpec | Any) -> list[DagNode]:
    """The nodes to draw for a FlowSpec or a flow report: an object with ``legs``, or its
    ``to_dict()`` form, whose legs have ``id``, ``leg``, ``status`` and ``depends_on``."""
    if isinstance(source, FlowSpec):
        return _spec_nodes(source)
    legs = source.get("legs") if isinstance(source, Mapping) else source.legs
    return _report_nodes(list(legs or ()))


def dot_quote(text: str) -> str:
    """``text`` as a quoted Graphviz ID."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def dot_source(nodes: Sequence[DagNode]) -> str:
    """The Graphviz text: dependencies point at the legs that need them."""
    lines = [
        "digraph flow {",
        "  rankdir=LR;",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fillcolor="#ffffff"];',
    ]
    for node in nodes:
        attrs = [
            f"label={dot_quote(node.label)}",
            f'fillcolor="{_FILL.get(node.status or "", "#ffffff")}"',
        ]
        if node.reused:
            attrs.append('style="rounded,filled,dashed"')
        if node.count > 1:
            attrs.append("peripheries=2")
        lines.append(f"  {dot_quote(node.id)} [{', '.join(attrs)}];")
    for node in nodes:
        for dep in node.depends_on:
            lines.append(f"  {dot_quote(dep)} -> {dot_quote(node.id)};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def graph_lines(source: FlowSpec | Any) -> list[str]:
    """The graph as text, one node a line in dependency order: ``id  status  <- deps``."""
    nodes = dag_nodes(source)
    width = min(32, max((len(n.id) for n in nodes), default=0))
    out = []
    for node in nodes:
        status = node.status or ""
        if node.count > 1:
            status = node.label.split("\n", 1)[1]
        elif node.reused:
            status += " (reused)"
        cells = [node.id.ljust(width), status]
        if node.depends_on:
            cells.append(f"<- {', '.join(node.depends_on)}")
        out.append("  ".join(cell for cell in cells if cell).rstrip())
    return out


def draw_dag(
    source: FlowSpec | Any,
    path: str | os.PathLike[str],
) -> bool:
    """Draw ``flow_dag.png`` at ``path``; True when drawn. Without ``dot`` (said once per
    process, as a warning on ``lirun.flows.dag``) or when it fails (each time), False;
    never raises."""
    global _warned
    dot = which("dot")
    if dot is None:
        if not _warned:
            _warned = True
            log.warning(
                "%s skipped: Graphviz dot is not installed (install graphviz)", Path(path).name,
                extra={"event": "flow.dag_skipped"},
            )  # fmt: skip
        return False
    target = Path(path)
    partial = target.with_name(f".{target.name}.partial")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            [dot, "-Tpng", "-o", str(partial)],
            input=dot_source(dag_nodes(source)),
            capture_output=True,
            text=True,
            timeout=DOT_TIMEOUT_SECONDS,
        )
        if proc.returncode != 0:
            detail = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[0]
            log.warning(
                "%s not drawn: dot failed: %s", target.name, detail,
                extra={"event": "flow.dag_failed"},
            )  # fmt: skip
            return False
        os.replace(partial, target)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("%s not drawn: %s", target.name, exc, extra={"event": "flow.dag_failed"})
        return False
    finally:
        if partial.exists():
            partial.unlink(missing_ok=True)
    return True

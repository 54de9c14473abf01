"""A flow's leg graph as SVG for the flow page: each node coloured by status and linked
to its run. With Graphviz ``dot`` the layout is dot's (``flows/dag.py`` writes the
source); without it a simple picture is drawn here, legs layered by depth.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from shutil import which

from markupsafe import Markup, escape

from lirun.flows.dag import DagNode, dot_quote, dot_source

DOT_TIMEOUT_SECONDS = 10.0
FILL = {
    "completed": "#b7e4b0",
    "completed_empty": "#ffd8a8",
    "failed": "#ffa8a8",
    "timed_out": "#e5b3f0",
    "aborted": "#d0d0d0",
    "cancelled": "#d0d0d0",
    "running": "#fff3a8",
}
_BOX_W, _BOX_H, _GAP_X, _GAP_Y = 170, 44, 50, 18


def _svg_body(svg: str) -> str | None:
    """dot's output from ``<svg`` on (no XML prolog or doctype inside a page), or None
    if it holds anything a page must not inline."""
    start = svg.find("<svg")
    if start < 0:
        return None
    body = svg[start:]
    lowered = body.lower()
    if "<script" in lowered or "javascript:" in lowered or "<foreignobject" in lowered:
        return None
    return body


def dot_svg(nodes: Sequence[DagNode], links: Mapping[str, str]) -> str | None:
    """The graph drawn by ``dot -Tsvg``, or None without dot (or when it fails)."""
    dot = which("dot")
    if dot is None or not nodes:
        return None
    source = dot_source(nodes).rstrip().removesuffix("}")
    extra = [
        f'  {dot_quote(node)} [URL={dot_quote(href)}, target="_top"];'
        for node, href in links.items()
    ]
    text = source + "\n".join(extra) + "\n}\n"
    try:
        proc = subprocess.run(
            [dot, "-Tsvg"], input=text, capture_output=True, text=True, timeout=DOT_TIMEOUT_SECONDS
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return _svg_body(proc.stdout) if proc.returncode == 0 else None


def depths(nodes: Sequence[DagNode]) -> dict[str, int]:
    """Each node's layer: 0 without dependencies, else one more than its deepest one."""
    by_id = {n.id: n for n in nodes}
    memo: dict[str, int] = {}

    def depth(node_id: str, seen: frozenset[str]) -> int:
        if node_id in memo:
            return memo[node_id]
        node = by_id.get(node_id)
        deps = [d for d in (node.depends_on if node else ()) if d in by_id and d not in seen]
        memo[node_id] = 1 + max((depth(d, seen | {node_id}) for d in deps), default=-1)
        return memo[node_id]

    return {n.id: depth(n.id, frozenset()) for n in nodes}


def simple_svg(nodes: Sequence[DagNode], links: Mapping[str, str]) -> str:
    """The graph drawn without Graphviz: columns by depth, boxes in order, straight edges."""
    layer = depths(nodes)
    place: dict[str, tuple[int, int]] = {}
    rows: dict[int, int] = {}
    for node in nodes:
        col = layer[node.id]
        place[node.id] = (col, rows.get(col, 0))
        rows[col] = rows.get(col, 0) + 1
    width = (max(layer.values(), default=0) + 1) * (_BOX_W + _GAP_X) + _GAP_X
    height = max(rows.values(), default=1) * (_BOX_H + _GAP_Y) + _GAP_Y

    def xy(node_id: str) -> tuple[int, int]:
        col, row = place[node_id]
        return _GAP_X + col * (_BOX_W + _GAP_X), _GAP_Y + row * (_BOX_H + _GAP_Y)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="dag" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}">'
    ]
    for node in nodes:
        x2, y2 = xy(node.id)
        for dep in node.depends_on:
            if dep in place:
                x1, y1 = xy(dep)
                parts.append(
                    f'<line x1="{x1 + _BOX_W}" y1="{y1 + _BOX_H // 2}" x2="{x2}" '
                    f'y2="{y2 + _BOX_H // 2}" stroke="#888"/>'
                )
    for node in nodes:
        x, y = xy(node.id)
        fill = FILL.get(node.status or "", "#ffffff")
        lines = node.label.split("\n")[:2]
        text = "".join(
            f'<text x="{x + 8}" y="{y + 18 + 16 * i}" font-size="12">{escape(line[:28])}</text>'
            for i, line in enumerate(lines)
        )
        box = (
            f'<g class="node" data-status="{escape(node.status or "")}">'
            f'<rect x="{x}" y="{y}" rx="6" width="{_BOX_W}" height="{_BOX_H}" '
            f'fill="{fill}" stroke="#555"/>{text}</g>'
        )
        href = links.get(node.id)
        parts.append(f'<a href="{escape(href)}">{box}</a>' if href else box)
    parts.append("</svg>")
    return "".join(parts)


def flow_svg(nodes: Sequence[DagNode], links: Mapping[str, str]) -> Markup:
    """The graph as inline SVG: dot's when it can, else the simple one."""
    return Markup(dot_svg(nodes, links) or simple_svg(nodes, links))

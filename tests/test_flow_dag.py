"""flow_dag.png with Graphviz (installed in CI), the graph as text, and the skip without dot."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lirun.exec.task import Task
from lirun.flows import dag
from lirun.flows.dag import COLLAPSE_OVER, dag_nodes, dot_source, draw_dag, graph_lines
from lirun.flows.spec import FlowSpec, ForEach, LegSpec
from support.system import need_graphviz

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def spec() -> FlowSpec:
    def leg(leg_id: str, *deps: str, for_each: ForEach | None = None) -> LegSpec:
        return LegSpec(id=leg_id, task=Task(run=("true",)), depends_on=deps, for_each=for_each)

    return FlowSpec(
        legs=(
            leg("review", "plan", for_each=ForEach(artifact="plan.files")),
            leg("plan"),
            leg("lint", "plan", for_each=ForEach(items=("a", "b"))),
            leg("join", "review", "lint"),
        ),
        cwd="/x",
    )


@dataclass
class Leg:
    id: str
    leg: str
    status: str
    depends_on: tuple[str, ...] = ()
    reused: bool = False


@dataclass
class Report:
    legs: tuple[Leg, ...]


def report() -> Report:
    return Report(
        legs=(
            Leg("plan", "plan", "completed", reused=True),
            Leg("review[0]", "review", "completed", ("plan",)),
            Leg("review[1]", "review", "failed", ("plan",)),
            Leg("join", "join", "cancelled", ("review",)),
        )
    )


def test_nodes_of_a_spec_in_dependency_order() -> None:
    nodes = dag_nodes(spec())
    assert [n.id for n in nodes] == ["plan", "review[*]", "lint[*]", "join"]
    assert nodes[3].depends_on == ("review[*]", "lint[*]")
    assert "items from plan.files" in nodes[1].label
    assert "2 item(s)" in nodes[2].label
    assert {n.status for n in nodes} == {None}


def test_nodes_of_a_report_and_of_its_dict_form_agree() -> None:
    nodes = dag_nodes(report())
    assert [(n.id, n.status, n.depends_on) for n in nodes] == [
        ("plan", "completed", ()),
        ("review[0]", "completed", ("plan",)),
        ("review[1]", "failed", ("plan",)),
        ("join", "cancelled", ("review[0]", "review[1]")),
    ]
    assert nodes[0].reused
    as_dict: dict[str, Any] = {"legs": [vars(leg) for leg in report().legs]}
    assert dag_nodes(as_dict) == nodes


def test_a_large_fan_out_is_one_node_counting_statuses() -> None:
    many = tuple(
        Leg(f"r[{i}]", "r", "failed" if i == 3 else "completed", ("a",))
        for i in range(COLLAPSE_OVER + 1)
    )
    nodes = dag_nodes(
        Report(legs=(Leg("a", "a", "completed"), *many, Leg("z", "z", "completed", ("r",))))
    )
    assert [n.id for n in nodes] == ["a", "r[*]", "z"]
    assert nodes[1].status == "failed"
    assert nodes[1].count == COLLAPSE_OVER + 1
    assert f"{COLLAPSE_OVER} completed, 1 failed" in nodes[1].label
    assert nodes[2].depends_on == ("r[*]",)


def test_dot_source_colours_by_status_and_escapes_labels() -> None:
    source = dot_source(dag_nodes(report()))
    assert source.startswith("digraph flow {")
    assert source.rstrip().endswith("}")
    assert '"review[1]" [label="review[1]\\nfailed", fillcolor="#ffa8a8"]' in source
    assert '"plan" -> "review[0]";' in source
    assert "dashed" in source
    quoted = dot_source(dag_nodes(Report(legs=(Leg('say"hi', 'say"hi', "completed"),))))
    assert '"say\\"hi"' in quoted


def test_graph_lines() -> None:
    assert graph_lines(spec()) == [
        "plan",
        "review[*]  <- plan",
        "lint[*]    <- plan",
        "join       <- review[*], lint[*]",
    ]
    lines = graph_lines(report())
    assert lines[0] == "plan       completed (reused)"
    assert lines[3] == "join       cancelled  <- review[0], review[1]"


@pytest.mark.graphviz
def test_draw_dag_writes_a_png(tmp_path: Path) -> None:
    need_graphviz()
    target = tmp_path / "artifacts" / "flow_dag.png"
    assert draw_dag(report(), target) is True
    assert target.read_bytes().startswith(PNG_MAGIC)
    assert draw_dag(spec(), target) is True
    assert [p.name for p in target.parent.iterdir()] == ["flow_dag.png"]


def test_without_dot_the_picture_is_skipped_and_said_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(dag, "_warned", False)
    target = tmp_path / "flow_dag.png"
    with caplog.at_level(logging.WARNING, logger="lirun.flows.dag"):
        assert draw_dag(spec(), target) is False
        assert draw_dag(report(), target) is False
    said = [r.getMessage() for r in caplog.records]
    assert said == ["flow_dag.png skipped: Graphviz dot is not installed (install graphviz)"]
    assert not target.exists()


def test_a_failing_dot_is_reported_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "dot"
    fake.write_text("#!/bin/sh\necho 'syntax error in line 1' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    with caplog.at_level(logging.WARNING, logger="lirun.flows.dag"):
        assert draw_dag(spec(), tmp_path / "flow_dag.png") is False
    said = [r.getMessage() for r in caplog.records]
    assert said == ["flow_dag.png not drawn: dot failed: syntax error in line 1"]
    assert list(tmp_path.glob("*.png")) == []
    assert list(tmp_path.glob(".*partial")) == []

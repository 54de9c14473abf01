"""Hostile flow files get one clear line: templates nested past the parser's stack,
renders that would loop for minutes or write gigabytes, dependency chains of 10,000 legs,
non-finite timeouts. Each is refused (or bounded) with exit 2 and a ``file:line`` line,
no traceback and nothing written; a SIGTERM during a render stops it and starts no leg."""

from __future__ import annotations

import json
import random
import signal
import textwrap
import time
from pathlib import Path

import pytest

from lirun.flows.templates import RenderStopped, TemplateError, references, render
from lirun.orchestra.graph import Reach, ancestors, comparable_to_all, find_cycle, topo_order
from support.execkit import opened_store, poll, run_li, start_li

CONTEXT = {"vars": {}, "legs": {"a": {"reply": "hi"}}}
SPIN = "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}"


def write(directory: Path, text: str, name: str = "flow.yaml") -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def one_leg(directory: Path, template: str) -> Path:
    return write(directory, "legs:\n  - id: a\n    run: [echo, " + json.dumps(template) + "]\n")


DEEP = {
    "3,000 nested parentheses": "{{ " + "(" * 3000 + "1" + ")" * 3000 + " }}",
    "2,000 nested ifs": "{% if 1 %}" * 2000 + "x" + "{% endif %}" * 2000,
    "5,000 chained filters": "{{ 1" + "|string" * 5000 + " }}",
    "5,000 nested lists": "{{ " + "[" * 5000 + "]" * 5000 + " }}",
    "3,000 chained additions": "{{ 1" + " + 1" * 3000 + " }}",
    "3,000 attribute steps": "{{ vars" + ".a" * 3000 + " }}",
}


@pytest.mark.parametrize("template", DEEP.values(), ids=DEEP.keys())
def test_a_template_too_deep_is_one_line_not_a_recursion_traceback(
    tmp_path: Path, lirun_home: Path, template: str
) -> None:
    path = one_leg(tmp_path, template)
    for dry in (["--dry-run"], []):
        result = run_li("flow", "run", *dry, str(path), env=_env(lirun_home), cwd=tmp_path)
        assert result.returncode == 2, result.stderr[-2000:]
        assert "Traceback" not in result.stderr
        assert "RecursionError" not in result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 2, lines[:5]
        assert lines[1].strip().startswith(f"{path}:3: leg 'a': run: template error"), lines
        assert not (lirun_home / "state.db").exists()  # nothing written


@pytest.mark.parametrize("template", DEEP.values(), ids=DEEP.keys())
def test_render_of_a_template_too_deep_is_a_template_error(template: str) -> None:
    with pytest.raises(TemplateError, match="template error"):
        references(template)
    with pytest.raises(TemplateError, match="template error"):
        render(template, CONTEXT)


def test_templates_within_the_bounds_still_render() -> None:
    nested = "{{ " + "(" * 20 + "1" + ")" * 20 + " }}"
    blocks = "{% if 1 %}" * 20 + "x" + "{% endif %}" * 20
    chain = "{{ 'a'" + "|upper" * 50 + " }}"
    assert render(nested, CONTEXT) == "1"
    assert render(blocks, CONTEXT) == "x"
    assert render(chain, CONTEXT) == "A"
    assert render("{{ 'ab' * 3 }} {{ 2 ** 10 }}", CONTEXT) == "ababab 1024"


def test_a_render_that_loops_too_long_ends_at_its_time_bound() -> None:
    started = time.monotonic()
    with pytest.raises(TemplateError, match=r"longer than 0\.5s"):
        render(SPIN, CONTEXT, seconds=0.5)
    assert time.monotonic() - started < 10  # 99999² iterations would take hours


def test_a_render_stops_when_asked_and_says_so_apart_from_a_template_error() -> None:
    asked = time.monotonic() + 0.3
    with pytest.raises(RenderStopped):
        render(SPIN, CONTEXT, should_stop=lambda: time.monotonic() > asked)


@pytest.mark.parametrize(
    ("template", "match"),
    [
        ("{% for i in range(99999) %}{{ 'x' * 100 }}{% endfor %}", "output passed"),
        ("{{ 'a' * 100000000 }}", "bound of a template"),
        ("{{ [1] * 100000000 }}", "bound of a template"),
        ("{{ 10 ** 100000 }}", "too large a number"),
    ],
)
def test_a_render_cannot_write_or_build_without_bound(template: str, match: str) -> None:
    with pytest.raises(TemplateError, match=match):
        render(template, CONTEXT)


def test_sigterm_during_a_render_ends_the_flow_and_starts_no_leg(
    tmp_path: Path, db_url: str, li_env: dict[str, str]
) -> None:
    """Before: SIGTERM waited for the render to finish (448 s with range(99999)), then
    the leg was created and completed. Now the render ends at once and no leg starts."""
    path = write(
        tmp_path,
        f"""
        legs:
          - id: spin
            run: [echo, "{SPIN}"]
        """,
    )
    proc = start_li("flow", "run", str(path), env=li_env, cwd=tmp_path)
    try:

        def flow_row() -> bool:
            try:
                with opened_store(db_url) as store:
                    return bool(store.invocations.list_running_flows())
            except Exception:
                return False

        poll(flow_row, timeout=30, what="the flow's record")
        time.sleep(0.5)  # the render has begun
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert time.monotonic() - sent < 15, "SIGTERM waited for the render"
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    with opened_store(db_url) as store:
        assert store.sessions.list_recent(limit=10) == []  # no leg was created


# --- the graph: linear, never recursive -------------------------------------------------------


def chain(n: int) -> dict[str, list[str]]:
    return {f"l{i}": [f"l{i - 1}"] if i else [] for i in range(n)}


def test_a_10000_leg_chain_is_ordered_without_recursion() -> None:
    deps = chain(10_000)
    assert find_cycle(deps) is None
    assert topo_order(deps) == list(deps)
    assert comparable_to_all(deps) == set(deps)
    reach = Reach(deps)
    assert reach.above("l0", "l9999")
    assert not reach.above("l9999", "l0")
    looped = {**deps, "l0": ["l9999"]}
    cycle = find_cycle(looped)
    assert cycle is not None
    assert cycle[0] == cycle[-1]
    assert len(cycle) == 10_001


def test_comparable_to_all_and_reach_agree_with_the_ancestor_sets() -> None:
    rng = random.Random(19)
    for _ in range(400):
        order = [f"n{i}" for i in range(rng.randint(1, 9))]
        rng.shuffle(order)
        deps = {node: [d for d in order[:k] if rng.random() < 0.35] for k, node in enumerate(order)}
        deps = dict(sorted(deps.items()))  # declared in another order than the graph's
        above = {node: ancestors(deps, node) for node in deps}
        expected = {a for a in deps if all(b == a or b in above[a] or a in above[b] for b in deps)}
        assert comparable_to_all(deps) == expected
        reach = Reach(deps)
        assert all(reach.above(a, b) == (a in above[b]) for a in deps for b in deps)


def _chain_file(directory: Path, n: int) -> Path:
    lines = ["legs:", "  - id: l0", "    run: [echo, start]"]
    for i in range(1, n):
        lines += [f"  - id: l{i}", f"    depends_on: [l{i - 1}]"]
        lines += [f'    run: [echo, "{{{{ legs.l{i - 1}.reply }}}}"]']
    path = directory / f"chain{n}.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_checking_a_chain_scales_linearly(tmp_path: Path) -> None:
    """Not a timed test: the check of a chain 8 times longer takes about 8 times the CPU
    (a quadratic check took 64 times; before, 4,000 legs passed the recursion limit).
    bench/bench_legcheck.py measures the 10,000-leg figure."""
    from lirun.flows.load import load_flow
    from lirun.flows.preview import preview_flow

    def cost(n: int) -> float:
        path = _chain_file(tmp_path, n)
        best = float("inf")
        for _ in range(2):
            started = time.process_time()
            spec = load_flow(path, cwd=str(tmp_path))
            preview_flow(spec, is_git=lambda _: False)
            best = min(best, time.process_time() - started)
        assert len(spec.legs) == n
        return best

    small, large = cost(500), cost(4000)
    assert large / small < 24, (small, large)


# --- YAML that stands for more than it says ------------------------------------------------------


def _laughs() -> str:
    lines = ["vars:", "  a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"  a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]" for n in range(1, 9)]
    return "\n".join([*lines, "legs: [{id: a, run: [echo, hi]}]"]) + "\n"


YAML = {
    "lists 900 deep": (
        "vars:\n  x: " + "[" * 900 + "]" * 900 + "\nlegs: [{id: a, run: [echo, hi]}]\n",
        2,
        "nested more than 64 levels deep",
    ),
    "mappings 900 deep": (
        "vars:\n  x: " + "{a: " * 900 + "1" + "}" * 900 + "\nlegs: [{id: a, run: [echo, hi]}]\n",
        2,
        "nested more than 64 levels deep",
    ),
    "a billion values in nine lines of aliases": (_laughs(), 8, "its aliases stand for more than"),
    "an alias inside itself": ("a: &a [1, *a]\n", 1, "an alias refers to the value that holds it"),
}


@pytest.mark.parametrize(("text", "line", "message"), YAML.values(), ids=YAML.keys())
def test_yaml_too_deep_or_multiplied_by_aliases_is_one_line(
    tmp_path: Path, lirun_home: Path, text: str, line: int, message: str
) -> None:
    """Before: a RecursionError traceback (PyYAML builds values recursively), or a check
    that never ended walking a billion values."""
    path = tmp_path / "flow.yaml"
    path.write_text(text, encoding="utf-8")
    result = run_li("flow", "run", "--dry-run", str(path), env=_env(lirun_home), cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    problems = result.stderr.strip().splitlines()[1:]
    assert len(problems) == 1
    assert problems[0].strip().startswith(f"{path}:{line}: {message}")


# --- numbers that are not numbers ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "value"),
    [("timeout", ".nan"), ("timeout", ".inf"), ("idle_timeout", "-.inf"), ("timeout", "1.0e+400")],
)
def test_a_non_finite_timeout_is_refused_at_the_check(
    tmp_path: Path, lirun_home: Path, line: str, value: str
) -> None:
    path = write(tmp_path, f"legs:\n  - id: a\n    run: [echo, hi]\n    {line}: {value}\n")
    result = run_li("flow", "run", "--dry-run", str(path), env=_env(lirun_home), cwd=tmp_path)
    assert result.returncode == 2
    assert f"{path}:4: {line} " in result.stderr
    assert "is not a duration; give a number of seconds" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "1e400", "-nan"])
def test_li_run_refuses_a_non_finite_timeout(tmp_path: Path, lirun_home: Path, value: str) -> None:
    for argv in ([f"--timeout={value}", "--", "true"], [f"--grace={value}", "true"]):
        result = run_li("run", *argv, env=_env(lirun_home), cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert "is not a duration" in result.stderr
        assert "Traceback" not in result.stderr
    assert not (lirun_home / "state.db").exists()


def _env(home: Path) -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.pop("LIRUN_DB_URL", None)
    env["LIRUN_HOME"] = str(home)
    return env


# --- reading commands write nothing ---------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        [
            *("override", "session", "nope", "--to", "completed"),
            *("--reason", "run.completed.admin", "--actor", "a", "--justification", "j"),
        ],
        ["flow", "resume", "nope"],
        ["show", "resume", "nope"],
        ["show", "abort", "nope", "--actor", "a", "--justification", "j"],
        ["schedule", "show", "nope"],
        ["schedule", "disable", "nope"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_an_unknown_id_on_a_fresh_home_creates_no_database(
    tmp_path: Path, lirun_home: Path, argv: list[str]
) -> None:
    result = run_li(*argv, env=_env(lirun_home), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "'nope'" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert list(lirun_home.iterdir()) == []


def test_listing_schedules_on_a_fresh_home_creates_no_database(
    tmp_path: Path, lirun_home: Path
) -> None:
    result = run_li("schedule", "list", "--json", env=_env(lirun_home), cwd=tmp_path)
    assert result.returncode == 0
    assert json.loads(result.stdout) == []
    assert list(lirun_home.iterdir()) == []

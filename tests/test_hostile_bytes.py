"""Hostile files are bounded in bytes, not only in count: a file whose aliases expand to
gigabytes, a ``json_schema:`` that is ``/dev/zero`` or a FIFO, a template filter asked for
a billion characters. Each is refused with one clear line, exit 2 (a leg's template: the
leg fails), no traceback, nothing written, and the refusing process stays small: its
peak resident memory is measured and asserted, and printed with ``-s``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from lirun.yamlfile.lines import MAX_FILE_BYTES
from lirun.yamlfile.shape import MAX_TEXT
from support.execkit import li_argv

SMALL_MB = 150  # an interpreter with li loaded is about 35 MB; a 3 GB expansion is not small
# One process rendering every hostile template (Jinja2 and its compiled templates loaded,
# the inputs each refused one may build within the bound): 155 to 322 MB measured across
# runs; what the bound refuses is gigabytes, past the child's 1 GB address space.
RENDERER_MB = 512


@dataclass(frozen=True)
class Measured:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    peak_mb: float

    @property
    def problems(self) -> list[str]:
        """The stderr lines after the first (a file's problems are indented under it)."""
        return [line.strip() for line in self.stderr.strip().splitlines()[1:]]


def run_measured(*args: str, home: Path, cwd: Path) -> Measured:
    """``li ARGS``, started by a fresh interpreter that starts nothing else, so its
    RUSAGE_CHILDREN peak is the peak resident memory of ``li`` alone."""
    script = textwrap.dedent(
        """
        import json, os, resource, subprocess, sys, time
        env = dict(os.environ); env.pop("LIRUN_DB_URL", None); env["LIRUN_HOME"] = sys.argv[1]
        t = time.monotonic()
        p = subprocess.run(sys.argv[3:], env=env, cwd=sys.argv[2], capture_output=True,
                           text=True, stdin=subprocess.DEVNULL, timeout=120)
        print(json.dumps({"rc": p.returncode, "out": p.stdout, "err": p.stderr,
                          "s": time.monotonic() - t,
                          "kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(home), str(cwd), *li_argv(*args)],
        capture_output=True,
        text=True,
        timeout=150,
        check=True,
    )
    data = json.loads(done.stdout)
    result = Measured(data["rc"], data["out"], data["err"], data["s"], data["kb"] / 1024)
    print(f"li {' '.join(args[:2])}: exit {result.returncode}, {result.seconds:.2f}s, "
          f"peak {result.peak_mb:.0f} MB")  # fmt: skip
    return result


def assert_one_line_refusal(result: Measured, start: str, home: Path) -> None:
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert "MemoryError" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert any(line.strip().startswith(start) for line in lines), lines[:5]
    assert len([line for line in lines if line.strip().startswith(start)]) == 1
    assert not (home / "state.db").exists()  # nothing written
    assert result.peak_mb < SMALL_MB, result.peak_mb


# --- YAML aliases that stand for gigabytes ------------------------------------------------------


def three_gigabytes(directory: Path) -> Path:
    """A 0.5 MB flow file whose one leg's argv repeats a 500,000-character text 6,000
    times: 3 GB of text once anything copies it out."""
    text = "x" * 500_000
    lines = ["vars:", f'  a: &a "{text}"', "legs:", "  - id: a"]
    lines.append("    run: [echo, " + ", ".join(["*a"] * 6000) + "]")
    path = directory / "flow.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def hundred_copies(directory: Path) -> Path:
    """A 1 MB flow file with a 1,000,000-character variable aliased by 100 more: before,
    a run stored all of them (a 200 MB state.db and a 100 MB checkpoint)."""
    lines = ["vars:", f'  a: &a "{"y" * 1_000_000}"']
    lines += [f"  v{i}: *a" for i in range(100)]
    lines += ["legs: [{id: a, run: [echo, hi]}]"]
    path = directory / "hundred.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_flow_whose_aliases_expand_to_3_gb_is_one_line_at_once(
    tmp_path: Path, lirun_home: Path
) -> None:
    """Before: a MemoryError traceback after the whole machine's memory was asked for."""
    path = three_gigabytes(tmp_path)
    for dry in (["--dry-run"], []):
        result = run_measured("flow", "run", *dry, str(path), home=lirun_home, cwd=tmp_path)
        assert_one_line_refusal(
            result, f"{path}:5: its aliases expand to more than {MAX_TEXT:,} characters", lirun_home
        )
        assert "the value from line 2, stands for 500,000" in result.stderr
        assert result.seconds < 20


def test_a_flow_of_a_hundred_aliased_megabytes_writes_nothing(
    tmp_path: Path, lirun_home: Path
) -> None:
    path = hundred_copies(tmp_path)
    result = run_measured("flow", "run", str(path), home=lirun_home, cwd=tmp_path)
    assert_one_line_refusal(result, f"{path}:2: its aliases expand to more than", lirun_home)
    assert not (lirun_home / "runs").exists()


def test_a_schedules_file_of_aliased_actions_writes_nothing(
    tmp_path: Path, lirun_home: Path
) -> None:
    """Before: a 215 KB file made 2,000 schedules of 100 KB each, and their history rows."""
    lines = [
        "schedules:",
        "  - name: s0",
        "    every: 1h",
        f'    action: [run, echo, &a "{"z" * 100_000}"]',
    ]
    for i in range(1, 2000):
        lines += [f"  - name: s{i}", "    every: 1h", "    action: [run, echo, *a]"]
    path = tmp_path / "schedules.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = run_measured("schedule", "apply", str(path), home=lirun_home, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("its aliases expand to more than") == 1
    assert f"{path}:" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (lirun_home / "state.db").exists()
    assert result.peak_mb < SMALL_MB


def test_a_show_file_of_aliased_text_is_one_line(tmp_path: Path, lirun_home: Path) -> None:
    lines = ["topic: t", f'base: &a "{"b" * 1_000_000}"', "plays:"]
    lines += [f"  - {{id: p{i}, run: [echo, *a]}}" for i in range(10)]
    path = tmp_path / "show.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = run_measured("show", "run", "--dry-run", str(path), home=lirun_home, cwd=tmp_path)
    assert_one_line_refusal(result, f"{path}:10: its aliases expand to more than", lirun_home)


def test_a_profile_of_aliased_text_is_one_line(tmp_path: Path, lirun_home: Path) -> None:
    profiles = lirun_home / "profiles"
    profiles.mkdir()
    lines = ["defaults: {timeout: 60}", f'x: &a "{"p" * 1_000_000}"']
    lines.append("y: [" + ", ".join(["*a"] * 10) + "]")
    path = profiles / "big.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = run_measured("run", "--profile", "big", "--", "true", home=lirun_home, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("li run: error: ")
    assert f"{path}:3: its aliases expand to more than 4,194,304 characters" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr
    assert not (lirun_home / "state.db").exists()
    assert result.peak_mb < SMALL_MB


def test_shared_text_within_the_bound_still_loads(tmp_path: Path) -> None:
    from lirun.flows.load import load_flow

    lines = ["vars:", f'  a: &a "{"s" * 10_000}"', "legs:"]
    for i in range(100):  # 1 MB of text as the aliases expand: well within the bound
        lines += [f"  - id: l{i}", "    run: [echo, *a]"]
    path = tmp_path / "flow.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    spec = load_flow(path, cwd=str(tmp_path))
    assert len(spec.legs) == 100
    assert spec.legs[99].task.run == ("echo", "s" * 10_000)


def test_aliased_lists_and_merge_keys_count_their_text_in_full(tmp_path: Path) -> None:
    """Aliases of lists and mappings (the walk that measures each container once) and
    ``<<:`` merge keys count the text they bring, as often as they bring it."""
    from lirun.yamlfile.lines import YamlFileError, read_yaml

    path = tmp_path / "x.yaml"
    block = ", ".join(f'"{"t" * 100_000}"' for _ in range(5))
    lines = ["a: &a [" + block + "]", "b: &b [" + ", ".join(["*a"] * 5) + "]"]
    lines += ["c: [" + ", ".join(["*b"] * 2) + "]"]  # 5 x 5 x 2 x 100,000: 5 MB
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(YamlFileError, match=r":3: its aliases expand to more than 4,194,304 "):
        read_yaml(path)
    lines = ["d: &d {timeout: 60, prompt: " + '"' + "p" * 100_000 + '"}', "legs:"]
    lines += [f"  - {{<<: *d, id: l{i}}}" for i in range(50)]  # 5 MB through merge keys
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(YamlFileError, match="its aliases expand to more than"):
        read_yaml(path)
    path.write_text("\n".join(lines[:12]) + "\n", encoding="utf-8")  # 10 legs: 1 MB
    assert len(read_yaml(path)["legs"]) == 10


def test_a_file_at_its_bound_is_read_and_one_byte_more_is_not(tmp_path: Path) -> None:
    from lirun.inputfile import InputFileError, read_bounded

    path = tmp_path / "f"
    path.write_bytes(b"a" * 1000)
    assert read_bounded(path, 1000) == b"a" * 1000
    with pytest.raises(InputFileError, match="larger than the 999-byte bound"):
        read_bounded(path, 999)
    with pytest.raises(InputFileError, match="No such file"):
        read_bounded(tmp_path / "absent", 10)


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "directory", "symlink", "huge"])
def test_a_flow_file_that_is_no_regular_file_or_too_large_is_refused(
    tmp_path: Path, lirun_home: Path, kind: str
) -> None:
    """Before: /dev/zero was read until memory ran out, a FIFO waited forever."""
    path = _hostile_file(tmp_path, kind, MAX_FILE_BYTES)
    result = run_measured("flow", "run", "--dry-run", str(path), home=lirun_home, cwd=tmp_path)
    expected = {
        "dev-zero": "a character device, not a regular file",
        "fifo": "a FIFO, not a regular file",
        "directory": "a directory, not a regular file",
        "symlink": "a character device, not a regular file",
        "huge": f"larger than the {MAX_FILE_BYTES:,}-byte bound",
    }[kind]
    assert result.returncode == 2, result.stderr
    assert f"{path}: cannot read the flow file: {expected}" in result.stderr
    assert "Traceback" not in result.stderr
    assert result.seconds < 30


def _hostile_file(directory: Path, kind: str, limit: int) -> Path:
    path = directory / f"{kind}.input"
    if kind == "dev-zero":
        return Path("/dev/zero")
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "symlink":
        path.symlink_to("/dev/zero")
    else:
        with open(path, "wb") as file:  # sparse: no disk used
            file.truncate(limit * 4)
    return path


def test_a_fan_out_over_an_artifact_past_the_bound_fails_its_leg(
    tmp_path: Path, lirun_home: Path
) -> None:
    """Before: the 5 MB artifact became an item stored in the flow's graph (and its
    rewrites) and rendered into the leg; now the fan-out leg fails saying why."""
    path = tmp_path / "fan.yaml"
    path.write_text(
        textwrap.dedent(
            """
            legs:
              - id: a
                run: [sh, -c, "head -c 5000000 /dev/zero | tr '\\\\0' x >$LIRUN_ARTIFACT_DIR/t"]
                artifacts: [{id: t, path: t}]
              - id: b
                depends_on: [a]
                for_each: {artifact: a.t, split: lines}
                run: [echo, "{{ item|length }}"]
            """
        ),
        encoding="utf-8",
    )
    result = run_measured("flow", "run", str(path), home=lirun_home, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "leg a completed" in result.stderr
    assert "leg b failed (run.failed.fan_out): for_each: cannot read " in result.stderr
    assert f"/t: larger than the {MAX_FILE_BYTES:,}-byte bound" in result.stderr
    assert (lirun_home / "state.db").stat().st_size < 2_000_000


# --- json_schema: -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "directory", "symlink", "huge"])
def test_a_json_schema_that_is_no_regular_file_or_too_large_is_refused(
    tmp_path: Path, lirun_home: Path, kind: str
) -> None:
    """Before: /dev/zero grew the process by gigabytes in seconds; a FIFO hung forever."""
    from lirun.record.artifact_checks import MAX_SCHEMA_BYTES

    schema = _hostile_file(tmp_path, kind, MAX_SCHEMA_BYTES)
    result = run_measured(
        *("run", "--artifact", "r=out.json", "--artifact-check", f"r.json_schema={schema}"),
        *("--", "true"),
        home=lirun_home,
        cwd=tmp_path,
    )
    why = {
        "dev-zero": "a character device, not a regular file",
        "fifo": "a FIFO, not a regular file",
        "directory": "a directory, not a regular file",
        "symlink": "a character device, not a regular file",
        "huge": f"larger than the {MAX_SCHEMA_BYTES:,}-byte bound",
    }[kind]
    assert result.returncode == 2, result.stderr
    assert f"cannot read the schema {schema}: {why}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert result.seconds < 30
    assert not (lirun_home / "state.db").exists()


def test_a_json_schema_in_a_flow_leg_that_is_dev_zero_is_its_line(
    tmp_path: Path, lirun_home: Path
) -> None:
    path = tmp_path / "flow.yaml"
    path.write_text(
        "legs:\n  - id: a\n    run: [echo, hi]\n    artifacts:\n"
        "      - {id: r, path: r.json, checks: {json_schema: /dev/zero}}\n",
        encoding="utf-8",
    )
    result = run_measured("flow", "run", "--dry-run", str(path), home=lirun_home, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "cannot read the schema /dev/zero: a character device, not a regular file" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr
    assert result.peak_mb < SMALL_MB


# --- template filters asked for a billion characters ----------------------------------------------

BIG_TEMPLATES = {
    "center": "{{ 'x'|center(1000000000) }}",
    "indent": "{{ 'x\\nx'|indent(500000000) }}",
    "replace": "{{ ('x' * 1000000)|replace('x', 'yyyyyyyyyy') }}",
    "format": "{{ '%999999999s'|format(1) }}",
    "percent": "{{ '%999999999s' % 1 }}",
    "join of a range": "{{ range(99999)|join('x' * 1900000) }}",
    "wordwrap": "{{ ('x' * 1900000)|wordwrap(1, wrapstring='y' * 100) }}",
    "batch": "{{ [1]|batch(999999999, 0)|list }}",
    "ljust": "{{ 'x'.ljust(999999999) }}",
    "str.format": "{{ '{:>999999999}'.format(1) }}",
    "str.format width argument": "{{ '{0:{1}}'.format('x', 999999999) }}",
    "expandtabs": "{{ 'a\\tb'.expandtabs(999999999) }}",
    "list repeated": "{{ ['x' * 1900000] * 1000 }}",
    "concatenation": "{{ 'x' * 1900000 ~ 'x' * 1900000 }}",
    "addition": "{{ 'x' * 1900000 + 'x' * 1900000 }}",
    "extend doubling": (
        "{% set l = ['x' * 1000] %}{% for i in range(40) %}{% set _ = l.extend(l) %}"
        "{% endfor %}{{ l|length }}"
    ),
}

_RENDER_EACH = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # a gigabyte: fail, not swap
from lirun.flows.templates import TemplateError, render
found = {}
for name, text in json.loads(sys.argv[1]).items():
    try:
        found[name] = "rendered " + str(len(render(text, {"vars": {}, "legs": {}})))
    except TemplateError as exc:
        found[name] = str(exc)
    except MemoryError:
        found[name] = "MemoryError"
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"found": found, "peak_mb": peak}))
"""


def test_template_operations_are_measured_before_they_allocate() -> None:
    """Every template runs in one child held to a gigabyte of address space: before,
    each was a MemoryError there (or gigabytes allocated with no such limit)."""
    done = subprocess.run(
        [sys.executable, "-c", _RENDER_EACH, json.dumps(BIG_TEMPLATES)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    data = json.loads(done.stdout)
    print(f"all {len(BIG_TEMPLATES)} refused; peak {data['peak_mb']:.0f} MB")
    for name, found in data["found"].items():
        assert "over the 2,000,000-character bound of a template" in found, (name, found)
        assert found.startswith("template error on its line 1: "), (name, found)
    assert data["peak_mb"] < RENDERER_MB


def test_templates_within_the_bound_render_as_before() -> None:
    from lirun.flows.templates import render

    context = {"vars": {"n": "3"}, "legs": {}}
    text = (
        "{{ 'ab'|center(6) }}|{{ 'a\\nb'|indent(2) }}|{{ 'aa'|replace('a', 'b', 1) }}|"
        "{{ '%s-%d'|format('x', 3) }}|{{ [1, 2]|join(', ') }}|{{ 'x'.ljust(3) }}|"
        "{{ '{}!'.format(1) }}|{{ 'ab' ~ 'c' }}|{{ [1, 2] }}|{{ 'a' + 'b' }}|{{ 7 % 3 }}|"
        "{{ [1] + [2] }}|{{ 'x' * 3 }}|{{ '%(a)s'|format(a=1) }}|{{ [1, 2, 3]|batch(2)|list }}"
    )
    assert render(text, context) == (
        "  ab  |a\n  b|ba|x-3|1, 2|x  |1!|abc|[1, 2]|ab|1|[1, 2]|xxx|1|[[1, 2], [3]]"
    )
    assert len(render("{{ 'x' * 1999999 }}", context)) == 1_999_999
    assert len(render("{{ [1] * 100000 }}", context)) == 300_000  # numbers count as written
    joined = "{{ ','.join(range(3)|map('string')) }}"  # a generator, measured and still joined
    assert render(joined, context) == "0,1,2"


def test_a_leg_whose_template_asks_for_a_gigabyte_fails_small(
    tmp_path: Path, lirun_home: Path
) -> None:
    path = tmp_path / "flow.yaml"
    path.write_text(
        "legs:\n  - id: a\n    run: [echo, \"{{ 'x'|center(1000000000) }}\"]\n", encoding="utf-8"
    )
    result = run_measured("flow", "run", str(path), home=lirun_home, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "leg a failed (run.failed.setup): template error on its line 1: center(1000000000)" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr
    assert result.peak_mb < SMALL_MB


# --- what a schedule definition stores ------------------------------------------------------------


def test_a_schedule_definition_past_its_stored_bound_is_refused(
    tmp_path: Path, lirun_home: Path
) -> None:
    from lirun.schedules.definition import MAX_STORED_BYTES

    words = ["x" * 30_000] * 3
    result = run_measured(
        "schedule", "add", "big", "--every", "1h", "--", "run", "echo", *words,
        home=lirun_home, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert f"more than the {MAX_STORED_BYTES:,}-byte bound of a schedule" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (lirun_home / "state.db").exists()

    path = tmp_path / "schedules.yaml"
    action = json.dumps(["run", "echo", *words])
    path.write_text(f"schedules:\n  - name: big\n    every: 1h\n    action: {action}\n")
    result = run_measured("schedule", "apply", str(path), home=lirun_home, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert f"{path}:4: schedule 'big': the definition would be stored as" in result.stderr
    assert not (lirun_home / "state.db").exists()

"""A flow shows its legs' provider trouble as it happens, retries by the failure's class,
and names every failed leg in its summary (fake providers, both backends)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from lirun.exec.task import Task
from lirun.flows.decide import FlowFacts, LegFact, decide_flow
from lirun.flows.engine import FlowOptions, run_flow
from lirun.flows.jobs import retry_leg
from lirun.flows.spec import FlowSpec, LegSpec
from lirun.provider_errors import FAILURE_CLASSES
from support.providerkit import FAKE_PROVIDER, classify_failures, fixture_path
from support.storekit import invocation_sessions


def _provider(tmp_path: Path, name: str, fixture: str, *, exit_code: int, hang: bool) -> Path:
    """A fake ``name`` CLI that replays ``fixture`` whatever the environment says."""
    script = tmp_path / f"fake-{name}"
    script.write_text(
        "#!/bin/sh\n"
        f'LIRUN_FAKE_FIXTURE="{fixture_path(fixture)}" LIRUN_FAKE_EXIT={exit_code} '
        f"LIRUN_FAKE_HANG_AFTER={int(hang)} LIRUN_FAKE_DELAY=0.05 "
        f'exec "{sys.executable}" "{FAKE_PROVIDER}" "$@"\n'
    )
    script.chmod(0o755)
    return script


@pytest.mark.slow
def test_each_legs_provider_trouble_is_a_line_and_every_failed_leg_is_named(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    classify_failures(monkeypatch, "401 Unauthorized", "auth")
    codex = _provider(tmp_path, "codex", "codex/error_401.jsonl", exit_code=1, hang=False)
    claude = _provider(tmp_path, "claude", "claude/api_retry_offline.jsonl", exit_code=0, hang=True)
    monkeypatch.setenv("LIRUN_CODEX_BIN", str(codex))
    monkeypatch.setenv("LIRUN_CLAUDE_BIN", str(claude))
    spec = FlowSpec(
        legs=(
            LegSpec("login", Task(agent="codex", prompt="fix it"), retries=2),
            LegSpec("slow", Task(agent="claude", prompt="go", timeout=2.5)),
        ),
        cwd=str(tmp_path),
        parallel=2,
    )
    lines: list[str] = []
    report = run_flow(
        spec, db_url=db_url, options=FlowOptions(retry_delay=0.0, on_progress=lines.append)
    )
    assert (report.status, report.reason_code) == ("failed", "run.failed.leg")
    said = [line for line in lines if ": codex: " in line or ": claude: " in line]
    assert "leg login: codex: error: unexpected status 401 Unauthorized" in "\n".join(said)
    assert sum("leg slow: claude: retrying (" in line for line in said) == 7
    log = invocation(db_url, report.invocation_id)["artifacts_path"] + "/flow.log"
    assert "leg slow: claude: retrying (7): API retry 7/10: unknown" in Path(log).read_text()
    # a refused login is never retried, whatever retries: says
    legs = {leg.id: leg for leg in report.legs}
    assert legs["login"].attempts == 1
    assert legs["login"].reason_code == "run.failed.provider_auth"
    assert len(invocation_sessions(db_url, report.invocation_id)) == 2
    summary = report.reason_summary or ""
    assert summary.startswith(
        "2 legs failed: login (run.failed.provider_auth: unexpected status 401"
    )
    assert "unexpected status 401 Unauthorized" in summary
    assert "slow (run.timed_out.provider_retrying: unknown)" in summary


def invocation(db_url: str, ident: str) -> dict[str, Any]:
    from support.storekit import opened

    with opened(db_url) as store:
        row = store.get_entity("invocation", ident)
    assert row is not None
    return row


def _fact(ident: str, reason: str, message: str | None = None, **more: Any) -> LegFact:
    status = reason.split(".")[1]
    return LegFact(ident, status, reason, message=message, **more)


def test_the_summary_names_every_failed_leg_with_the_providers_words() -> None:
    legs = (
        _fact("a", "run.completed.ok"),
        _fact("review[1]", "run.failed.provider_auth", "Invalid API key"),
        _fact("check", "run.failed.exit_nonzero"),
    )
    outcome = decide_flow(FlowFacts(legs=legs))
    assert outcome.summary == (
        "2 legs failed: review[1] (run.failed.provider_auth: Invalid API key), "
        "check (run.failed.exit_nonzero)"
    )
    failed = next(e for e in outcome.evidence if e["kind"] == "failed_legs")
    assert failed["legs"][0]["message"] == "Invalid API key"


def test_one_failed_leg_keeps_its_sentence_with_the_providers_words() -> None:
    legs = (_fact("a", "run.completed.ok"), _fact("r", "run.failed.provider_rejected", "too long"))
    summary = decide_flow(FlowFacts(legs=legs)).summary
    assert summary == "leg r ended failed (run.failed.provider_rejected): too long"


def test_a_flow_of_many_failed_legs_names_ten_and_counts_the_rest() -> None:
    legs = tuple(_fact(f"r[{n}]", "run.failed.exit_nonzero") for n in range(12))
    summary = decide_flow(FlowFacts(legs=legs)).summary
    assert summary.startswith("12 legs failed: r[0] (run.failed.exit_nonzero), r[1]")
    assert "r[9] (run.failed.exit_nonzero), and 2 more (see the evidence)" in summary
    assert "r[10]" not in summary


def test_legs_the_flow_stopped_are_not_named_beside_one_that_failed() -> None:
    stopped = _fact("k", "run.cancelled.sigterm", interrupted=True)
    summary = decide_flow(FlowFacts(legs=(stopped, _fact("f", "run.failed.exit_nonzero")))).summary
    assert summary == "leg f ended failed (run.failed.exit_nonzero)"


RETRYABLE = sorted(c.reason_code for c in FAILURE_CLASSES.values() if c.retryable)
NOT_RETRYABLE = sorted(c.reason_code for c in FAILURE_CLASSES.values() if not c.retryable)


@pytest.mark.parametrize(
    "reason", [*RETRYABLE, "run.timed_out.provider_retrying", "run.failed.provider_retryable"]
)
def test_retries_retry_every_reason_a_retry_may_fix(reason: str) -> None:
    assert retry_leg(reason, 1, 2)
    assert retry_leg(reason, 2, 2)
    assert not retry_leg(reason, 3, 2)
    assert not retry_leg(reason, 1, 0)


@pytest.mark.parametrize(
    "reason",
    [
        *NOT_RETRYABLE,
        "run.failed.provider_nonretryable",
        "run.failed.exit_nonzero",
        "run.timed_out.deadline",
        "run.completed_empty.no_evidence",
        None,
    ],
)
def test_retries_never_retry_what_a_retry_cannot_fix(reason: str | None) -> None:
    assert not retry_leg(reason, 1, 5)


def test_auth_and_rejected_are_the_classes_a_person_must_fix() -> None:
    assert NOT_RETRYABLE == ["run.failed.provider_auth", "run.failed.provider_rejected"]


@pytest.mark.slow
def test_li_flow_run_says_the_trouble_on_stderr_and_in_a_detached_log(
    tmp_path: Path, db_url: str, li_env: dict[str, str]
) -> None:
    import json

    from support.execkit import run_li

    codex = _provider(tmp_path, "codex", "codex/error_401.jsonl", exit_code=1, hang=False)
    env = {**li_env, "LIRUN_CODEX_BIN": str(codex)}
    path = tmp_path / "flow.yaml"
    path.write_text("legs:\n  - {id: ask, agent: codex, prompt: fix it}\n", encoding="utf-8")
    result = run_li("flow", "run", str(path), "--json", env=env, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert json.loads(result.stdout)["status"] == "failed"  # stdout stays JSON
    wanted = "li flow: leg ask: codex: error: unexpected status 401 Unauthorized"
    assert wanted in result.stderr
    started = run_li("flow", "run", str(path), "--detach", env=env, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    ident = started.stdout.strip()
    waited = run_li("wait", ident, "--timeout", "60", env=env, cwd=tmp_path)
    assert "status=failed" in waited.stdout
    run_dir = invocation(db_url, ident)["run_dir"]
    assert wanted in (Path(run_dir) / "li.stderr.log").read_text()

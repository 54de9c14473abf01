"""GitHub Copilot CLI's contract: its own custom-provider settings at the mock's OpenAI
chat completions (``COPILOT_PROVIDER_BASE_URL`` with a key), offline
(``COPILOT_OFFLINE=true``: no GitHub sign-in, telemetry or update check) in the private
HOME. The CLI's retry budget cannot be set (5 retries, 1-8 s apart), so the retrying cases
take what it takes (10-35 s); it gives up on an auth failure itself within ~2 s. It waits on
a silent server past any limit worth a test, so lirun's stall limit ends those cases.

The native binary unpacks its package (~235 MB, 3-10 s) into ``$HOME/.cache/copilot`` on
its first run in a HOME; every case's HOME is new, so they share one unpacked copy beside
the CLI cache instead (``COPILOT_PKG_CACHE_HOME``), made before the first case asks
``--version`` (lirun waits 5 s for that answer)."""

from __future__ import annotations

import os
import subprocess
from functools import partial
from pathlib import Path

from support.contracts import (
    BASE_URL,
    STALL_REPLAY,
    STALLED,
    Contract,
)
from support.contracts import Case as _Case

Case = partial(_Case, "copilot")
# The CLI's start (a Node loader, then the native binary loading its package) counts as no
# progress; on a loaded machine it took more than the suite's usual 4 s before the first
# request, so its silent-server cases give the stall limit 10 s.
STALL = "10"
STALL_ARGS = ("--stall-timeout", STALL, "--timeout", "60")


def unpacked_package(executable: Path) -> Path:
    """The package directory every case shares, unpacked once by a ``--version`` run."""
    where = executable.parents[2] / "unpacked"
    if not (where / "pkg").is_dir():
        env = {**os.environ, "COPILOT_PKG_CACHE_HOME": str(where), "COPILOT_AUTO_UPDATE": "false"}
        subprocess.run([str(executable), "--version"], env=env, capture_output=True,
                       timeout=120, check=False)  # fmt: skip
    return where


def environment(home: Path, tmp_path: Path, case: _Case) -> dict[str, str]:
    from support.realcli import real_clis  # here: support.realcli imports the contracts

    clis = real_clis()
    shared = {}
    if not isinstance(clis, str):
        shared["COPILOT_PKG_CACHE_HOME"] = str(unpacked_package(clis.path("copilot")))
    return {
        **shared,
        "COPILOT_PROVIDER_BASE_URL": f"{BASE_URL}/v1",
        "COPILOT_PROVIDER_API_KEY": "sk-fake",
        "COPILOT_OFFLINE": "true",
        "COPILOT_AUTO_UPDATE": "false",
    }


CASES = (
    Case("text", "text", "completed", "run.completed.ok", 30, max_attempts=0),
    Case("tool-write", "tool", "completed", "run.completed.ok", 30, max_attempts=0,
         touch="mock_note.txt"),
    # 401 is "transient_auth_error" to the CLI: two retries ~1 s apart, then it gives up.
    Case("401", "401", "failed", "run.failed.provider_auth", 30, max_attempts=2),
    Case("403", "403", "failed", "run.failed.provider_auth", 30, max_attempts=0),
    Case("429", "429", "failed", "run.failed.provider_rate_limit", 60, min_attempts=2),
    Case("500", "500", "failed", "run.failed.provider_server_error", 60, min_attempts=2),
    # The API's body says overloaded: the 503 is that, as for pi on the same mock.
    Case("503", "503", "failed", "run.failed.provider_overloaded", 60, min_attempts=2),
    # The CLI compacts the history and tries once more ("forced_compaction").
    Case("400-prompt-too-long", "400", "failed", "run.failed.provider_rejected", 30,
         max_attempts=1),
    Case("unknown-model", "404", "failed", "run.failed.provider_rejected", 30,
         max_attempts=0, model_name="no-such-model"),
    Case("refused", "refused", "failed", "run.failed.provider_network", 60, min_attempts=2),
    Case("closed", "close", "failed", "run.failed.provider_network", 60, min_attempts=2),
    Case("cut", "cut", "failed", "run.failed.provider_network", 60, min_attempts=2),
    Case("malformed", "malformed", "failed", "run.failed.provider_server_error", 60,
         min_attempts=2),
    # A signal makes the CLI write "abort" and a result with exitCode 0: still a stall.
    Case("hang", "hang", "failed", "run.failed.provider_stalled", 40,
         min_seconds=float(STALL), li_args=STALL_ARGS, lirun_words=STALLED,
         replay_hang=True, replay_args=STALL_REPLAY),
    Case("stall", "stall", "failed", "run.failed.provider_stalled", 40,
         min_seconds=float(STALL), li_args=STALL_ARGS, lirun_words=STALLED,
         replay_hang=True, replay_args=STALL_REPLAY),
)  # fmt: skip

CONTRACT = Contract(
    provider="copilot",
    cli_name="copilot",
    package="@github/copilot",
    pinned="1.0.102",
    bin="copilot",
    model="mock-model",
    api_path="/v1/chat/completions",
    version_line="GitHub Copilot CLI {}.",
    cases=CASES,
    own_env=("COPILOT_", "GH_TOKEN", "GITHUB_TOKEN", "GH_HOST"),
    environment=environment,
)

"""What the suite needs from the machine beyond Python: skip without it, or fail in CI.

``scripts/test`` installs these when it can (as root); ``.ci/run`` sets the
``LIRUN_TEST_REQUIRE_*`` variables, so a missing one fails there instead of skipping.
"""

from __future__ import annotations

import os
import shutil

import pytest

GRAPHVIZ_ENV = "LIRUN_TEST_REQUIRE_GRAPHVIZ"


def need(missing: str | None, require_env: str) -> None:
    """Skip the test saying what is missing, or fail it when ``$require_env`` is 1."""
    if missing is None:
        return
    if os.environ.get(require_env) == "1":
        pytest.fail(f"{require_env}=1 but {missing}")
    pytest.skip(missing)


def need_graphviz() -> None:
    """Graphviz ``dot`` (flow pictures, the dashboard's graphs)."""
    if shutil.which("dot") is None:
        need("Graphviz dot is not installed (apt-get install graphviz)", GRAPHVIZ_ENV)

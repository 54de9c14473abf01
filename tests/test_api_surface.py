"""The public API is ``lirun.__all__``, and it changes only as docs/versioning.md allows.

tests/api_surface.txt lists every public name with its signature (``scripts/api-surface
--write`` makes it). A name that disappears or a signature that changes fails here unless
CHANGELOG.md's Unreleased section marks it; a name or an optional parameter added needs
only the snapshot rewritten.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import lirun
from support import apisurface
from support.apisurface import Change, changes, marked_symbols, unmarked

ROOT = Path(__file__).resolve().parents[1]
CHANGELOG_HEAD = "# Changelog\n\n## Unreleased\n\n"
RELEASED = "\n## 0.1.0\n\n- [breaking] `Client.run`: an old entry, already released\n"


def snapshot() -> dict[str, str]:
    return apisurface.parse(apisurface.SNAPSHOT.read_text(encoding="utf-8"))


def test_the_snapshot_is_the_live_api() -> None:
    found = changes(snapshot(), apisurface.surface())
    missing = unmarked(found, apisurface.CHANGELOG.read_text(encoding="utf-8"))
    assert not missing, (
        "removed or changed without a [breaking]/[deprecated]/[changed] entry naming it under "
        "CHANGELOG.md's '## Unreleased' (docs/versioning.md):\n"
        + "\n".join(map(apisurface.describe, missing))
    )
    assert not found, "the API changed; run scripts/api-surface --write:\n" + "\n".join(
        map(apisurface.describe, found)
    )


def test_the_snapshot_holds_every_public_name() -> None:
    recorded = snapshot()
    assert set(lirun.__all__) <= set(recorded)
    assert "Client.run" in recorded
    assert "run_wait" not in recorded


# -- what the check decides, on a copy of the snapshot --------------------------------------


def test_a_removed_name_fails_without_the_marker() -> None:
    old = snapshot()
    new = {k: v for k, v in old.items() if k != "execute"}
    found = changes(old, new)
    assert [(c.symbol, c.kind) for c in found] == [("execute", "removed")]
    assert unmarked(found, CHANGELOG_HEAD) == found
    assert unmarked(found, CHANGELOG_HEAD + "- [breaking] `lirun.execute` is gone\n") == []
    assert unmarked(found, CHANGELOG_HEAD + "- [deprecated] `execute`: use Client.run\n") == []


def test_a_changed_signature_fails_without_the_marker() -> None:
    old = snapshot()
    kind, signature = old["Client.status"].split("\t")
    new = {**old, "Client.status": f"{kind}\t{signature.replace('run_id', 'id')}"}
    found = changes(old, new)
    assert [(c.symbol, c.kind) for c in found] == [("Client.status", "changed")]
    assert unmarked(found, CHANGELOG_HEAD) == found
    assert unmarked(found, CHANGELOG_HEAD + "- `Client.status` takes `id`\n") == found
    assert unmarked(found, CHANGELOG_HEAD + "- [changed] `Client.status(id)`\n") == []


def test_a_removed_class_is_marked_by_its_name() -> None:
    old = snapshot()
    new = {k: v for k, v in old.items() if k != "Usage" and not k.startswith("Usage.")}
    found = changes(old, new)
    assert len(found) > 2
    assert unmarked(found, CHANGELOG_HEAD + "- [breaking] `Usage` is gone\n") == []


@pytest.mark.parametrize(
    ("before", "after", "kind"),
    [
        ("(self, a: int) -> str", "(self, a: int, b: int = 1) -> str", "added"),
        (
            "(self, a: int, *, b: int = 1) -> str",
            "(self, a: int, *, c: int = 2, b: int = 1) -> str",
            "added",
        ),
        ("(self, a: int) -> str", "(self, a: int = 0) -> str", "added"),
        ("(self, a: int) -> str", "(self, a: int, **kw: Any) -> str", "added"),
        ("(self, a: int) -> str", "(self, a: int, b: int) -> str", "changed"),  # required
        ("(self, a: int, b: int = 1) -> str", "(self, b: int = 1, a: int = 0) -> str", "changed"),
        ("(self, a: int = 0) -> str", "(self, a: int = 1) -> str", "changed"),  # a default
        ("(self, a: int = 0) -> str", "(self, a: int) -> str", "changed"),
        ("(self, a: int) -> str", "(self, a: str) -> str", "changed"),
        ("(self, a: int) -> str", "(self, a: int) -> bytes", "changed"),
        ("(self, a: int) -> str", "(self, *, a: int) -> str", "changed"),  # keyword only now
        (
            "(self, a: dict[str, int] = {'x': 1}) -> str",
            "(self, a: dict[str, int] = {'x': 1}, b: str = 'p, q') -> str",
            "added",
        ),
    ],
)
def test_only_an_optional_addition_extends_a_signature(before: str, after: str, kind: str) -> None:
    [change] = changes({"f": f"method\t{before}"}, {"f": f"method\t{after}"})
    assert change.kind == kind


def test_a_new_name_needs_no_marker() -> None:
    old = snapshot()
    found = changes(old, {**old, "shiny": "function\t() -> None"})
    assert found == [Change("shiny", "added", None, "function\t() -> None")]
    assert unmarked(found, "") == []


def test_only_the_unreleased_section_marks() -> None:
    assert marked_symbols(CHANGELOG_HEAD + "- [breaking] `A.b`, `lirun.c(x)`\n" + RELEASED) == {
        "A.b",
        "c",
    }
    assert marked_symbols("# Changelog\n" + RELEASED) == set()
    assert marked_symbols(CHANGELOG_HEAD + "- `A` and `B` were added\n") == set()


def test_write_refuses_an_unmarked_removal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded = {**snapshot(), "gone": "function\t() -> None"}
    snap, log = tmp_path / "api_surface.txt", tmp_path / "CHANGELOG.md"
    snap.write_text(apisurface.render(recorded), encoding="utf-8")
    log.write_text(CHANGELOG_HEAD, encoding="utf-8")
    monkeypatch.setattr(apisurface, "SNAPSHOT", snap)
    monkeypatch.setattr(apisurface, "CHANGELOG", log)
    assert apisurface.main(["--write"]) == 1
    assert "gone" in capsys.readouterr().err
    assert "gone\t" in snap.read_text(encoding="utf-8")  # not written

    log.write_text(CHANGELOG_HEAD + "- [breaking] `gone`: use `Client.run`\n", encoding="utf-8")
    assert apisurface.main(["--write"]) == 0
    assert apisurface.parse(snap.read_text(encoding="utf-8")) == apisurface.surface()
    assert apisurface.main([]) == 0  # nothing differs now


def test_the_snapshot_is_the_same_in_every_process() -> None:
    """No memory address, set order or hash seed in it: regenerating changes nothing."""
    code = "from support import apisurface as a; print(a.render(a.surface()), end='')"
    texts = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT / "tests")}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        texts.add(done.stdout)
    assert texts == {apisurface.render(apisurface.surface())}


# -- the names that left ------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(lirun._DEPRECATED))
def test_a_name_that_left_the_api_still_imports_with_a_warning(name: str) -> None:
    home, instead = lirun._DEPRECATED[name]
    module, _, renamed = home.partition(":")
    assert name not in lirun.__all__
    assert name not in dir(lirun)
    with pytest.warns(DeprecationWarning, match=re.escape(f"use {instead}")) as caught:
        value = getattr(lirun, name)
    assert module in str(caught[0].message)
    assert value is getattr(sys.modules[module], renamed or name)


def test_a_renamed_name_resolves_to_its_new_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(lirun._DEPRECATED, "OldClient", ("lirun.client:Client", "lirun.Client"))
    with pytest.warns(DeprecationWarning, match="lirun.OldClient is not part"):
        assert lirun.OldClient is lirun.Client


def test_a_public_name_imports_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in lirun.__all__:
            getattr(lirun, name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        lirun.no_such_name  # noqa: B018


# -- the documentation ----------------------------------------------------------------------


def test_docs_api_md_names_every_public_name() -> None:
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`(?:lirun\.)?([A-Za-z_]\w*)", text))
    assert not set(lirun.__all__) - named, "docs/api.md does not mention them"


def test_the_policy_is_linked_from_readme_and_docs_api_md() -> None:
    for page in ("README.md", "docs/api.md", "CHANGELOG.md"):
        assert "versioning.md" in (ROOT / page).read_text(encoding="utf-8"), page

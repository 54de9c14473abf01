"""Nothing outside a provider's own module names a provider (ARCHITECTURE.md, "Where a
change goes"): adding one is one module under ``src/lirun/providers/``, never a branch
elsewhere.

The rule, read with ``ast`` from every module of ``src/lirun`` outside ``providers/``: no
identifier (a name, attribute, function, class, argument, keyword or imported name) and no
string literal (f-string parts included) may contain a built-in provider's name
(``registry.BUILTIN``) as a word. Words are split at anything that is not a letter or
digit and at camelCase humps, so ``LIRUN_CLAUDE_BIN``, ``claude_bin``, ``ClaudeParser``
and ``"@x/claude-code"`` count, and ``"api"`` is not ``"pi"``. Docstrings are prose
explaining a decision by its example and comments are not code, so both may name a CLI;
help texts, messages, examples and tables are string literals and may not (they list
providers from the registry).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from lirun.providers.registry import BUILTIN

SRC = Path(__file__).resolve().parent.parent / "src" / "lirun"
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def words(text: str) -> set[str]:
    """``"LIRUN_CLAUDE_BIN"`` → {lirun, claude, bin}; ``"ClaudeParser"`` → {claude, parser}."""
    return {w.lower() for w in _WORDS.findall(text)}


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the constant nodes that are docstrings (module, class, function)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def code_texts(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every identifier and non-docstring string literal in ``source``."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield line, node.value
        elif isinstance(node, ast.Name):
            yield line, node.id
        elif isinstance(node, ast.Attribute):
            yield line, node.attr
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield line, node.name
        elif isinstance(node, ast.arg | ast.keyword) and node.arg:
            yield line, node.arg
        elif isinstance(node, ast.alias):
            yield line, node.name + " " + (node.asname or "")
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield line, node.module


def naming(source: str, names: set[str]) -> list[tuple[int, str]]:
    return [(line, text) for line, text in code_texts(source) if words(text) & names]


def test_no_module_outside_providers_names_a_provider() -> None:
    names = {provider.name for provider in BUILTIN}  # not a third party's, if one is installed
    assert {"claude", "codex"} <= names
    problems = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC)
        if relative.parts[0] == "providers":
            continue
        for line, text in naming(path.read_text(encoding="utf-8"), names):
            problems.append(f"{relative}:{line}: {text!r}")
    assert problems == []


def test_the_rule_sees_names_in_code_and_not_in_docstrings() -> None:
    """The check can fail: each way of naming a provider in code is caught."""
    source = '''
"""A module docstring may say claude."""
import lirun.providers.claude
from lirun.providers.codex import CodexProvider as Other
ENV = "LIRUN_CLAUDE_BIN"
def f(claude_bin, *, mode="x"):
    """claude is fine here."""
    # codex in a comment
    if provider == "codex":
        return f"{name} or claude-code"
    return obj.codex_bin, g(codex=1), "api", "happy"
class ClaudeThing: ...
'''
    found = {(line, text) for line, text in naming(source, {"claude", "codex", "pi"})}
    lines = sorted({line for line, _ in found})
    assert lines == [3, 4, 5, 6, 9, 10, 11, 12], found
    assert words("application/api") == {"application", "api"}

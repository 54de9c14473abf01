"""Command-line pieces shared by the provider command builders."""

from __future__ import annotations


def prompt_arg(prompt: str) -> list[str]:
    """The prompt as the last argument; behind ``--`` when it would read as an option."""
    return ["--", prompt] if prompt.startswith("-") else [prompt]

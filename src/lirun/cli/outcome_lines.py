"""A record's outcome as plain text lines for ``li status ID``: the evidence it cites and
its artifact verification (each produced, missing and invalid file). Pure: values in,
lines out."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["evidence_lines", "verification_lines"]


def evidence_lines(refs: object) -> list[str]:
    """One ``key=value ...`` line per evidence dictionary."""
    if not isinstance(refs, list):
        return []
    return [
        " ".join(f"{k}={v}" for k, v in ref.items()) if isinstance(ref, Mapping) else str(ref)
        for ref in refs
    ]


def verification_lines(result: object) -> list[str]:
    """The artifact verification verdict, then each produced / missing entry, then each
    check a file there failed (what was found)."""
    if not isinstance(result, Mapping):
        return []
    lines = [f"verdict: {result.get('status', '?')}"]
    for item in result.get("produced") or []:
        lines.append(
            f"produced          {item.get('id')}  {item.get('path')}  {item.get('size')} B"
        )
    for label, key in (
        ("missing required", "missing_required"),
        ("missing optional", "missing_optional"),
    ):
        for item in result.get(key) or []:
            line = f"{label:<17} {item.get('id')}  {item.get('path')}"
            if item.get("problem") and item.get("problem") != "missing":
                from lirun.record.artifacts import describe_problem

                line += f"  ({describe_problem(item['problem'])})"
            lines.append(line)
    for item in result.get("invalid") or []:
        label = "invalid required" if item.get("required", True) else "invalid optional"
        for failure in item.get("failures") or []:
            lines.append(
                f"{label:<17} {item.get('id')}  {item.get('path')}  "
                f"{failure.get('check')}: {failure.get('found')}"
            )
    return lines

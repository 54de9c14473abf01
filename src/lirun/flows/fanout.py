"""Fan-out: the items one ``for_each`` leg expands to, and the ids of its instances."""

from __future__ import annotations

import json

from lirun.flows.spec import MAX_FAN_OUT, ForEach
from lirun.inputfile import InputFileError, read_bounded
from lirun.yamlfile.lines import MAX_FILE_BYTES

__all__ = ["MAX_ITEMS_BYTES", "FanOutError", "expand_items", "instance_id"]

# The items become part of the flow's stored graph and checkpoint: an artifact read for
# them is bounded as the flow file is.
MAX_ITEMS_BYTES = MAX_FILE_BYTES


class FanOutError(ValueError):
    """The items cannot be read, are not a list of text, or are too many."""


def instance_id(leg_id: str, index: int) -> str:
    return f"{leg_id}[{index}]"


def expand_items(for_each: ForEach, artifact_path: str | None = None) -> list[str]:
    """The items, in order: the literal list, or the artifact file's non-empty lines /
    JSON array (``artifact_path``: the resolved path of ``for_each.artifact``)."""
    if for_each.items is not None:
        items = [str(item) for item in for_each.items]
    else:
        if artifact_path is None:
            raise FanOutError(f"for_each: artifact {for_each.artifact} has no file")
        try:
            text = read_bounded(artifact_path, MAX_ITEMS_BYTES).decode("utf-8")
        except (InputFileError, UnicodeDecodeError) as exc:
            raise FanOutError(f"for_each: cannot read {artifact_path}: {exc}") from None
        items = _split(text, for_each.split, artifact_path)
    if len(items) > MAX_FAN_OUT:
        raise FanOutError(f"for_each: {len(items)} items, at most {MAX_FAN_OUT} are allowed")
    return items


def _split(text: str, split: str, where: str) -> list[str]:
    if split == "lines":
        return [line.strip() for line in text.splitlines() if line.strip()]
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FanOutError(f"for_each: {where} is not JSON: {exc}") from None
    if not isinstance(data, list):
        raise FanOutError(f"for_each: {where} holds {type(data).__name__}, not a JSON array")
    return [item if isinstance(item, str) else json.dumps(item) for item in data]

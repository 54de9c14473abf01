"""An event larger than a stored event may be is shrunk, not replaced by its key:
its largest values are dropped first (replaced by a marker, listed in ``_truncated``)
until it fits, and everything else stays as it was."""

from __future__ import annotations

import json
import random
from typing import Any

from lirun.schedules.events import MAX_EVENT_BYTES, Event
from lirun.schedules.shrinking import TRUNCATED, compact, marker, shrink

LIMIT = 4096


def user(login: str) -> dict[str, Any]:
    base = f"https://api.example.com/users/{login}"
    return {"login": login, "id": 1, **{f"{n}_url": f"{base}/{n}" for n in ("a", "b", "c")}}


def pull_request(body_bytes: int) -> dict[str, Any]:
    """The shape of a pull request webhook: the scalars an action reads, a long
    description, and nested objects of many short fields."""
    repo = {"full_name": "o/r", "owner": user("o"), **{f"u{i}_url": "x" * 60 for i in range(40)}}
    return {
        "action": "opened",
        "number": 42,
        "title": "Fix the flaky test",
        "url": "https://example.com/o/r/pull/42",
        "pull_request": {
            "number": 42,
            "title": "Fix the flaky test",
            "body": "b" * body_bytes,
            "user": user("ann"),
            "head": {"ref": "fix-flake", "repo": repo},
            "base": {"ref": "main", "repo": repo},
            "labels": [{"name": "bug"}, {"name": "ci"}],
        },
        "repository": repo,
        "sender": user("ann"),
    }


def dropped_paths(value: Any, original: Any, path: str = "") -> list[str]:
    """The paths where ``value`` differs from ``original``; each must be a marker."""
    if value == original:
        return []
    if isinstance(value, dict) and isinstance(original, dict):
        assert set(value) == set(original)
        return [
            p
            for key in value
            for p in dropped_paths(value[key], original[key], f"{path}.{key}" if path else key)
        ]
    if isinstance(value, list) and isinstance(original, list):
        assert len(value) == len(original)
        return [
            p for i, (v, o) in enumerate(zip(value, original, strict=True))
            for p in dropped_paths(v, o, f"{path}.{i}")
        ]  # fmt: skip
    assert value == marker(len(compact(original))), path
    return [path]


def check(data: dict[str, Any], limit: int) -> dict[str, Any]:
    shrunk = shrink(data, limit)
    assert shrunk is not None
    assert len(compact(shrunk)) <= limit
    paths = shrunk.pop(TRUNCATED)
    assert sorted(dropped_paths(shrunk, data)) == sorted(paths)
    return {**shrunk, TRUNCATED: paths}


def test_an_event_that_fits_is_kept_as_it_is() -> None:
    data = pull_request(100)
    assert shrink(data, 10 * 1024 * 1024) is data
    assert TRUNCATED not in json.loads(Event("k", data).to_json())


def test_a_long_description_is_the_only_thing_dropped_from_a_200_kb_pull_request() -> None:
    data = pull_request(200 * 1024)
    stored = json.loads(Event("d-1", data).to_json())
    assert len(Event("d-1", data).to_json()) <= MAX_EVENT_BYTES
    assert stored[TRUNCATED] == ["pull_request.body"]
    assert stored["pull_request"]["body"] == marker(200 * 1024 + 2)
    del stored[TRUNCATED], stored["pull_request"]["body"]
    del data["pull_request"]["body"]
    assert stored == data


def test_the_largest_value_goes_first_and_smaller_ones_stay() -> None:
    data = {"id": 1, "a": {"small": "s" * 1000, "large": "l" * 3000}, "b": "t" * 800}
    shrunk = check(data, 3000)
    assert shrunk[TRUNCATED] == ["a.large"]
    assert shrunk["a"]["small"] == "s" * 1000
    assert shrunk["b"] == "t" * 800


def test_top_level_scalars_survive_a_long_top_level_text() -> None:
    data = {"number": 7, "title": "A title", "url": "https://x/7", "body": "b" * 50_000}
    shrunk = check(data, LIMIT)
    assert shrunk[TRUNCATED] == ["body"]
    assert (shrunk["number"], shrunk["title"], shrunk["url"]) == (7, "A title", "https://x/7")


def test_a_value_of_many_small_values_is_dropped_whole() -> None:
    data = {"id": 1, "commits": [{"sha": f"{i:040d}", "m": "fix"} for i in range(500)]}
    shrunk = check(data, LIMIT)
    assert shrunk[TRUNCATED] == ["commits"]
    assert shrunk["id"] == 1


def test_an_array_item_is_named_by_its_index() -> None:
    data = {"id": 1, "comments": [{"body": "short"}, {"body": "x" * 9000}, {"body": "ok"}]}
    shrunk = check(data, LIMIT)
    assert shrunk[TRUNCATED] == ["comments.1.body"]
    assert shrunk["comments"][0] == {"body": "short"}


def test_an_event_of_only_short_fields_too_many_to_fit_keeps_its_key() -> None:
    data = {f"k{i:05d}": "v" for i in range(20_000)}
    assert shrink(data, MAX_EVENT_BYTES) is None
    assert json.loads(Event("k", data).to_json()) == {"_key": "k", TRUNCATED: True}


def random_value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth > 4 or roll < 0.3:
        return "x" * min(int(rng.paretovariate(0.8)), 20_000)  # mostly short, a few long
    if roll < 0.4:
        return rng.randint(0, 10**6)
    if roll < 0.7:
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 8))]
    return {f"f{i}": random_value(rng, depth + 1) for i in range(rng.randint(0, 8))}


def test_random_events_fit_and_change_only_where_they_say() -> None:
    rng = random.Random(32)
    shrunk_some = 0
    for _ in range(300):
        data = {"id": rng.randint(0, 99), "title": "t", "payload": random_value(rng, 0)}
        limit = rng.choice((512, 2048, 8192))
        result = shrink(data, limit)
        if result is None or result is data:
            continue
        shrunk_some += 1
        check(data, limit)
        assert (result["id"], result["title"]) == (data["id"], "t")
    assert shrunk_some > 50

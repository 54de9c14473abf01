"""Triggers and durations, table-driven and pure: cron in a zone (daylight saving in
Europe/Berlin and America/New_York on fixed dates), every, at, and refused inputs."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lirun.errors import UsageError
from lirun.schedules.durations import format_duration, parse_duration
from lirun.schedules.triggers import (
    Trigger,
    at_trigger,
    cron_trigger,
    due_between,
    every_trigger,
    format_local,
    local_zone_name,
    next_due,
    parse_time,
    parse_trigger,
)


def epoch(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp())


def local(times: list[int], tz: str) -> list[str]:
    return [format_local(t, tz) for t in times]


# --- durations ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("5m", 300), ("2h", 7200), ("1d", 86400), ("1h30m", 5400),
     ("1d2h3m4s", 93784), (" 90S ", 90), ("100m", 6000), ("300", 300), ("1w", 604800),
     ("1.5h", 5400)],
)  # fmt: skip
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "says"),
    [("", "not a duration"), ("2.5", "whole seconds"), ("0s", "zero"), ("0", "zero"),
     ("1.5.5h", "not a duration"), ("-5m", "negative"), ("0.5s", "whole seconds"),
     ("m", "not a duration"),
     ("30m1h", "largest first"), ("1h1h", "largest first"), ("5 min", "not a duration"),
     ("1e3", "not a duration"), ("nan", "not a duration")],
)  # fmt: skip
def test_invalid_durations_say_what_was_wrong(text: str, says: str) -> None:
    with pytest.raises(UsageError, match=says) as caught:
        parse_duration(text, "--every")
    assert "--every" in str(caught.value)
    assert "1h30m" in str(caught.value)


@pytest.mark.parametrize("seconds", [1, 59, 60, 3600, 5400, 86400, 93784])
def test_format_duration_round_trips(seconds: int) -> None:
    assert parse_duration(format_duration(seconds)) == seconds


# --- cron and daylight saving -------------------------------------------------------------------

DAILY_0230 = "30 2 * * *"


@pytest.mark.parametrize(
    ("tz", "start", "expected"),
    [
        # Berlin springs forward on 2026-03-29 (02:00 -> 03:00): 02:30 does not exist,
        # the schedule fires once, at the first minute after the gap.
        ("Europe/Berlin", "2026-03-28T12:00:00+00:00",
         ["2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"]),
        # Berlin falls back on 2026-10-25 (03:00 -> 02:00): 02:30 happens twice, fires once.
        ("Europe/Berlin", "2026-10-24T12:00:00+00:00",
         ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"]),
        ("America/New_York", "2026-03-07T12:00:00+00:00",
         ["2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"]),
        ("America/New_York", "2026-10-31T12:00:00+00:00",
         ["2026-11-01T02:30:00-05:00", "2026-11-02T02:30:00-05:00"]),
        ("UTC", "2026-03-28T12:00:00+00:00",
         ["2026-03-29T02:30:00+00:00", "2026-03-30T02:30:00+00:00"]),
    ],
)  # fmt: skip
def test_a_daily_0230_fires_once_a_day_across_dst(tz: str, start: str, expected: list[str]) -> None:
    trigger = cron_trigger(DAILY_0230, tz)
    begin = epoch(start)
    times = due_between(trigger, begin, begin + 2 * 86400, 10)
    assert local(times, tz) == expected


def test_fall_back_day_has_one_fire_of_a_daily_and_two_of_an_hourly() -> None:
    trigger = cron_trigger("30 * * * *", "Europe/Berlin")
    start, end = epoch("2026-10-24T22:00:00+00:00"), epoch("2026-10-25T02:00:00+00:00")
    hours = due_between(trigger, start, end, 100)
    # 00:30, 01:30, 02:30 (+02:00), 02:30 (+01:00): the hour that repeats is fired twice.
    assert local(hours, "Europe/Berlin") == [
        "2026-10-25T00:30:00+02:00",
        "2026-10-25T01:30:00+02:00",
        "2026-10-25T02:30:00+02:00",
        "2026-10-25T02:30:00+01:00",
    ]


@pytest.mark.parametrize(
    ("expr", "after", "due"),
    [("0 * * * *", "2026-01-01T10:00:00+00:00", "2026-01-01T11:00:00+00:00"),
     ("0 * * * *", "2026-01-01T10:59:59+00:00", "2026-01-01T11:00:00+00:00"),
     ("*/15 9-17 * * mon-fri", "2026-01-02T17:50:00+00:00", "2026-01-05T09:00:00+00:00"),
     ("0 0 1 1 *", "2026-06-01T00:00:00+00:00", "2027-01-01T00:00:00+00:00"),
     ("* * * * *", "2026-01-01T10:00:30+00:00", "2026-01-01T10:01:00+00:00")],
)  # fmt: skip
def test_cron_next_due_is_strictly_after(expr: str, after: str, due: str) -> None:
    assert next_due(cron_trigger(expr, "UTC"), epoch(after)) == epoch(due)


@pytest.mark.parametrize(
    ("expr", "says"),
    [("61 * * * *", "minute"), ("* * *", "has 3 fields"), ("* * * * * *", "has 6 fields"),
     ("a b c d e", "cron expression"), ("", "has 0 fields"),
     ("0 0 30 2 *", "day-of-month")],
)  # fmt: skip
def test_invalid_cron_is_refused_with_an_example(expr: str, says: str) -> None:
    with pytest.raises(UsageError, match=says) as caught:
        cron_trigger(expr, "UTC")
    assert "30 2 * * *" in str(caught.value)


@pytest.mark.parametrize("tz", ["Mars/Base", "", " UTC", "../etc/passwd", "Europe/"])
def test_unknown_zones_are_refused(tz: str) -> None:
    with pytest.raises(UsageError, match="Europe/Berlin"):
        cron_trigger(DAILY_0230, tz)


# --- every -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("after", "due"),
    [(999, 1600), (1000, 1600), (1001, 1600), (1599, 1600), (1600, 2200), (4000, 4600)],
)
def test_every_is_anchored_on_creation(after: int, due: int) -> None:
    assert next_due(every_trigger("10m", anchor=1000), after) == due


def test_every_due_between_counts_a_long_outage() -> None:
    trigger = every_trigger("1m", anchor=0)
    assert due_between(trigger, 0, 600, 100) == [60 * k for k in range(1, 11)]
    assert len(due_between(trigger, 0, 86400, 101)) == 101  # a worker asks for limit + 1
    assert due_between(trigger, 30, 59, 10) == []


# --- at --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tz", "expected"),
    [("2026-12-24T18:00:00+01:00", None, "2026-12-24T17:00:00+00:00"),
     ("2026-12-24T17:00:00Z", None, "2026-12-24T17:00:00+00:00"),
     ("2026-12-24T17:00:00z", None, "2026-12-24T17:00:00+00:00"),
     ("2026-12-24T18:00:00", "Europe/Berlin", "2026-12-24T17:00:00+00:00"),
     ("2026-07-01T12:00:00-04:00", "Europe/Berlin", "2026-07-01T16:00:00+00:00")],
)  # fmt: skip
def test_at_times(text: str, tz: str | None, expected: str) -> None:
    assert parse_time(text, tz) == epoch(expected)


@pytest.mark.parametrize(
    ("text", "tz", "says"),
    [("2026-12-24T18:00:00", None, "no UTC offset"),
     ("tomorrow", None, "not an RFC 3339"),
     ("2026-13-01T00:00:00Z", None, "not an RFC 3339"),
     ("2026-03-29T02:30:00", "Europe/Berlin", "does not exist"),
     ("2026-10-25T02:30:00", "Europe/Berlin", "happens twice")],
)  # fmt: skip
def test_invalid_at_times(text: str, tz: str | None, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        parse_time(text, tz)


def test_an_at_trigger_is_due_once() -> None:
    trigger = at_trigger("2026-12-24T17:00:00Z", None)
    due = epoch("2026-12-24T17:00:00+00:00")
    assert next_due(trigger, due - 1) == due
    assert next_due(trigger, due) is None
    assert due_between(trigger, 0, due + 10**6, 10) == [due]


# --- one trigger, round trips, the local zone ------------------------------------------------


@pytest.mark.parametrize(
    "given",
    [{}, {"cron": "* * * * *", "every": "1h"}, {"every": "1h", "at": "2026-01-01T00:00:00Z"}],
)
def test_exactly_one_trigger(given: dict[str, Any]) -> None:
    with pytest.raises(UsageError, match="exactly one trigger"):
        parse_trigger(now=0, local_zone="UTC", **given)


@pytest.mark.parametrize(
    "trigger",
    [
        cron_trigger(DAILY_0230, "Europe/Berlin"),
        every_trigger("1h30m", anchor=12345),
        at_trigger("2026-12-24T18:00:00+01:00", None),
    ],
)
def test_triggers_round_trip_and_describe(trigger: Trigger) -> None:
    assert Trigger.from_dict(trigger.to_dict()) == trigger
    assert trigger.describe().startswith(trigger.kind)


def test_a_cron_without_tz_stores_the_local_zone_by_name() -> None:
    trigger = parse_trigger(cron=DAILY_0230, now=0, local_zone="Asia/Tokyo")
    assert trigger.tz == "Asia/Tokyo"


def test_local_zone_name_from_tz_link_or_file(tmp_path: Path) -> None:
    assert local_zone_name({"TZ": "Europe/Berlin"}, str(tmp_path)) == "Europe/Berlin"
    assert local_zone_name({"TZ": ":America/New_York"}, str(tmp_path)) == "America/New_York"
    assert local_zone_name({}, str(tmp_path)) == "UTC"  # no /etc/localtime: UTC
    tz_path = {"TZ": "/usr/share/zoneinfo/posix/Europe/Berlin"}
    assert local_zone_name(tz_path, str(tmp_path)) == "Europe/Berlin"
    with pytest.raises(UsageError, match="not an IANA zone name"):
        local_zone_name({"TZ": "CET-1CEST"}, str(tmp_path))
    (tmp_path / "localtime").symlink_to("/usr/share/zoneinfo/Asia/Tokyo")
    assert local_zone_name({}, str(tmp_path)) == "Asia/Tokyo"
    other = tmp_path / "other"
    other.mkdir()
    (other / "localtime").write_bytes(b"TZif")
    (other / "timezone").write_text("Australia/Sydney\n")
    assert local_zone_name({}, str(other)) == "Australia/Sydney"
    (other / "timezone").unlink()
    with pytest.raises(UsageError, match="give --tz"):
        local_zone_name({}, str(other))


def test_due_times_are_integer_epoch_seconds() -> None:
    due = next_due(cron_trigger(DAILY_0230, "Europe/Berlin"), int(datetime.now(UTC).timestamp()))
    assert isinstance(due, int)

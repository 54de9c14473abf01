"""The one DURATION grammar (``lirun.durations``): what every duration option, setting and
file key reads, and the one-line errors it gives."""

from __future__ import annotations

import pytest

from lirun.durations import FORMS, format_duration, parse_seconds
from lirun.errors import UsageError


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("90", 90), ("2.5", 2.5), (".5", 0.5), ("30s", 30), ("5m", 300), ("2h", 7200),
     ("1d", 86400), ("1w", 604800), ("1h30m", 5400), ("1d12h", 129600), ("1.5d", 129600),
     (" 20S ", 20), (90, 90), (2.5, 2.5)],
)  # fmt: skip
def test_bare_seconds_and_units_are_one_grammar(value: object, seconds: float) -> None:
    assert parse_seconds(value, "--timeout") == seconds


@pytest.mark.parametrize(
    ("value", "says"),
    [("20x", "is not a duration"), ("", "is not a duration"), ("nan", "is not a duration"),
     ("inf", "is not a duration"), ("1e3", "is not a duration"), ("5 m", "is not a duration"),
     ("m", "is not a duration"), ("30m1h", "largest first"), ("1h1h", "largest first"),
     ("-5", "is negative"), ("-1h", "is negative"), ("0", "is zero"), ("0s", "is zero"),
     (True, "is not a duration"), (None, "is not a duration"), (float("nan"), "not a duration"),
     ("9" * 40 + "d", "longer than any duration"), ("99999999999", "is longer than")],
)  # fmt: skip
def test_anything_else_is_one_line_naming_the_option_and_the_forms(
    value: object, says: str
) -> None:
    with pytest.raises(UsageError) as caught:
        parse_seconds(value, "--stall-timeout")
    message = str(caught.value)
    assert message.startswith(f"--stall-timeout {value!r}")
    assert says in message
    assert "\n" not in message
    if "longer" not in says:
        assert FORMS in message


def test_zero_low_and_high_bounds() -> None:
    assert parse_seconds("0", "--grace", zero=True) == 0.0
    with pytest.raises(UsageError, match="give 0 \\(off\\) or"):
        parse_seconds("-1", "--stall-timeout", zero=True)
    with pytest.raises(UsageError, match="is shorter than 1s; give at least 1s"):
        parse_seconds("0.5", "--lease", low=1)
    with pytest.raises(UsageError, match="is longer than 1d; give at most 1d"):
        parse_seconds("25h", "--lease", high=86400)


def test_format_duration_is_the_inverse_for_whole_seconds() -> None:
    for seconds in (1, 59, 60, 3600, 5400, 86400, 93784, 8 * 86400):
        assert parse_seconds(format_duration(seconds)) == seconds
    assert format_duration(0) == "0s"

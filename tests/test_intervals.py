from datetime import timedelta

import pytest

from floorgate.admission import InvalidInput, Scope, format_interval, parse_interval


@pytest.mark.parametrize(
    "text, expected",
    [
        ("90s", timedelta(seconds=90)),
        ("45m", timedelta(minutes=45)),
        ("24h", timedelta(hours=24)),
        ("1d", timedelta(days=1)),
        ("1d12h", timedelta(days=1, hours=12)),
        ("2h30m", timedelta(hours=2, minutes=30)),
        ("PT24H", timedelta(hours=24)),
        ("P1D", timedelta(days=1)),
        ("PT1H30M", timedelta(minutes=90)),
        ("PT0.5S", timedelta(milliseconds=500)),
        ("0", timedelta(0)),
    ],
    ids=lambda v: str(v),
)
def test_accepted_intervals(text: str, expected: timedelta) -> None:
    assert parse_interval(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "5x", "1.5h", "-1h", "h", "24", "PT", "P", "1h1d", "1 d", "one day", "P1DT", "99999d", "PT-1H"],
)
def test_rejected_intervals_name_the_field(text: str) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_interval(text, "--min-interval")
    assert str(err.value).startswith("--min-interval:")
    assert err.value.field == "--min-interval"


@pytest.mark.parametrize(
    "value, text",
    [(timedelta(days=1, hours=12), "1d12h"), (timedelta(seconds=90), "1m30s"), (timedelta(0), "0")],
)
def test_format_round_trips(value: timedelta, text: str) -> None:
    assert format_interval(value) == text
    assert parse_interval(format_interval(value)) == value


def test_scope_forms_and_validation() -> None:
    assert str(Scope.parse("g/a/x")) == "g/a/x"
    assert Scope.parse("g/a") == Scope.agent("g", "a")
    assert Scope.parse("g").kind.value == "goal"
    for bad in ["", "g//x", "g/a/x/y", "g a", "/a"]:
        with pytest.raises(InvalidInput):
            Scope.parse(bad)
    with pytest.raises(ValueError, match="needs its agent"):
        Scope(goal_id="g", automation_id="x")

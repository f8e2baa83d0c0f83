"""The budget: section: one line per mistake, with the fix."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from config.budget import Budget


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"monthly_usd": 0}, "greater than 0"),
        ({"monthly_usd": 100, "actual_percent": [100, 80]}, "must rise and name each percentage once"),
        ({"monthly_usd": 100, "actual_percent": [80, 80]}, "must rise and name each percentage once"),
        ({"monthly_usd": 100, "actual_percent": [], "forecast_percent": []}, "no notification"),
        (
            {"monthly_usd": 100, "actual_percent": list(range(10, 100, 10)), "forecast_percent": [100, 120]},
            "at most 10",
        ),
        ({"monthly_usd": 100, "actual_percent": [0]}, "greater than or equal to 1"),
    ],
)
def test_each_mistake_is_one_line(fields: dict, says: str) -> None:
    with pytest.raises(ValidationError) as err:
        Budget.model_validate(fields)
    assert says in str(err.value)


def test_the_defaults_notify_at_80_and_100_percent_and_a_forecast_past_100() -> None:
    budget = Budget(monthly_usd=5000)
    assert (budget.actual_percent, budget.forecast_percent) == ([80, 100], [100])

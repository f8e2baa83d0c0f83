"""Schema of the ``budget:`` section: an AWS Budgets cost budget for the environment's account, a month at a
time, whose notifications reach the alerts topic (and so the on-call addresses).

The budget covers the whole account: the platform's environments that receive AMIs each have their own account
(config/sharing.py), and a filter on a cost-allocation tag would see $0 until someone activates the tag, so
it would never fire. AWS Budgets takes up to 10 notifications per budget (Budgets API Reference, Notification).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator, model_validator

from config.base import Strict

#: AWS Budgets: "A budget can have up to ten notifications."
MAX_NOTIFICATIONS = 10


def _thresholds(value: list[int]) -> list[int]:
    if sorted(set(value)) != value:
        raise ValueError(f"{value} must rise and name each percentage once; fix: e.g. [50, 80, 100]")
    return value


class Budget(Strict):
    monthly_usd: Annotated[float, Field(gt=0, le=10_000_000, description="the month's budgeted cost, USD")]
    #: Notify when the month's actual cost passes these percentages of ``monthly_usd``.
    actual_percent: list[Annotated[int, Field(ge=1, le=1000)]] = Field(default_factory=lambda: [80, 100])
    #: Notify when AWS forecasts the month's cost past these percentages.
    forecast_percent: list[Annotated[int, Field(ge=1, le=1000)]] = Field(default_factory=lambda: [100])

    @field_validator("actual_percent", "forecast_percent")
    @classmethod
    def _rising(cls, value: list[int]) -> list[int]:
        return _thresholds(value)

    @model_validator(mode="after")
    def _at_most_ten(self) -> Budget:
        count = len(self.actual_percent) + len(self.forecast_percent)
        if count == 0:
            raise ValueError("@actual_percent: no notification; fix: give at least one percentage, e.g. [80, 100]")
        if count > MAX_NOTIFICATIONS:
            raise ValueError(
                f"@actual_percent: {count} notifications; fix: AWS Budgets takes at most {MAX_NOTIFICATIONS} per "
                "budget, actual and forecast together"
            )
        return self

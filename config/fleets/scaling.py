"""What moves a fleet's size between deploys: ``scaling`` (GPU-utilization target tracking or step
scaling, and scheduled actions) and ``warm_pool`` (stopped, pre-initialized instances)."""

from __future__ import annotations

import difflib
import functools
import re
import zoneinfo
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from config.base import Strict

_CRON_FIELD = re.compile(r"^[0-9*/,\-A-Za-z?]+$")

_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_WEEKDAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
#: The five fields of an Auto Scaling recurrence: name, lowest, highest, names allowed (numbered from lowest).
_CRON_FIELDS: tuple[tuple[str, int, int, tuple[str, ...]], ...] = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 6, _WEEKDAYS),
)


@functools.cache
def _time_zones() -> frozenset[str]:
    """The IANA time zone names the standard library knows (the system's tz database or tzdata)."""
    return frozenset(zoneinfo.available_timezones())


def _cron_value(text: str, low: int, names: tuple[str, ...]) -> int | None:
    if text.isdigit():
        return int(text)
    upper = text.upper()
    return names.index(upper) + low if upper in names else None


def cron_field_problem(text: str, position: int) -> str | None:
    """What is wrong with field ``position`` (0-4) of a five-field cron expression, or None: each
    comma-separated item is ``*``, a value, or a range ``a-b``, optionally with a step ``/n``."""
    what, low, high, names = _CRON_FIELDS[position]
    allowed = f"{low}-{high}" + (f" or {names[0]}-{names[-1]}" if names else "")
    for item in text.split(","):
        base, slash, step = item.partition("/")
        if slash and not (step.isdigit() and int(step) >= 1):
            return f"{what} {text!r}: step {step!r} is not a whole number from 1"
        if base == "*":
            continue
        first, dash, last = base.partition("-")
        for part in (first, last) if dash else (first,):
            value = _cron_value(part, low, names)
            if value is None or not low <= value <= high:
                return f"{what} {text!r}: {part!r} is outside {allowed}"
        if dash and _cron_value(first, low, names) > _cron_value(last, low, names):  # type: ignore[operator]
            return f"{what} {text!r}: the range {base!r} runs backwards"
    return None


#: Step scaling judges GPU utilization over whole 5-minute alarm periods (step_scaling.STEP_PERIOD_MINUTES).
_MINUTES = Field(ge=5, le=1440, multiple_of=5, description="whole 5-minute periods, up to a day")


class TargetTracking(Strict):
    """Keep the fleet's average GPU utilization near a target."""

    gpu_utilization_percent: Annotated[float, Field(gt=0, le=100)]


class StepScaling(Strict):
    """Scale out when GPUs stay busy, in when they stay idle (the user's rule: above 85 % for
    15 minutes adds capacity, below 30 % for 30 minutes removes it)."""

    scale_out_above_percent: Annotated[float, Field(gt=0, le=100)] = 85
    scale_out_after_minutes: Annotated[int, _MINUTES] = 15
    scale_out_instances: Annotated[int, Field(ge=1)] = 1
    scale_in_below_percent: Annotated[float, Field(ge=0, lt=100)] = 30
    scale_in_after_minutes: Annotated[int, _MINUTES] = 30
    scale_in_instances: Annotated[int, Field(ge=1)] = 1

    @model_validator(mode="after")
    def _band(self) -> StepScaling:
        if self.scale_in_below_percent >= self.scale_out_above_percent:
            raise ValueError(
                f"@scale_in_below_percent: {self.scale_in_below_percent:g} is not below scale_out_above_percent "
                f"({self.scale_out_above_percent:g}); fix: leave a band between the two so the fleet does not flap"
            )
        return self


class ScheduledAction(Strict):
    """A recurring capacity change: cron in the Auto Scaling form (minute hour day month weekday)."""

    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,40}$")]
    cron: str
    time_zone: str = "UTC"
    min: Annotated[int, Field(ge=0)] | None = None
    max: Annotated[int, Field(ge=0)] | None = None
    desired: Annotated[int, Field(ge=0)] | None = None

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str) -> str:
        fields = value.split()
        if len(fields) != 5 or not all(_CRON_FIELD.match(f) for f in fields):
            raise ValueError(
                f"{value!r} is not a five-field cron expression; fix: write minute hour day-of-month month day-of-week, "
                "e.g. '0 8 * * 1-5'"
            )
        for position, text in enumerate(fields):
            problem = cron_field_problem(text, position)
            if problem is not None:
                raise ValueError(
                    f"{value!r}: {problem}; fix: minute 0-59, hour 0-23, day 1-31, month 1-12 (JAN-DEC), "
                    "day of week 0-6 (SUN-SAT), each as *, a value, a range a-b, a list a,b or a step */n"
                )
        return value

    @field_validator("time_zone")
    @classmethod
    def _time_zone(cls, value: str) -> str:
        zones = _time_zones()
        if value != "UTC" and zones and value not in zones:  # no tz database at all: nothing to check against
            close = difflib.get_close_matches(value, sorted(zones), n=3)
            hint = f"did you mean {', '.join(close)}? " if close else ""
            raise ValueError(
                f"{value!r} is not an IANA time zone; fix: {hint}use a name of the tz database, e.g. America/New_York or UTC"
            )
        return value

    @model_validator(mode="after")
    def _sizes(self) -> ScheduledAction:
        if self.min is None and self.max is None and self.desired is None:
            raise ValueError("@: the action changes nothing; fix: set at least one of min, max, desired")
        lo, hi = self.min, self.max
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"@min: {lo} is more than max ({hi}); fix: make min <= max")
        if self.desired is not None and (
            (lo is not None and self.desired < lo) or (hi is not None and self.desired > hi)
        ):
            raise ValueError(f"@desired: {self.desired} is outside min..max; fix: pick a value in that range")
        return self


class Scaling(Strict):
    target_tracking: TargetTracking | None = None
    step: StepScaling | None = None
    schedules: list[ScheduledAction] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_dynamic(self) -> Scaling:
        if self.target_tracking and self.step:
            raise ValueError(
                "@: target_tracking and step both scale on GPU utilization and would fight; fix: keep one of them"
            )
        names = [a.name for a in self.schedules]
        if len(set(names)) != len(names):
            raise ValueError("@schedules: two scheduled actions share a name; fix: give each its own name")
        return self


class WarmPool(Strict):
    """Stopped, pre-initialized instances: scale-out reaches a ready GPU in minutes, not a full boot."""

    min_size: Annotated[int, Field(ge=0)] = 0
    max_prepared_capacity: Annotated[int, Field(ge=0)] | None = None
    reuse_on_scale_in: bool = True

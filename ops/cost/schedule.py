"""How many instances a fleet runs over a month, from its config's sizes and scheduled actions.

A fleet without scheduled actions runs its configured size every hour. A fleet with them is followed over a
reference year (``REFERENCE_YEAR``, 8,760 hours: a month is a twelfth, 730 hours, as AWS's calculators take
it): from the deploy's sizes, each action fires when its cron (minute hour day-of-month month day-of-week,
as Auto Scaling reads it) matches the local time of its ``time_zone``, daylight saving included, and sets
what it gives, a desired capacity kept inside the new min..max as Auto Scaling keeps it. The year before the
reference year is followed too, so that the reference year starts in the state the schedules leave.

Three levels are counted, as ``cost`` shows them:
- ``min``: the group's minimum, what an idle fleet is scaled in to;
- ``desired``: the size the deploy and the schedules set, where no load moves it;
- ``max``: the maximum, except while a fleet with GPU or request-count scaling is at 0 nodes (no node, no
  metric: nothing scales it out before a schedule raises it).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from config.fleets import Fleet
from config.fleets.scaling import ScheduledAction
from ops.cost.prices import HOURS_PER_MONTH

REFERENCE_YEAR = 2026
YEAR_START = datetime(REFERENCE_YEAR, 1, 1, tzinfo=UTC)
YEAR_END = datetime(REFERENCE_YEAR + 1, 1, 1, tzinfo=UTC)
FOLLOW_FROM = datetime(REFERENCE_YEAR - 1, 1, 1, tzinfo=UTC)
LEVELS = ("min", "desired", "max")

_DAYS = {"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}
_MONTHS = {"JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6, "JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10,
           "NOV": 11, "DEC": 12}  # fmt: skip
#: (low, high, names) of each cron field.
_FIELDS: tuple[tuple[int, int, dict[str, int]], ...] = (
    (0, 59, {}),
    (0, 23, {}),
    (1, 31, {}),
    (1, 12, _MONTHS),
    (0, 7, _DAYS),
)


def _number(text: str, names: dict[str, int]) -> int:
    return names[text] if text in names else int(text)


def _values(field: str, low: int, high: int, names: dict[str, int]) -> frozenset[int]:
    found: set[int] = set()
    for part in field.upper().split(","):
        body, _, step = part.partition("/")
        if body in ("*", "?"):
            start, end = low, high
        else:
            first, _, last = body.partition("-")
            start = _number(first, names)
            end = _number(last, names) if last else (high if step else start)
        if not low <= start <= end <= high or (step and int(step) < 1):
            raise ValueError(part)
        found.update(range(start, end + 1, int(step) if step else 1))
    return frozenset(found)


@dataclass(frozen=True)
class Cron:
    """Five-field cron (minute hour day-of-month month day-of-week; Sunday is 0 or 7)."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    any_day: bool
    any_weekday: bool

    @classmethod
    def parse(cls, expression: str) -> Cron:
        """The cron, or ``ValueError`` naming the field part it cannot read."""
        fields = expression.split()
        if len(fields) != 5:
            raise ValueError(expression)
        minutes, hours, days, months, weekdays = (_values(f, *spec) for f, spec in zip(fields, _FIELDS, strict=True))
        weekdays = frozenset(d % 7 for d in weekdays)
        return cls(minutes, hours, days, months, weekdays, fields[2] in ("*", "?"), fields[4] in ("*", "?"))

    def on(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        in_month, in_week = day.day in self.days, (day.weekday() + 1) % 7 in self.weekdays
        if self.any_day or self.any_weekday:
            return in_month and in_week
        return in_month or in_week  # both restricted: either one, as cron reads it

    def between(self, zone: ZoneInfo, start: datetime, end: datetime) -> Iterator[datetime]:
        """Each time (UTC) in [start, end) at which the cron matches the local time of ``zone``."""
        day = start.astimezone(zone).date() - timedelta(days=1)
        while day <= end.astimezone(zone).date():
            if self.on(day):
                for hour in sorted(self.hours):
                    for minute in sorted(self.minutes):
                        moment = datetime.combine(day, time(hour, minute), zone).astimezone(UTC)
                        if start <= moment < end:
                            yield moment
            day += timedelta(days=1)


@dataclass(frozen=True)
class Size:
    min: int
    max: int
    desired: int

    def after(self, action: ScheduledAction) -> Size:
        low = action.min if action.min is not None else self.min
        high = action.max if action.max is not None else self.max
        desired = action.desired if action.desired is not None else min(max(self.desired, low), high)
        return Size(low, high, desired)


class ScheduleError(ValueError):
    """A scheduled action that cannot be followed: ``field`` (below the environment) and the problem and fix."""

    def __init__(self, field: str, text: str):
        super().__init__(f"{field}: {text}")


def _zone(fleet: Fleet, index: int, action: ScheduledAction) -> ZoneInfo:
    try:
        return ZoneInfo(action.time_zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(
            f"fleets[{fleet.name}].scaling.schedules[{index}].time_zone",
            f"{action.time_zone!r} is not an IANA time zone; fix: use a name such as America/New_York or UTC",
        ) from None


def _cron(fleet: Fleet, index: int, action: ScheduledAction) -> Cron:
    try:
        return Cron.parse(action.cron)
    except (ValueError, KeyError) as err:
        raise ScheduleError(
            f"fleets[{fleet.name}].scaling.schedules[{index}].cron",
            f"{action.cron!r} cannot be read ({err}); fix: minute 0-59, hour 0-23, day 1-31, month 1-12 or "
            "JAN-DEC, weekday 0-7 or SUN-SAT, e.g. '0 8 * * 1-5'",
        ) from None


def timeline(fleet: Fleet) -> list[tuple[datetime, Size]]:
    """The group's size from ``FOLLOW_FROM`` to ``YEAR_END``: the deploy's, then after each action."""
    desired = fleet.capacity.desired if fleet.capacity.desired is not None else fleet.capacity.min
    sizes = [(FOLLOW_FROM, Size(fleet.capacity.min, fleet.capacity.max, desired))]
    actions = fleet.scaling.schedules if fleet.scaling else []
    fired = sorted(
        (moment, action.name, index)
        for index, action in enumerate(actions)
        for moment in _cron(fleet, index, action).between(_zone(fleet, index, action), FOLLOW_FROM, YEAR_END)
    )
    for moment, _, index in fired:
        sizes.append((moment, sizes[-1][1].after(actions[index])))
    return sizes


def dynamic(fleet: Fleet) -> bool:
    """Whether a metric of the nodes scales the fleet (GPU utilization, or requests per target)."""
    metric = bool(fleet.scaling and (fleet.scaling.step or fleet.scaling.target_tracking))
    return metric or bool(fleet.service and fleet.service.load_balancer.requests_per_target)


def level_counts(size: Size, scales_on_metric: bool) -> dict[str, int]:
    stuck = scales_on_metric and size.desired == 0
    return {"min": size.min, "desired": size.desired, "max": 0 if stuck else size.max}


@dataclass(frozen=True)
class Usage:
    """Hours a month at each instance count, per level (a fleet whose size never changes has one count), and
    the warm pool's stopped instance-hours a month per level."""

    hours: dict[str, dict[int, float]]
    scheduled: bool
    warm_hours: dict[str, float]

    def instance_hours(self, level: str) -> float:
        return sum(n * h for n, h in self.hours[level].items())


def warm_instances(fleet: Fleet, running: int, group_max: int) -> int:
    """Instances waiting stopped in the warm pool: the prepared capacity (``max_prepared_capacity``, else the
    group's maximum) less the running ones, at least the pool's ``min_size`` (PutWarmPool)."""
    pool = fleet.warm_pool
    if pool is None:
        return 0
    prepared = pool.max_prepared_capacity if pool.max_prepared_capacity is not None else group_max
    return max(pool.min_size, prepared - running, 0)


def monthly_usage(fleet: Fleet) -> Usage:
    """The fleet's hours a month at each instance count (a Capacity Block fleet has none: see ``blocks``)."""
    if fleet.capacity_block is not None:
        return Usage({level: {} for level in LEVELS}, False, dict.fromkeys(LEVELS, 0.0))
    scheduled = bool(fleet.scaling and fleet.scaling.schedules)
    sizes = timeline(fleet) if scheduled else [(FOLLOW_FROM, timeline(fleet)[0][1])]
    hours: dict[str, dict[int, float]] = {level: defaultdict(float) for level in LEVELS}
    warm = dict.fromkeys(LEVELS, 0.0)
    metric = dynamic(fleet)
    ends = [moment for moment, _ in sizes[1:]] + [YEAR_END]
    for (begin, size), end in zip(sizes, ends, strict=True):
        span = (min(end, YEAR_END) - max(begin, YEAR_START)).total_seconds() / 3600
        if span > 0:
            month_share = span * HOURS_PER_MONTH / (365 * 24)
            for level, count in level_counts(size, metric).items():
                hours[level][count] += month_share
                warm[level] += warm_instances(fleet, count, size.max) * month_share
    return Usage({level: dict(counts) for level, counts in hours.items()}, scheduled, warm)

"""A synthesized group's size over time, from its template: MinSize/MaxSize/DesiredCapacity at the
deploy, then each AWS::AutoScaling::ScheduledAction when its Recurrence (cron, in its TimeZone) or
its StartTime comes, applied as Auto Scaling applies it: the sizes the action gives, and a desired
capacity kept inside the new min..max (a min above it raises it). A group with GPU-metric scaling
policies is taken at its worst: idle, scaled in to its min, and unable to scale out from 0 (no
node, no datapoint)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

_DAYS = {"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}
_MONTHS = {
    m: i + 1 for i, m in enumerate(("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"))
}


def _values(field: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    found: set[int] = set()
    for part in field.upper().split(","):
        body, _, step = part.partition("/")
        if body in ("*", "?"):
            start, end = low, high
        else:
            first, _, last = body.partition("-")
            start = names[first] if first in names else int(first)
            end = (names[last] if last in names else int(last)) if last else (high if step else start)
        found.update(range(start, end + 1, int(step) if step else 1))
    return found


@dataclass(frozen=True)
class Cron:
    """Five-field cron as Auto Scaling reads it (minute hour day-of-month month day-of-week)."""

    minutes: set[int]
    hours: set[int]
    days: set[int]
    months: set[int]
    weekdays: set[int]
    any_day: bool
    any_weekday: bool

    @classmethod
    def parse(cls, expression: str) -> Cron:
        minute, hour, day, month, weekday = expression.split()
        weekdays = {d % 7 for d in _values(weekday, 0, 7, _DAYS)}
        return cls(
            _values(minute, 0, 59, {}),
            _values(hour, 0, 23, {}),
            _values(day, 1, 31, {}),
            _values(month, 1, 12, _MONTHS),
            weekdays,
            day in ("*", "?"),
            weekday in ("*", "?"),
        )

    def matches(self, local: datetime) -> bool:
        if local.minute not in self.minutes or local.hour not in self.hours or local.month not in self.months:
            return False
        day, weekday = local.day in self.days, (local.weekday() + 1) % 7 in self.weekdays
        if self.any_day or self.any_weekday:
            return day and weekday
        return day or weekday  # both restricted: either one


@dataclass(frozen=True)
class Size:
    at: datetime
    min: int
    max: int
    desired: int
    cause: str


def timeline(
    group: dict[str, Any], actions: dict[str, dict[str, Any]], *, dynamic: bool, start: datetime, days: int
) -> list[Size]:
    """Every change of the group's size from the deploy at ``start`` (UTC) for ``days`` days."""
    lo, hi = int(group["MinSize"]), int(group["MaxSize"])
    desired = int(group.get("DesiredCapacity", lo))
    crons = {name: Cron.parse(a["Recurrence"]) for name, a in actions.items() if "Recurrence" in a}
    zones = {name: ZoneInfo(a.get("TimeZone", "UTC")) for name, a in actions.items()}
    once = {
        name: datetime.strptime(a["StartTime"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        for name, a in actions.items()
        if "Recurrence" not in a
    }
    sizes = [Size(start, lo, hi, lo if dynamic else desired, "deploy")]
    for minute in range(1, days * 24 * 60):  # [start, start + days)
        moment = start + timedelta(minutes=minute)
        for name in sorted(actions):
            due = once[name] == moment if name in once else crons[name].matches(moment.astimezone(zones[name]))
            if not due:
                continue
            action, last = actions[name], sizes[-1]
            lo = action.get("MinSize", last.min)
            hi = action.get("MaxSize", last.max)
            desired = action.get("DesiredCapacity", min(max(last.desired, lo), hi))
            sizes.append(Size(moment, lo, hi, lo if dynamic else desired, name))
    return sizes

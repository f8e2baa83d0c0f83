"""Every path to 0 nodes has a path back, followed through the synthesized group and its scheduled
actions over a week of their cron schedules (tests/flows/schedule_timeline.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.fleet_synth import fleets_stack
from tests.fleet_synth import group_id as _group_id
from tests.fleet_synth import of_group as _of_group
from tests.flows.schedule_timeline import Cron, Size, timeline
from tests.synth import StackTemplate, Synth

MONDAY = datetime(2026, 3, 2, tzinfo=UTC)  # a deploy at Monday 00:00 UTC (Sunday evening in New York)
WEEK = timedelta(days=7)


def _fleet_timeline(stack: StackTemplate, fleet: str, start: datetime, days: int) -> list[Size]:
    group = stack.resources("AWS::AutoScaling::AutoScalingGroup")[_group_id(stack, fleet)]["Properties"]
    actions = {
        k: v["Properties"]
        for k, v in stack.resources("AWS::AutoScaling::ScheduledAction").items()
        if v["Properties"]["AutoScalingGroupName"] == {"Ref": _group_id(stack, fleet)}
    }
    dynamic = bool(_of_group(stack, "AWS::AutoScaling::ScalingPolicy", fleet))
    return timeline(group, actions, dynamic=dynamic, start=start, days=days)


def test_cron_reading() -> None:
    weekdays = Cron.parse("0 8 * * 1-5")
    assert weekdays.matches(datetime(2026, 3, 6, 8, 0)) and not weekdays.matches(datetime(2026, 3, 7, 8, 0))
    assert Cron.parse("*/15 20 * * SUN").matches(datetime(2026, 3, 8, 20, 45))


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_every_way_to_0_is_followed_by_a_way_back_within_a_week(synth: Synth, env: str) -> None:
    stack = fleets_stack(synth, env)
    checked = 0
    for fleet in synth.environments[env].fleets:
        sizes = _fleet_timeline(stack, fleet.name, MONDAY, days=14)
        if fleet.scaling is None:
            # nothing moves it: it stays where its config puts it
            assert [s.cause for s in sizes] == ["deploy"], fleet.name
            continue
        for size in sizes:
            if size.desired == 0 and size.at < MONDAY + WEEK:
                checked += 1
                back = [s for s in sizes if size.at < s.at <= size.at + WEEK and s.desired >= 1]
                assert back, f"{env}/{fleet.name}: {size.cause} at {size.at} takes it to 0 and nothing raises it"
    if env == "dev":
        # nights-off at 20:00 New York every day; mornings-on at 08:00 on weekdays
        assert checked == 7
        zeros = [s for s in _fleet_timeline(stack, "inference", MONDAY, 7) if s.desired == 0]
        assert all("nightsoff" in s.cause.lower() for s in zeros)  # only the schedule, never the idle policy


def test_dev_nights_off_comes_back_on_weekday_mornings(synth: Synth) -> None:
    sizes = _fleet_timeline(fleets_stack(synth, "dev"), "inference", MONDAY, days=7)
    ups = [(s.at.strftime("%a %H:%M"), s.min, s.desired) for s in sizes if "mornings" in s.cause.lower()]
    assert ups == [(f"{day} 13:00", 1, 1) for day in ("Mon", "Tue", "Wed", "Thu", "Fri")]  # 08:00 EST
    downs = [s for s in sizes if "nights" in s.cause.lower()]
    assert len(downs) == 7 and all((s.min, s.desired) == (0, 0) for s in downs)


def test_capacity_block_fleet_is_raised_in_its_block_and_at_0_before_it_ends(fleet_synth: Synth) -> None:
    cfg = {f.name: f for f in fleet_synth.environments["dev"].fleets}["block"]
    block = cfg.capacity_block
    assert block is not None
    start = block.start - timedelta(days=1)
    sizes = _fleet_timeline(fleets_stack(fleet_synth), "block", start, days=4)
    assert [s.desired for s in sizes] == [0, 2, 0]
    assert ["deploy" in sizes[0].cause, "BlockStart" in sizes[1].cause, "BlockEnd" in sizes[2].cause] == [True] * 3
    _, raised, lowered = sizes
    assert block.start < raised.at < lowered.at < block.end  # the 0 after the block is where it belongs

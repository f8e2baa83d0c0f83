"""A served fleet whose request-count scaling can take it to 0 has no way back (no target, no datapoint), unless a
schedule raises it: config/fleets/zero_capacity.py refuses it in one line, as it does GPU-utilization scaling."""

from __future__ import annotations

from config.fleets.capacity import Capacity
from config.fleets.scaling import Scaling
from config.fleets.zero_capacity import zero_capacity_problems


def test_request_count_scaling_from_min_0_is_refused_with_the_fix() -> None:
    (problem,) = zero_capacity_problems(Capacity(min=0, max=4), None, None, requests_tracked=True)
    assert problem.startswith("@capacity.min: 0 with request-count scaling (service.load_balancer.requests_per_target)")
    assert "fix: set capacity.min to 1 or more, or add a scaling.schedules entry with min >= 1" in problem


def test_a_schedule_that_raises_the_fleet_is_its_way_back() -> None:
    scaling = Scaling.model_validate(
        {
            "schedules": [
                {"name": "nights-off", "cron": "0 20 * * *", "min": 0, "max": 4, "desired": 0},
                {"name": "mornings-on", "cron": "0 8 * * 1-5", "min": 1},
            ]
        }
    )
    assert zero_capacity_problems(Capacity(min=0, max=4), scaling, None, requests_tracked=True) == []


def test_a_schedule_to_0_with_request_count_scaling_and_nothing_back_is_refused() -> None:
    scaling = Scaling.model_validate({"schedules": [{"name": "nights-off", "cron": "0 20 * * *", "min": 0}]})
    problems = zero_capacity_problems(Capacity(min=1, max=4), scaling, None, requests_tracked=True)
    assert problems == [
        "@scaling.schedules[0]: 'nights-off' can take the fleet to 0 nodes and no schedule raises it again; "
        "fix: add a scaling.schedules entry with min >= 1 (e.g. '0 8 * * 1-5', a weekday morning)"
    ]


def test_without_request_count_scaling_min_0_is_where_the_config_puts_it() -> None:
    assert zero_capacity_problems(Capacity(min=0, max=4), None, None) == []

"""Fleet config mistakes: each gives its exact one-line error (file, field, value, fix)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from config import load_environment
from tests.config.helpers import NIGHTS_OFF, fleet, inference, load_error, valid_dev, write_env

BLOCK = {"id": "cr-0fedcba9876543210", "start": "2026-12-01T11:30:00Z", "end": "2026-12-03T11:30:00Z"}


CASES = [
    pytest.param(
        fleet(instance_types=["p4d.24xlarg"]),
        [
            "dev.yaml: fleets[0].instance_types[0]: p4d.24xlarg is not in the GPU instance catalog; did you mean p4d.24xlarge or p4de.24xlarge? (config/catalog/gpu_instances.csv)"
        ],
        id="unknown-type",
    ),
    pytest.param(
        fleet(instance_types=["m5.large"], efa=False, placement="none"),
        [
            "dev.yaml: fleets[0].instance_types[0]: m5.large is not in the GPU instance catalog; it lists the families p4d, p4de, p5, p5e, p5en, g4dn, g5, g6, g6e; to add a GPU family or size, run scripts/refresh_instance_catalog.py --families m5 (config/catalog/gpu_instances.csv)"
        ],
        id="unknown-family",
    ),
    pytest.param(
        fleet(instance_types=["g4dn.xlarge"]),
        [
            "dev.yaml: fleets[0].instance_types[0]: g4dn.xlarge has no EFA; EFA sizes of g4dn: 8xlarge, 12xlarge, 16xlarge, metal; fix: use one of them or set efa to false"
        ],
        id="efa-without-efa",
    ),
    pytest.param(
        inference(efa=True, instance_types=["g5.48xlarge"], placement="cluster"),
        [
            "dev.yaml: fleets[0].efa: an inference fleet's nodes serve each on its own behind the load balancer, "
            "and the EFA group (all traffic between its members) is the training fleets' too; fix: set efa to "
            "false, or role to training"
        ],
        id="efa-on-inference",
    ),
    pytest.param(
        fleet(availability_zones=["us-east-1a", "us-east-1b"]),
        [
            "dev.yaml: fleets[0].availability_zones: an EFA fleet must stay in one zone (EFA traffic does not cross zones), got us-east-1a, us-east-1b; fix: keep one zone",
            "dev.yaml: fleets[0].placement: a cluster placement group lives in one zone; fix: keep one zone or use spread",
        ],
        id="efa-two-zones",
    ),
    pytest.param(
        fleet(placement="spread"),
        [
            "dev.yaml: fleets[0].placement: spread for an EFA fleet; fix: use cluster (Capacity Blocks, already co-located, are the only exception)"
        ],
        id="efa-spread",
    ),
    pytest.param(
        fleet(capacity={"min": 2, "max": 2}, capacity_block=BLOCK),
        [
            "dev.yaml: fleets[0].placement: a Capacity Block is already co-located and forbids a placement group of ours; fix: set placement to none"
        ],
        id="block-with-placement",
    ),
    pytest.param(
        fleet(placement="none", capacity={"min": 1, "max": 2}, capacity_block=BLOCK),
        [
            "dev.yaml: fleets[0].capacity: a Capacity Block fleet needs min = max (got 1 and 2); fix: set both to the block's instance count"
        ],
        id="block-min-not-max",
    ),
    pytest.param(
        fleet(
            placement="none",
            capacity={"min": 2, "max": 2},
            capacity_block={
                "id": "cr-0fedcba9876543210",
                "start": "2026-12-03T11:30:00Z",
                "end": "2026-12-01T11:30:00Z",
            },
        ),
        [
            "dev.yaml: fleets[0].capacity_block.end: 2026-12-01T11:30:00+00:00 is not after start (2026-12-03T11:30:00+00:00); fix: copy the block's start and end from EC2"
        ],
        id="block-end-before-start",
    ),
    pytest.param(
        fleet(capacity={"min": 3, "max": 2}),
        ["dev.yaml: fleets[0].capacity.min: 3 is more than max (2); fix: make min <= max"],
        id="min-over-max",
    ),
    pytest.param(
        fleet(capacity={"min": 0, "max": 2, "desired": 5}),
        ["dev.yaml: fleets[0].capacity.desired: 5 is outside min..max (0..2); fix: pick a value in that range"],
        id="desired-outside",
    ),
    pytest.param(
        fleet(on_demand_base_capacity=4),
        ["dev.yaml: fleets[0].on_demand_base_capacity: 4 is more than capacity.max (2); fix: lower it to at most max"],
        id="base-over-max",
    ),
    pytest.param(
        fleet(on_demand_percentage_above_base=120),
        [
            "dev.yaml: fleets[0].on_demand_percentage_above_base: 120 is invalid: Input should be less than or equal to 100; fix: use a value <= 100 (a percentage)"
        ],
        id="percent-over-100",
    ),
    pytest.param(
        fleet(instance_types=["g5.xlarge"], efa=False, placement="none", availability_zones=["us-east-1c"]),
        [
            "dev.yaml: fleets[0].availability_zones[0]: 'us-east-1c' is not one of this environment's zones; fix: use one of us-east-1a, us-east-1b"
        ],
        id="zone-not-in-env",
    ),
    pytest.param(
        fleet(availability_zones=["us-east-1b"]),
        [
            "dev.yaml: fleets[0].availability_zones: the EFA fleet 'train' runs in us-east-1b but the Lustre file system is in us-east-1a; fix: put both in the same zone (storage.file_system.availability_zone)"
        ],
        id="efa-zone-not-lustre",
    ),
    pytest.param(
        fleet(capacity_reservation={"preference": "capacity-reservations-only"}),
        [
            "dev.yaml: fleets[0].capacity_reservation.preference: capacity-reservations-only needs the reservations to launch into; fix: add ids (cr-...) or resource_group_arns"
        ],
        id="reservation-only-without-targets",
    ),
    pytest.param(
        fleet(capacity_reservation={"preference": "capacity-reservations-first", "ids": ["r-123"]}),
        [
            "dev.yaml: fleets[0].capacity_reservation.ids[0]: 'r-123' is not a capacity reservation id; fix: copy the cr-... id from the EC2 console or API"
        ],
        id="bad-reservation-id",
    ),
    pytest.param(
        fleet(
            placement="none",
            capacity={"min": 2, "max": 2},
            capacity_reservation={"preference": "capacity-reservations-first"},
            capacity_block=BLOCK,
        ),
        [
            "dev.yaml: fleets[0].capacity_reservation: a fleet uses a Capacity Block or On-Demand Capacity Reservations, not both; fix: remove one"
        ],
        id="block-and-reservation",
    ),
    pytest.param(
        fleet(spot_allocation_strategy="cheapest"),
        [
            "dev.yaml: fleets[0].spot_allocation_strategy: 'cheapest' is invalid: Input should be 'price-capacity-optimized', 'capacity-optimized', 'capacity-optimized-prioritized' or 'lowest-price'; fix: use one of 'price-capacity-optimized', 'capacity-optimized', 'capacity-optimized-prioritized' or 'lowest-price'"
        ],
        id="bad-strategy",
    ),
    pytest.param(
        fleet(instance_types=["p4d.24xlarge", "p4d.24xlarge"]),
        [
            "dev.yaml: fleets[0].instance_types: an instance type is listed twice; fix: list each type once, in preference order"
        ],
        id="type-twice",
    ),
    pytest.param(
        fleet(scaling={"target_tracking": {"gpu_utilization_percent": 70}, "step": {}}),
        [
            "dev.yaml: fleets[0].scaling: target_tracking and step both scale on GPU utilization and would fight; fix: keep one of them"
        ],
        id="target-and-step",
    ),
    pytest.param(
        fleet(scaling={"step": {"scale_out_above_percent": 50, "scale_in_below_percent": 60}}),
        [
            "dev.yaml: fleets[0].scaling.step.scale_in_below_percent: 60 is not below scale_out_above_percent (50); fix: leave a band between the two so the fleet does not flap"
        ],
        id="step-band-inverted",
    ),
    pytest.param(
        fleet(scaling={"step": {"scale_out_after_minutes": 12}}),
        [
            "dev.yaml: fleets[0].scaling.step.scale_out_after_minutes: 12 is invalid: Input should be a multiple of 5; fix: make it a multiple of 5 (whole 5-minute periods, up to a day)"
        ],
        id="step-minutes-not-5",
    ),
    pytest.param(
        fleet(scaling={"schedules": [{"name": "nights", "cron": "0 20 * *", "min": 0}]}),
        [
            "dev.yaml: fleets[0].scaling.schedules[0].cron: '0 20 * *' is not a five-field cron expression; fix: write minute hour day-of-month month day-of-week, e.g. '0 8 * * 1-5'"
        ],
        id="bad-cron",
    ),
    pytest.param(
        fleet(scaling={"schedules": [{"name": "nights", "cron": "0 20 * * *"}]}),
        [
            "dev.yaml: fleets[0].scaling.schedules[0]: the action changes nothing; fix: set at least one of min, max, desired"
        ],
        id="schedule-changes-nothing",
    ),
    pytest.param(
        fleet(instance_types=["g5.xlarge"], efa=False, placement="none", warm_pool={"min_size": 1}),
        [
            "dev.yaml: fleets[0].warm_pool: EC2 Auto Scaling warm pools do not work with Spot or mixed instance types; fix: use one instance type and on_demand_percentage_above_base: 100, or remove warm_pool"
        ],
        id="warm-pool-with-spot",
    ),
    pytest.param(
        fleet(
            instance_types=["g5.xlarge", "g5.2xlarge"],
            efa=False,
            placement="none",
            on_demand_percentage_above_base=100,
            warm_pool={},
        ),
        [
            "dev.yaml: fleets[0].warm_pool: EC2 Auto Scaling warm pools do not work with Spot or mixed instance types; fix: use one instance type and on_demand_percentage_above_base: 100, or remove warm_pool"
        ],
        id="warm-pool-mixed-types",
    ),
    pytest.param(
        fleet(
            instance_types=["g5.xlarge"],
            efa=False,
            placement="none",
            on_demand_percentage_above_base=100,
            warm_pool={"max_prepared_capacity": 1},
        ),
        [
            "dev.yaml: fleets[0].warm_pool.max_prepared_capacity: 1 is below capacity.max (2); fix: it counts the group's instances too: make it at least max, or leave it out"
        ],
        id="warm-pool-prepared-below-max",
    ),
    pytest.param(
        fleet(
            instance_types=["p5.48xlarge"],
            placement="none",
            capacity={"min": 2, "max": 2},
            capacity_block=BLOCK,
            scaling={"target_tracking": {"gpu_utilization_percent": 70}},
        ),
        [
            "dev.yaml: fleets[0].scaling: a Capacity Block fleet has a fixed size (min = max) for the block's window; fix: remove scaling and warm_pool"
        ],
        id="block-with-scaling",
    ),
    pytest.param(
        fleet(refresh={"checkpoint_percentages": [100, 50]}),
        [
            "dev.yaml: fleets[0].refresh.checkpoint_percentages: [100, 50] is not a list of percentages from 1 to 100 in strictly ascending order; fix: list each checkpoint once, smallest first, e.g. [50, 100]"
        ],
        id="refresh-checkpoints-descending",
    ),
    pytest.param(
        fleet(refresh={"checkpoint_percentages": [25, 50]}),
        [
            "dev.yaml: fleets[0].refresh.checkpoint_percentages: [25, 50] ends at 50, so the refresh would stop with part of the fleet on the old AMI; fix: end the list with 100"
        ],
        id="refresh-checkpoints-short-of-100",
    ),
    pytest.param(
        fleet(refresh={"min_healthy_percentage": 120}),
        [
            "dev.yaml: fleets[0].refresh.min_healthy_percentage: 120 is invalid: Input should be less than or equal to 100; fix: use a value <= 100 (a percentage of the desired capacity; default 90)"
        ],
        id="refresh-healthy-over-100",
    ),
    pytest.param(
        fleet(refresh={"checkpoint_delay_minutes": 3000}),
        [
            "dev.yaml: fleets[0].refresh.checkpoint_delay_minutes: 3000 is invalid: Input should be less than or equal to 2880; fix: use a value <= 2880 (48 hours, the instance refresh API's limit)"
        ],
        id="refresh-delay-over-api-limit",
    ),
    pytest.param(
        fleet(refresh={"min_healthy_percentage": -5}, on_demand_percentage_above_base=-1),
        [
            "dev.yaml: fleets[0].on_demand_percentage_above_base: -1 is invalid: Input should be greater than or equal to 0; fix: use a value >= 0 (a percentage)",
            "dev.yaml: fleets[0].refresh.min_healthy_percentage: -5 is invalid: Input should be greater than or equal to 0; fix: use a value >= 0 (a percentage of the desired capacity; default 90)",
        ],
        id="percentages-below-0",
    ),
    pytest.param(
        fleet(scaling={"step": {"scale_in_after_minutes": 0}}),
        [
            "dev.yaml: fleets[0].scaling.step.scale_in_after_minutes: 0 is invalid: Input should be greater than or equal to 5; fix: use a value >= 5 (whole 5-minute periods, up to a day)"
        ],
        id="step-minutes-0",
    ),
    pytest.param(
        fleet(refresh={"rollback_alarms": ["gpu-idle"]}),
        [
            "dev.yaml: fleets[0].refresh.rollback_alarms[0]: 'gpu-idle' is invalid: Input should be 'health-check-failed', 'gpu-temperature-critical', 'capacity-shortfall', 'http-5xx-rate', 'unhealthy-hosts', 'lb-5xx-rate' or 'no-healthy-hosts'; fix: use one of 'health-check-failed', 'gpu-temperature-critical', 'capacity-shortfall', 'http-5xx-rate', 'unhealthy-hosts', 'lb-5xx-rate' or 'no-healthy-hosts'"
        ],
        id="refresh-load-alarm-for-rollback",
    ),
    pytest.param(
        fleet(refresh={"rollback_alarms": ["health-check-failed", "health-check-failed"]}),
        ["dev.yaml: fleets[0].refresh.rollback_alarms: an alarm is listed twice; fix: list each alarm once"],
        id="refresh-alarm-twice",
    ),
    pytest.param(
        fleet(
            instance_types=["p5.48xlarge"],
            placement="none",
            capacity={"min": 2, "max": 2},
            capacity_block=BLOCK,
            refresh={"enabled": False},
        ),
        [
            "dev.yaml: fleets[0].refresh: a Capacity Block fleet is not refreshed automatically (replacing nodes inside the block would cut its jobs short); fix: remove refresh, and deploy the Fleets stack between blocks to move it to a new AMI"
        ],
        id="block-with-refresh",
    ),
    pytest.param(
        inference(
            capacity={"min": 0, "max": 4, "desired": 1}, scaling={"target_tracking": {"gpu_utilization_percent": 70}}
        ),
        [
            "dev.yaml: fleets[0].capacity.min: 0 with target_tracking scaling on GPU utilization: scaled in to 0 nodes, the fleet publishes no utilization and never scales out again; fix: set capacity.min to 1 or more, or add a scaling.schedules entry with min >= 1 (e.g. '0 8 * * 1-5', a weekday morning)"
        ],
        id="zero-target-tracking-min-0",
    ),
    pytest.param(
        inference(scaling={"step": {}, "schedules": [NIGHTS_OFF]}),
        [
            "dev.yaml: fleets[0].scaling.schedules[0]: 'nights-off' can take the fleet to 0 nodes and no schedule raises it again; fix: add a scaling.schedules entry with min >= 1 (e.g. '0 8 * * 1-5', a weekday morning)"
        ],
        id="zero-nights-off-without-morning",
    ),
    pytest.param(
        inference(capacity={"min": 0, "max": 4}, scaling={"step": {}, "schedules": [NIGHTS_OFF]}),
        [
            "dev.yaml: fleets[0].capacity.min: 0 with step scaling on GPU utilization: scaled in to 0 nodes, the fleet publishes no utilization and never scales out again; fix: set capacity.min to 1 or more, or add a scaling.schedules entry with min >= 1 (e.g. '0 8 * * 1-5', a weekday morning)",
            "dev.yaml: fleets[0].scaling.schedules[0]: 'nights-off' can take the fleet to 0 nodes and no schedule raises it again; fix: add a scaling.schedules entry with min >= 1 (e.g. '0 8 * * 1-5', a weekday morning)",
        ],
        id="zero-step-min-0-and-nights-off",
    ),
    pytest.param(
        inference(scaling={"schedules": [{"name": "weekend", "cron": "0 0 * * 6", "max": 0}]}),
        [
            "dev.yaml: fleets[0].scaling.schedules[0]: 'weekend' can take the fleet to 0 nodes and no schedule raises it again; fix: add a scaling.schedules entry with min >= 1 (e.g. '0 8 * * 1-5', a weekday morning)"
        ],
        id="zero-schedule-max-0",
    ),
]


@pytest.mark.parametrize(("fleet_config", "expected"), CASES)
def test_invalid_fleet_gives_exact_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet_config: dict[str, Any], expected: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    data = valid_dev()
    data["fleets"] = [fleet_config]
    write_env(tmp_path, "dev", data)
    assert load_error("dev", tmp_path) == expected


def test_fleet_names_are_unique(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    data = valid_dev()
    data["fleets"] = [fleet(), fleet()]
    write_env(tmp_path, "dev", data)
    assert load_error("dev", tmp_path) == [
        "dev.yaml: fleets[1].name: 'train' is already used by fleets[0]; fix: give each fleet its own name"
    ]


def test_refresh_defaults_and_who_is_rolled() -> None:
    """Defaults: 90 % healthy, checkpoints at 50 and 100 % with 15 minutes between, auto rollback on the
    health and temperature alarms; Capacity Block fleets and ``enabled: false`` are not rolled."""
    from config.fleets import Fleet, Refresh

    refresh = Refresh()
    assert (refresh.min_healthy_percentage, refresh.checkpoint_percentages, refresh.checkpoint_delay_minutes) == (
        90,
        [50, 100],
        15,
    )
    assert refresh.auto_rollback is True
    assert [a.value for a in refresh.rollback_alarms] == ["health-check-failed", "gpu-temperature-critical"]
    assert Fleet.model_validate(fleet()).rollout == Refresh()
    assert Fleet.model_validate(fleet(refresh={"enabled": False})).rollout is None
    block = fleet(instance_types=["p5.48xlarge"], placement="none", capacity={"min": 2, "max": 2}, capacity_block=BLOCK)
    assert Fleet.model_validate(block).rollout is None


@pytest.mark.parametrize(
    "scaling",
    [
        {"step": {}, "schedules": [NIGHTS_OFF, {"name": "mornings-on", "cron": "0 8 * * 1-5", "min": 1}]},
        {
            "target_tracking": {"gpu_utilization_percent": 70},
            "schedules": [{"name": "up", "cron": "0 8 * * *", "min": 2}],
        },
        {"schedules": [{"name": "no-change-of-size", "cron": "0 8 * * *", "max": 4}]},
    ],
    ids=["nights-off-and-mornings-on", "min-0-with-a-raising-schedule", "schedule-never-to-0"],
)
def test_a_fleet_that_comes_back_from_0_is_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scaling: dict[str, Any]
) -> None:
    monkeypatch.chdir(tmp_path)
    data = valid_dev()
    data["fleets"] = [inference(capacity={"min": 0, "max": 4, "desired": 1}, scaling=scaling)]
    write_env(tmp_path, "dev", data)
    (loaded,) = load_environment("dev", tmp_path).fleets
    assert loaded.capacity.min == 0

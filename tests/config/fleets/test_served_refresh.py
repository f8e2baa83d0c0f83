"""A served fleet's refresh launches before it terminates: 100 % stays healthy, ``max_healthy_percentage`` (200 unless
set, 100 to 200) paces it; a value that breaks that or that the instance refresh API refuses is one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from config import load_environment
from tests.config.helpers import first_served, fleet, load_error, valid_dev, write_env

#: Index of the first served fleet of the test dev config (the module is skipped where none serves).
INFERENCE = first_served()


def _served(tmp_path: Path, refresh: dict[str, Any] | None) -> dict[str, Any]:
    data = valid_dev()
    if refresh is None:
        data["fleets"][INFERENCE].pop("refresh", None)
    else:
        data["fleets"][INFERENCE]["refresh"] = refresh
    write_env(tmp_path, "dev", data)
    return data


@pytest.mark.parametrize(
    ("refresh", "expected"),
    [
        (None, (100, 200)),
        ({}, (100, 200)),
        ({"max_healthy_percentage": 110}, (100, 110)),
        ({"min_healthy_percentage": 100, "max_healthy_percentage": 100}, (100, 100)),  # one at a time, still first
    ],
)
def test_a_served_fleet_launches_before_it_terminates(
    tmp_path: Path, refresh: dict[str, Any] | None, expected: tuple[int, int]
) -> None:
    _served(tmp_path, refresh)
    rollout = load_environment("dev", tmp_path).fleets[INFERENCE].rollout
    assert rollout is not None
    assert (rollout.min_healthy_percentage, rollout.max_healthy_percentage) == expected


def test_other_fleets_keep_terminate_and_launch_unless_told() -> None:
    from config.fleets import Fleet

    rollout = Fleet.model_validate(fleet()).rollout
    assert rollout is not None and (rollout.min_healthy_percentage, rollout.max_healthy_percentage) == (90, None)
    told = Fleet.model_validate(fleet(refresh={"min_healthy_percentage": 100, "max_healthy_percentage": 150})).rollout
    assert told is not None and told.max_healthy_percentage == 150


@pytest.mark.parametrize(
    ("refresh", "line"),
    [
        (
            {"min_healthy_percentage": 90},
            "refresh.min_healthy_percentage: 90 lets a refresh stop a served node before its replacement passes the "
            "launch hook (with one node the load balancer answers 503 meanwhile); fix: set it to 100 or leave it "
            "out, and pace the refresh with max_healthy_percentage",
        ),
        (
            {"max_healthy_percentage": 250},
            "refresh.max_healthy_percentage: 250 is invalid: Input should be less than or equal to 200; fix: use a "
            "value <= 200 (a percentage of the desired capacity; the instance refresh API takes 100 to 200)",
        ),
        (
            {"max_healthy_percentage": 90},
            "refresh.max_healthy_percentage: 90 is invalid: Input should be greater than or equal to 100; fix: use a "
            "value >= 100 (a percentage of the desired capacity; the instance refresh API takes 100 to 200)",
        ),
    ],
)
def test_a_served_refresh_that_would_stop_serving_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refresh: dict[str, Any], line: str
) -> None:
    monkeypatch.chdir(tmp_path)
    _served(tmp_path, refresh)
    assert load_error("dev", tmp_path) == [f"dev.yaml: fleets[{INFERENCE}].{line}"]


def test_a_maximum_more_than_100_above_the_minimum_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    data = valid_dev()
    data["fleets"] = [fleet(refresh={"min_healthy_percentage": 50, "max_healthy_percentage": 200})]
    write_env(tmp_path, "dev", data)
    assert load_error("dev", tmp_path) == [
        "dev.yaml: fleets[0].refresh.max_healthy_percentage: 200 is more than 100 above min_healthy_percentage (50), "
        "which the instance refresh API refuses; fix: lower it to at most 150 or raise min_healthy_percentage to at "
        "least 100"
    ]

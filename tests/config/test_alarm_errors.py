"""Alarm thresholds whose meaning cannot work: each is one line naming file, field and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.alarms import COUNT_ALARMS, HEALTH_REPORT_MINUTES, Alarms
from tests.config.helpers import load_error, valid_dev, write_env


def _with(tmp_path: Path, alarms: dict) -> list[str]:
    path = write_env(tmp_path, "dev", {**valid_dev(), "alarms": alarms})
    return [line.replace(f"{path}: ", "dev.yaml: ", 1) for line in load_error("dev", tmp_path)]


@pytest.mark.parametrize("name", COUNT_ALARMS)
def test_a_count_alarm_below_1_would_page_forever(tmp_path: Path, name: str) -> None:
    default = getattr(Alarms(), name)
    lines = _with(tmp_path, {name: {**default.model_dump(), "threshold": 0}})
    assert lines == [
        f"dev.yaml: alarms.{name}.threshold: 0 is always reached by a count; "
        f"fix: use 1 or more (default {default.threshold:g})"
    ]


def test_the_health_data_alarm_needs_a_period_every_node_reports_in(tmp_path: Path) -> None:
    lines = _with(tmp_path, {"health_data_missing": {"threshold": 1, "period_minutes": 10, "evaluation_periods": 2}})
    assert lines == [
        f"dev.yaml: alarms.health_data_missing.period_minutes: 10 is shorter than the {HEALTH_REPORT_MINUTES} minutes "
        f"in which every node reports a health check, so it would page on healthy fleets; fix: use "
        f"{HEALTH_REPORT_MINUTES} or more"
    ]


def test_the_defaults_are_valid() -> None:
    assert Alarms().health_data_missing.period_minutes >= HEALTH_REPORT_MINUTES

"""Schema of the ``alarms:`` section: thresholds, periods and evaluation counts, with the platform's defaults."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from config.base import Strict


class Threshold(Strict):
    """Alarm when the statistic crosses ``threshold`` for ``evaluation_periods`` periods of ``period_minutes``."""

    threshold: float
    period_minutes: Annotated[int, Field(ge=1, le=60)]
    evaluation_periods: Annotated[int, Field(ge=1, le=100)]


def _t(threshold: float, period_minutes: int, evaluation_periods: int) -> Threshold:
    return Threshold(threshold=threshold, period_minutes=period_minutes, evaluation_periods=evaluation_periods)


class Alarms(Strict):
    """Defaults: GPU utilization above 95 % for 10 minutes (warning); GPU temperature above
    85 °C (critical); GPU idle below 30 % for 30 minutes (cost); any failed GPU health check; any
    platform unit down on a node over 10 minutes (the health check runs every 5 or so); fewer health-check results
    than instances in service, for 2 periods of 20 minutes (a node reports at least once in 20: gpu-health is dead or
    cannot publish somewhere); any Spot interruption notice; in-service plus pending below desired for 15 minutes (the
    same threshold and period, for longer than the launch hook's timeout, without pending); FSx free
    capacity below 10 %; FSx throughput above 80 % of the file system's for 15 minutes;
    any security-relevant API change (IAM policy, security group, CloudTrail)."""

    gpu_utilization_high: Threshold = _t(95, 5, 2)
    gpu_temperature_critical: Threshold = _t(85, 1, 2)
    gpu_idle: Threshold = _t(30, 5, 6)
    health_check_failures: Threshold = _t(1, 5, 1)
    platform_units_down: Threshold = _t(1, 10, 1)
    health_data_missing: Threshold = _t(1, 20, 2)
    spot_interruptions: Threshold = _t(1, 5, 1)
    capacity_shortfall: Threshold = _t(1, 5, 3)
    fsx_free_capacity_percent: Threshold = _t(10, 5, 3)
    fsx_throughput_percent: Threshold = _t(80, 5, 3)
    security_changes: Threshold = _t(1, 5, 1)

    @model_validator(mode="after")
    def _meaningful(self) -> Alarms:
        """Counts alarm at 1 or more (a threshold below 1 is always crossed, so it pages forever); the health-data
        alarm needs a period in which every node reports (one check at least every 20 minutes)."""
        problems = [
            f"@{name}.threshold: {getattr(self, name).threshold:g} is always reached by a count; "
            f"fix: use 1 or more (default {Alarms.model_fields[name].default.threshold:g})"
            for name in COUNT_ALARMS
            if getattr(self, name).threshold < 1
        ]
        if self.health_data_missing.period_minutes < HEALTH_REPORT_MINUTES:
            problems.append(
                f"@health_data_missing.period_minutes: {self.health_data_missing.period_minutes} is shorter than the "
                f"{HEALTH_REPORT_MINUTES} minutes in which every node reports a health check, so it would page on "
                f"healthy fleets; fix: use {HEALTH_REPORT_MINUTES} or more"
            )
        if problems:
            raise ValueError("\n".join(problems))
        return self


#: Alarms whose statistic counts events or nodes (0 is the good value).
COUNT_ALARMS = (
    "health_check_failures",
    "platform_units_down",
    "health_data_missing",
    "spot_interruptions",
    "capacity_shortfall",
    "security_changes",
)
#: Every node in service publishes a health-check result at least once in this many minutes (the timer runs 5 minutes
#: after the last check ended, and a check publishes within its DCGM budget).
HEALTH_REPORT_MINUTES = 20

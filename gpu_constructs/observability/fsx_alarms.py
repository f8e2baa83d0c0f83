"""Alarms of the FSx for Lustre file system: free capacity and throughput saturation."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from config.alarms import Alarms, Threshold
from gpu_constructs.observability.alarm_factory import ABOVE, BELOW, AlarmFactory, period

GIB = 1024**3
MB = 1000**2


class FsxAlarms(Construct):
    """Attributes: free_capacity, throughput (alarms); metrics used by the dashboard."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        file_system_id: str,
        storage_capacity_gib: int,
        throughput_mb_per_s: float,
        thresholds: Alarms,
        factory: AlarmFactory,
    ) -> None:
        super().__init__(scope, construct_id)
        dims = {"FileSystemId": file_system_id}
        free_pct, busy = thresholds.fsx_free_capacity_percent, thresholds.fsx_throughput_percent
        self.free_capacity_metric = _fsx_metric(dims, "FreeDataStorageCapacity", "Minimum", period(free_pct))
        self.free_capacity = self._free_capacity_alarm(factory, free_pct, storage_capacity_gib)
        self.throughput_metric = _throughput_used(dims, period(busy), throughput_mb_per_s)
        self.throughput = self._throughput_alarm(factory, busy, throughput_mb_per_s)

    def _free_capacity_alarm(self, factory: AlarmFactory, free_pct: Threshold, capacity_gib: int) -> cloudwatch.Alarm:
        """Free capacity below ``free_pct`` percent of ``capacity_gib``; no data is breaching."""
        return factory.metric_alarm(
            self,
            "FreeCapacityLow",
            name="fsx-free-capacity-low",
            description=f"WARNING Lustre: less than {free_pct.threshold:g} % of {capacity_gib} GiB free",
            metric=self.free_capacity_metric,
            threshold=free_pct.model_copy(update={"threshold": capacity_gib * GIB * free_pct.threshold / 100}),
            comparison=BELOW,
            missing_data=cloudwatch.TreatMissingData.BREACHING,
        )

    def _throughput_alarm(self, factory: AlarmFactory, busy: Threshold, throughput_mb_per_s: float) -> cloudwatch.Alarm:
        """Reads and writes above ``busy`` percent of the file system's throughput."""
        return factory.metric_alarm(
            self,
            "ThroughputSaturated",
            name="fsx-throughput-saturated",
            description=f"WARNING Lustre: above {busy.threshold:g} % of its {throughput_mb_per_s:g} MB/s",
            metric=self.throughput_metric,
            threshold=busy,
            comparison=ABOVE,
        )


def _fsx_metric(dims: dict[str, str], metric_name: str, statistic: str, every: Duration) -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace="AWS/FSx", metric_name=metric_name, dimensions_map=dims, statistic=statistic, period=every
    )


def _throughput_used(dims: dict[str, str], every: Duration, throughput_mb_per_s: float) -> cloudwatch.MathExpression:
    """Bytes read and written per second over ``every``, as a percent of ``throughput_mb_per_s``."""
    return cloudwatch.MathExpression(
        expression=f"100 * (r + w) / PERIOD(r) / {round(throughput_mb_per_s * MB)}",
        using_metrics={
            "r": _fsx_metric(dims, "DataReadBytes", "Sum", every),
            "w": _fsx_metric(dims, "DataWriteBytes", "Sum", every),
        },
        label="throughput used (%)",
        period=every,
    )

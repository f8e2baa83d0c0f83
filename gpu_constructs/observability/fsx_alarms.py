"""Alarms of the FSx for Lustre file system: free capacity and throughput saturation."""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from config.alarms import Alarms
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
        t = thresholds
        dims = {"FileSystemId": file_system_id}
        free_pct = t.fsx_free_capacity_percent
        self.free_capacity_metric = cloudwatch.Metric(
            namespace="AWS/FSx",
            metric_name="FreeDataStorageCapacity",
            dimensions_map=dims,
            statistic="Minimum",
            period=period(free_pct),
        )
        self.free_capacity = factory.metric_alarm(
            self,
            "FreeCapacityLow",
            name="fsx-free-capacity-low",
            description=f"WARNING Lustre: less than {free_pct.threshold:g} % of {storage_capacity_gib} GiB free",
            metric=self.free_capacity_metric,
            threshold=free_pct.model_copy(update={"threshold": storage_capacity_gib * GIB * free_pct.threshold / 100}),
            comparison=BELOW,
            missing_data=cloudwatch.TreatMissingData.BREACHING,
        )
        busy = t.fsx_throughput_percent
        busy_period = period(busy)
        self.throughput_metric = cloudwatch.MathExpression(
            expression=f"100 * (r + w) / PERIOD(r) / {round(throughput_mb_per_s * MB)}",
            using_metrics={
                "r": cloudwatch.Metric(
                    namespace="AWS/FSx",
                    metric_name="DataReadBytes",
                    dimensions_map=dims,
                    statistic="Sum",
                    period=busy_period,
                ),
                "w": cloudwatch.Metric(
                    namespace="AWS/FSx",
                    metric_name="DataWriteBytes",
                    dimensions_map=dims,
                    statistic="Sum",
                    period=busy_period,
                ),
            },
            label="throughput used (%)",
            period=busy_period,
        )
        self.throughput = factory.metric_alarm(
            self,
            "ThroughputSaturated",
            name="fsx-throughput-saturated",
            description=f"WARNING Lustre: above {busy.threshold:g} % of its {throughput_mb_per_s:g} MB/s",
            metric=self.throughput_metric,
            threshold=busy,
            comparison=ABOVE,
        )

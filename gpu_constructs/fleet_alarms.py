"""Alarms of one GPU fleet, from the agent's GPU metrics, the node health check and Auto Scaling."""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from config.alarms import Alarms
from gpu_constructs.alarm_factory import ABOVE, AT_LEAST, BELOW, AlarmFactory, period
from gpu_constructs.fleet_metrics import gpu_metric

#: Published by the node's GPU health check (scripts/node/gpu_health.py).
HEALTH_METRIC = "GpuHealthCheckFailed"


class FleetAlarms(Construct):
    """Utilization high (warning), temperature (critical), idle (cost), health-check failures,
    capacity shortfall, and the composite "fleet unhealthy" (health, shortfall or temperature).

    Attributes:
        alarms (name -> alarm), unhealthy (the composite alarm).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        fleet_name: str,
        group_name: str,
        namespace: str,
        thresholds: Alarms,
        factory: AlarmFactory,
    ) -> None:
        super().__init__(scope, construct_id)
        t = thresholds
        asg = {"AutoScalingGroupName": group_name}
        self.alarms: dict[str, cloudwatch.Alarm] = {}

        def add(key: str, **kwargs: object) -> None:
            self.alarms[key] = factory.metric_alarm(self, key, name=f"{fleet_name}-{key}", **kwargs)

        add(
            "gpu-utilization-high",
            description=f"WARNING {fleet_name}: GPU utilization above {t.gpu_utilization_high.threshold:g} %",
            metric=gpu_metric(
                namespace, group_name, "utilization_gpu", "Average", t.gpu_utilization_high.period_minutes
            ),
            threshold=t.gpu_utilization_high,
            comparison=ABOVE,
        )
        add(
            "gpu-temperature-critical",
            description=f"CRITICAL {fleet_name}: a GPU is above {t.gpu_temperature_critical.threshold:g} °C",
            metric=gpu_metric(
                namespace, group_name, "temperature_gpu", "Maximum", t.gpu_temperature_critical.period_minutes
            ),
            threshold=t.gpu_temperature_critical,
            comparison=ABOVE,
        )
        add(
            "gpu-idle",
            description=f"COST {fleet_name}: GPU utilization below {t.gpu_idle.threshold:g} % (paying for idle GPUs)",
            metric=gpu_metric(namespace, group_name, "utilization_gpu", "Average", t.gpu_idle.period_minutes),
            threshold=t.gpu_idle,
            comparison=BELOW,
        )
        add(
            "health-check-failed",
            description=f"CRITICAL {fleet_name}: a node failed its GPU health check and is being replaced",
            metric=cloudwatch.Metric(
                namespace=namespace,
                metric_name=HEALTH_METRIC,
                dimensions_map=asg,
                statistic="Maximum",
                period=period(t.health_check_failures),
            ),
            threshold=t.health_check_failures,
            comparison=AT_LEAST,
        )
        shortfall_period = period(t.capacity_shortfall)
        add(
            "capacity-shortfall",
            description=f"WARNING {fleet_name}: fewer instances in service than desired (no capacity?)",
            metric=cloudwatch.MathExpression(
                expression="desired - inservice",
                using_metrics={
                    "desired": cloudwatch.Metric(
                        namespace="AWS/AutoScaling",
                        metric_name="GroupDesiredCapacity",
                        dimensions_map=asg,
                        statistic="Average",
                        period=shortfall_period,
                    ),
                    "inservice": cloudwatch.Metric(
                        namespace="AWS/AutoScaling",
                        metric_name="GroupInServiceInstances",
                        dimensions_map=asg,
                        statistic="Average",
                        period=shortfall_period,
                    ),
                },
                label="instances missing",
                period=shortfall_period,
            ),
            threshold=t.capacity_shortfall,
            comparison=AT_LEAST,
        )
        self.unhealthy = cloudwatch.CompositeAlarm(
            self,
            "Unhealthy",
            composite_alarm_name=f"{factory.prefix}-{fleet_name}-unhealthy",
            alarm_description=f"CRITICAL {fleet_name}: GPU health failures, capacity shortfall or overheating",
            alarm_rule=cloudwatch.AlarmRule.any_of(
                *(
                    cloudwatch.AlarmRule.from_alarm(self.alarms[k], cloudwatch.AlarmState.ALARM)
                    for k in ("health-check-failed", "capacity-shortfall", "gpu-temperature-critical")
                )
            ),
        )
        factory.notify(self.unhealthy)

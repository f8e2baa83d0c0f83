"""Alarms of one GPU fleet, from the agent's GPU metrics, the node health check and Auto Scaling."""

from __future__ import annotations

from collections.abc import Callable

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from config.alarms import Alarms, Threshold
from gpu_constructs.fleet.fleet_metrics import gpu_metric
from gpu_constructs.observability.alarm_factory import ABOVE, AT_LEAST, BELOW, AlarmFactory, period

#: Published by the node's GPU health check (scripts/node/gpu_health.py).
HEALTH_METRIC = "GpuHealthCheckFailed"
#: Published by the same check: the platform's units that are down on the node (scripts/node/health/units.py).
UNITS_DOWN_METRIC = "PlatformUnitsDown"
#: Nodes short of desired for longer than the launch hook holds a launch.
LAUNCH_STALLED = "launch-stalled"
#: Fewer health-check results than instances in service: gpu-health dead (or unable to publish) on some node.
HEALTH_DATA_MISSING = "health-data-missing"
#: Auto Scaling group metrics (AWS/AutoScaling) by the id the alarm expressions give them.
GROUP_METRICS = {
    "desired": "GroupDesiredCapacity",
    "inservice": "GroupInServiceInstances",
    "pending": "GroupPendingInstances",
}


def periods_longer_than(timeout: Duration, period_minutes: int) -> int:
    """The fewest whole periods that a wait of at most ``timeout`` cannot fill: a node held that
    long covers at most ``timeout // period`` whole periods."""
    return int(timeout.to_minutes()) // period_minutes + 1


def _group_metrics(asg: dict[str, str], every: Duration) -> Callable[..., dict[str, cloudwatch.IMetric]]:
    def metrics(*ids: str) -> dict[str, cloudwatch.IMetric]:
        return {
            key: cloudwatch.Metric(
                namespace="AWS/AutoScaling",
                metric_name=GROUP_METRICS[key],
                dimensions_map=asg,
                statistic="Average",
                period=every,
            )
            for key in ids
        }

    return metrics


class FleetAlarms(Construct):
    """Utilization high (warning), temperature (critical), idle (cost), health-check failures,
    a platform unit down on a node (warning), health-check results missing from nodes in service (warning),
    capacity shortfall, stalled launches, and the composite "fleet unhealthy" (health, shortfall, stalled
    launches or temperature).

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
        launch_hook_timeout: Duration,
        terminate_hook_timeout: Duration,
    ) -> None:
        super().__init__(scope, construct_id)
        self._fleet_name = fleet_name
        self._group_name = group_name
        self._namespace = namespace
        self._factory = factory
        self._asg = {"AutoScalingGroupName": group_name}
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        self._gpu_alarms(thresholds)
        self._node_health_alarms(thresholds)
        self._health_data_missing(thresholds.health_data_missing)
        self._capacity_alarms(thresholds.capacity_shortfall, launch_hook_timeout, terminate_hook_timeout)
        self.unhealthy = self._unhealthy()

    def _add(
        self,
        key: str,
        *,
        description: str,
        metric: cloudwatch.IMetric,
        threshold: Threshold,
        comparison: cloudwatch.ComparisonOperator,
    ) -> None:
        """The alarm ``key`` (named ``<prefix>-<fleet>-<key>``) into ``alarms``; missing data is not breaching."""
        self.alarms[key] = self._factory.metric_alarm(
            self,
            key,
            name=f"{self._fleet_name}-{key}",
            description=description,
            metric=metric,
            threshold=threshold,
            comparison=comparison,
        )

    def _node_metric(self, name: str, statistic: str, threshold: Threshold) -> cloudwatch.Metric:
        """A metric the nodes' health check publishes per group (no per-node dimension)."""
        return cloudwatch.Metric(
            namespace=self._namespace,
            metric_name=name,
            dimensions_map=self._asg,
            statistic=statistic,
            period=period(threshold),
        )

    def _gpu_metric(self, measurement: str, statistic: str, threshold: Threshold) -> cloudwatch.Metric:
        """A GPU measurement the CloudWatch agent publishes for the group."""
        return gpu_metric(self._namespace, self._group_name, measurement, statistic, threshold.period_minutes)

    def _gpu_alarms(self, t: Alarms) -> None:
        """Utilization high (warning), temperature (critical) and idle GPUs (cost), from the agent's metrics."""
        fleet_name = self._fleet_name
        self._add(
            "gpu-utilization-high",
            description=f"WARNING {fleet_name}: GPU utilization above {t.gpu_utilization_high.threshold:g} %",
            metric=self._gpu_metric("utilization_gpu", "Average", t.gpu_utilization_high),
            threshold=t.gpu_utilization_high,
            comparison=ABOVE,
        )
        self._add(
            "gpu-temperature-critical",
            description=f"CRITICAL {fleet_name}: a GPU is above {t.gpu_temperature_critical.threshold:g} °C",
            metric=self._gpu_metric("temperature_gpu", "Maximum", t.gpu_temperature_critical),
            threshold=t.gpu_temperature_critical,
            comparison=ABOVE,
        )
        self._add(
            "gpu-idle",
            description=f"COST {fleet_name}: GPU utilization below {t.gpu_idle.threshold:g} % (paying for idle GPUs)",
            metric=self._gpu_metric("utilization_gpu", "Average", t.gpu_idle),
            threshold=t.gpu_idle,
            comparison=BELOW,
        )

    def _node_health_alarms(self, t: Alarms) -> None:
        """A node failed its GPU health check (critical); a platform unit is down on a node (warning)."""
        fleet_name = self._fleet_name
        self._add(
            "health-check-failed",
            description=f"CRITICAL {fleet_name}: a node failed its GPU health check and is being replaced",
            metric=self._node_metric(HEALTH_METRIC, "Maximum", t.health_check_failures),
            threshold=t.health_check_failures,
            comparison=AT_LEAST,
        )
        # A dead termination or Spot watcher (or the fleet's service) leaves the GPUs fine, so it is not in the
        # composite: no checkpoint before a node leaves, a termination hook left to time out. Every node publishes
        # its count at each health check (every 5 minutes after the last one ended); a period of 10 holds one.
        self._add(
            "platform-units-down",
            description=(
                f"WARNING {fleet_name}: a platform unit is down on a node (termination or Spot watcher, or the "
                "fleet's service): no checkpoint before it leaves; the node's gpu-health.log names the unit"
            ),
            metric=self._node_metric(UNITS_DOWN_METRIC, "Maximum", t.platform_units_down),
            threshold=t.platform_units_down,
            comparison=AT_LEAST,
        )

    def _health_data_missing(self, missing: Threshold) -> None:
        """Fewer health-check results than nodes in service all period: gpu-health dead or mute on some node."""
        # gpu-health itself dead (or unable to publish: no boto3, no permission) on a node in service: no health
        # check, no PlatformUnitsDown (it is what counts the units), and the alarms above see missing data, which is
        # not breaching. Every node in service publishes GpuHealthCheckFailed at each check (the timer starts one
        # 5 minutes after the last ended, 10 minutes after boot at first; a check publishes within its DCGM level-1
        # budget, 3 minutes), so over a period of 20 minutes each node that was in service all along (the group's
        # Minimum) sends at least one result. The metric has no per-node dimension, so results are counted, not nodes:
        # fewer results than such nodes means at least one of them sent none (never a false alarm); a dead check
        # among many healthy ones, each sending 2 or 3, may hide. No result at all (FILL) is 0: every node silent.
        # Launching nodes publish at their bootstrap's check too, which only adds results.
        self._add(
            HEALTH_DATA_MISSING,
            description=(
                f"WARNING {self._fleet_name}: fewer GPU health-check results than instances in service over "
                f"{missing.period_minutes} minutes: gpu-health.timer/service is dead or cannot publish on a node "
                "(no health check, no unit count there); see the node's gpu-health.log and `systemctl status "
                "gpu-health.service`"
            ),
            metric=cloudwatch.MathExpression(
                expression="inservice - FILL(results, 0)",
                using_metrics={
                    "inservice": cloudwatch.Metric(
                        namespace="AWS/AutoScaling",
                        metric_name=GROUP_METRICS["inservice"],
                        dimensions_map=self._asg,
                        statistic="Minimum",
                        period=period(missing),
                    ),
                    "results": self._node_metric(HEALTH_METRIC, "SampleCount", missing),
                },
                label="instances in service all period less health-check results",
                period=period(missing),
            ),
            threshold=missing,
            comparison=AT_LEAST,
        )

    def _capacity_alarms(
        self, shortfall: Threshold, launch_hook_timeout: Duration, terminate_hook_timeout: Duration
    ) -> None:
        """Capacity shortfall (nodes neither in service nor launching) and stalled launches."""
        # Launching nodes are Pending (Pending:Wait while the launch hook holds them for their GPU
        # check and Lustre mount): a scale-out is not a shortfall. Missing capacity is what even
        # the pending nodes do not cover (EC2 had none to give); a launch that never completes is
        # a node short for longer than the launch hook can hold it.
        group_metric = _group_metrics(self._asg, period(shortfall))
        self._add(
            "capacity-shortfall",
            description=(
                f"WARNING {self._fleet_name}: fewer instances in service or launching than desired (no capacity?)"
            ),
            metric=cloudwatch.MathExpression(
                expression="desired - (inservice + pending)",
                using_metrics=group_metric("desired", "inservice", "pending"),
                label="instances missing, launching ones counted",
                period=period(shortfall),
            ),
            threshold=shortfall,
            comparison=AT_LEAST,
        )
        stalled = Threshold(
            threshold=shortfall.threshold,
            period_minutes=shortfall.period_minutes,
            # A node replaced (health check, Spot, refresh) is out of service while the terminate hook holds it
            # and while its replacement bootstraps: only a shortfall longer than both is a stalled launch.
            evaluation_periods=periods_longer_than(
                launch_hook_timeout.plus(terminate_hook_timeout), shortfall.period_minutes
            ),
        )
        self._add(
            LAUNCH_STALLED,
            description=(
                f"WARNING {self._fleet_name}: fewer instances in service than desired for longer than the launch "
                f"hook's {launch_hook_timeout.to_minutes():g} minutes after the terminate hook's "
                f"{terminate_hook_timeout.to_minutes():g} (launches keep failing their bootstrap)"
            ),
            metric=cloudwatch.MathExpression(
                expression="desired - inservice",
                using_metrics=group_metric("desired", "inservice"),
                label="instances not in service",
                period=period(stalled),
            ),
            threshold=stalled,
            comparison=AT_LEAST,
        )

    def _unhealthy(self) -> cloudwatch.CompositeAlarm:
        """The composite "fleet unhealthy": health failures, shortfall, stalled launches or overheating."""
        fleet_name = self._fleet_name
        unhealthy = cloudwatch.CompositeAlarm(
            self,
            "Unhealthy",
            composite_alarm_name=f"{self._factory.prefix}-{fleet_name}-unhealthy",
            alarm_description=(
                f"CRITICAL {fleet_name}: GPU health failures, capacity shortfall, stalled launches or overheating"
            ),
            alarm_rule=cloudwatch.AlarmRule.any_of(
                *(
                    cloudwatch.AlarmRule.from_alarm(self.alarms[k], cloudwatch.AlarmState.ALARM)
                    for k in ("health-check-failed", "capacity-shortfall", LAUNCH_STALLED, "gpu-temperature-critical")
                )
            ),
        )
        self._factory.notify(unhealthy)
        return unhealthy

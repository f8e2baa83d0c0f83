"""One CloudWatch dashboard per environment: every fleet's GPUs and nodes, the file system, the alarms."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from gpu_constructs.fleet.fleet_metrics import gpu_metric
from gpu_constructs.observability.service_alarms import ServiceTarget, error_rate, service_metric

#: Published by the node's GPU health check: one per node and market (spot | on-demand).
NODE_RUNNING_METRIC = "NodeRunning"
MARKETS = ("spot", "on-demand")
#: Published by the node's GPU health check for each reason class it failed on (an Xid code, a DCGM
#: test, EFA, the fabric), with the group and the class as dimensions (scripts/node/health/act.py).
NODE_UNHEALTHY_METRIC = "GpuNodeUnhealthy"
REASON_DIMENSION = "Reason"


def replaced_by_reason(namespace: str, group_name: str) -> cloudwatch.MathExpression:
    """Every reason class one fleet's nodes failed on, summed per day: a SEARCH, since the classes
    (Xid 79, DCGM memory test, ...) are not known in advance."""
    search = (
        f"SEARCH('{{{namespace},AutoScalingGroupName,{REASON_DIMENSION}}} "
        f'MetricName="{NODE_UNHEALTHY_METRIC}" AutoScalingGroupName="{group_name}"\', \'Sum\', 86400)'
    )
    return cloudwatch.MathExpression(expression=search, label="", period=Duration.days(1))


@dataclass(frozen=True)
class FleetPanel:
    fleet_name: str
    group_name: str


class PlatformDashboard(Construct):
    """Attributes: dashboard."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        dashboard_name: str,
        namespace: str,
        fleets: Sequence[FleetPanel],
        fsx_throughput: cloudwatch.IMetric,
        fsx_free_capacity: cloudwatch.IMetric,
        alarms: Sequence[cloudwatch.IAlarm],
        services: Sequence[ServiceTarget] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=dashboard_name)
        self.dashboard.add_widgets(cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(alarms), width=24))
        for panel in fleets:
            self.dashboard.add_widgets(*_fleet_row(namespace, panel))
        for service in services:
            self.dashboard.add_widgets(*service_row(service))
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(title="Lustre: throughput used (%)", left=[fsx_throughput], width=12),
            cloudwatch.GraphWidget(title="Lustre: free capacity (bytes)", left=[fsx_free_capacity], width=12),
        )


def _fleet_row(namespace: str, panel: FleetPanel) -> list[cloudwatch.IWidget]:
    """A fleet's row: GPU utilization, memory, temperature and power, nodes by market, and a week of nodes
    found unhealthy by reason."""
    name, group = panel.fleet_name, panel.group_name

    def gpu(measurement: str, statistic: str) -> cloudwatch.Metric:
        return gpu_metric(namespace, group, measurement, statistic, 1)

    return [
        cloudwatch.GraphWidget(
            title=f"{name}: GPU utilization (%)",
            left=[gpu("utilization_gpu", "Average"), gpu("utilization_gpu", "Maximum")],
            width=6,
        ),
        cloudwatch.GraphWidget(
            title=f"{name}: GPU memory",
            left=[gpu("utilization_memory", "Average")],
            right=[gpu("memory_used", "Average")],
            width=6,
        ),
        cloudwatch.GraphWidget(
            title=f"{name}: GPU temperature (°C) and power (W)",
            left=[gpu("temperature_gpu", "Maximum")],
            right=[gpu("power_draw", "Average")],
            width=6,
        ),
        cloudwatch.GraphWidget(
            title=f"{name}: nodes by market",
            left=[_nodes_running(namespace, group, market) for market in MARKETS],
            stacked=True,
            width=6,
        ),
        cloudwatch.GraphWidget(
            title=f"{name}: nodes found unhealthy this week, by reason",
            left=[replaced_by_reason(namespace, group)],
            view=cloudwatch.GraphWidgetView.BAR,
            period=Duration.days(1),
            start="-P7D",
            width=24,
        ),
    ]


def _nodes_running(namespace: str, group_name: str, market: str) -> cloudwatch.Metric:
    """The fleet's nodes of one market (spot | on-demand), as their health checks count them."""
    return cloudwatch.Metric(
        namespace=namespace,
        metric_name=NODE_RUNNING_METRIC,
        dimensions_map={"AutoScalingGroupName": group_name, "Market": market},
        statistic="Sum",
        period=Duration.minutes(5),
        label=market,
    )


def service_row(target: ServiceTarget) -> list[cloudwatch.IWidget]:
    """A served fleet's row: requests, 5xx, p99 response time, healthy and unhealthy hosts."""
    name, minute = target.fleet_name, Duration.minutes(1)
    return [
        cloudwatch.GraphWidget(
            title=f"{name}: requests per minute",
            left=[service_metric(target, "RequestCount", "Sum", minute, "requests")],
            width=6,
        ),
        cloudwatch.GraphWidget(
            title=f"{name}: 5xx",
            left=[
                service_metric(target, "HTTPCode_Target_5XX_Count", "Sum", minute, "from the nodes"),
                service_metric(target, "HTTPCode_ELB_5XX_Count", "Sum", minute, "from the load balancer"),
            ],
            right=[error_rate(target, Duration.minutes(5))],
            width=6,
        ),
        cloudwatch.GraphWidget(
            title=f"{name}: response time (s)",
            left=[
                service_metric(target, "TargetResponseTime", "p99", minute, "p99"),
                service_metric(target, "TargetResponseTime", "p50", minute, "p50"),
            ],
            width=6,
        ),
        cloudwatch.GraphWidget(
            title=f"{name}: hosts",
            left=[
                service_metric(target, "HealthyHostCount", "Minimum", minute, "healthy"),
                service_metric(target, "UnHealthyHostCount", "Maximum", minute, "unhealthy"),
            ],
            width=6,
        ),
    ]

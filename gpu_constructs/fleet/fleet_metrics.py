"""Fleet-wide metrics of the CloudWatch agent, shared by alarms, scaling policies and the dashboard."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch

from gpu_constructs.fleet.render.agent_metrics import fleet_dimensions, gpu_metric_name


def gpu_metric(namespace: str, group_name: str, measurement: str, statistic: str, minutes: int) -> cloudwatch.Metric:
    """A GPU metric of the whole group: the agent aggregates every GPU by AutoScalingGroupName."""
    return cloudwatch.Metric(
        namespace=namespace,
        metric_name=gpu_metric_name(measurement),
        dimensions_map=fleet_dimensions(group_name),
        statistic=statistic,
        period=Duration.minutes(minutes),
    )

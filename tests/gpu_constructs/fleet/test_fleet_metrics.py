"""gpu_metric: the fleet-wide GPU metric the agent publishes, by the group's name only."""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cloudwatch

from gpu_constructs.fleet.fleet_metrics import gpu_metric
from gpu_constructs.fleet.render.agent_metrics import fleet_dimensions, gpu_metric_name
from tests.gpu_constructs.helpers import bare_stack, only, template


def test_an_alarm_on_the_metric_reads_what_the_agent_publishes() -> None:
    stack = bare_stack()
    metric = gpu_metric("GpuPlatform/dev", "gpu-platform-dev-train", "utilization_gpu", "Average", 5)
    metric.create_alarm(stack, "Probe", threshold=90, evaluation_periods=1)
    _, alarm = only(template(stack), "AWS::CloudWatch::Alarm")
    props = alarm["Properties"]
    assert props["Namespace"] == "GpuPlatform/dev"
    assert props["MetricName"] == gpu_metric_name("utilization_gpu")
    assert props["Dimensions"] == [
        {"Name": k, "Value": v} for k, v in fleet_dimensions("gpu-platform-dev-train").items()
    ]
    assert (props["Statistic"], props["Period"]) == ("Average", 300)
    assert isinstance(metric, cloudwatch.Metric)

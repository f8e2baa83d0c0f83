"""PlatformDashboard: every fleet's GPU and node panels read its group's metrics; the alarms and Lustre too."""

from __future__ import annotations

import json

from aws_cdk import aws_cloudwatch as cloudwatch

from gpu_constructs.fleet.render.agent_metrics import gpu_metric_name
from gpu_constructs.observability.platform_dashboard import (
    NODE_RUNNING_METRIC,
    NODE_UNHEALTHY_METRIC,
    REASON_DIMENSION,
    FleetPanel,
    PlatformDashboard,
)
from gpu_constructs.observability.service_alarms import LOAD_BALANCER_ONLY, ServiceTarget
from tests.gpu_constructs.helpers import bare_stack, only, resolved, template
from tests.scripts.node.helpers import NODE_DIR  # noqa: F401 - puts scripts/node on sys.path

# isort: split
import health.act as health_act


def test_each_fleet_has_its_panels_on_its_own_group() -> None:
    stack = bare_stack()
    metric = cloudwatch.Metric(namespace="AWS/FSx", metric_name="FreeDataStorageCapacity")
    alarm = metric.create_alarm(stack, "A", threshold=1, evaluation_periods=1)
    fleets = [FleetPanel("train", "gpu-platform-dev-train"), FleetPanel("infer", "gpu-platform-dev-infer")]
    PlatformDashboard(stack, "Dash", dashboard_name="gpu-platform-dev", namespace="GpuPlatform/dev", fleets=fleets,
                      fsx_throughput=metric, fsx_free_capacity=metric, alarms=[alarm])  # fmt: skip
    tmpl = template(stack)
    _, dash = only(tmpl, "AWS::CloudWatch::Dashboard")
    body = json.loads(resolved(tmpl, dash["Properties"]["DashboardBody"]))
    titles = [w["properties"].get("title") for w in body["widgets"]]
    assert titles[0] == "Alarms" and titles[-2:] == ["Lustre: throughput used (%)", "Lustre: free capacity (bytes)"]
    for panel in fleets:
        widgets = [
            w for w in body["widgets"] if str(w["properties"].get("title", "")).startswith(f"{panel.fleet_name}:")
        ]
        assert len(widgets) == 5
        series = [json.dumps(m) for w in widgets for m in w["properties"]["metrics"]]
        assert all(panel.group_name in m for m in series)
        assert any(gpu_metric_name("utilization_gpu") in m for m in series)
        assert any(NODE_RUNNING_METRIC in m and "spot" in m for m in series)
        (reasons,) = [w["properties"] for w in widgets if "by reason" in w["properties"]["title"]]
        (query,) = [m[0]["expression"] for m in reasons["metrics"]]
        assert query.startswith("SEARCH('{GpuPlatform/dev,AutoScalingGroupName,Reason} ")
        assert f'AutoScalingGroupName="{panel.group_name}"' in query and "'Sum', 86400)" in query
        assert reasons["view"] == "bar" and reasons["start"] == "-P7D"


def test_the_reason_panel_reads_what_the_health_check_publishes() -> None:
    """The node publishes one GpuNodeUnhealthy per reason class, by group and class (scripts/node/health/act.py)."""
    assert (NODE_UNHEALTHY_METRIC, REASON_DIMENSION) == (health_act.REASON_METRIC, health_act.REASON_DIMENSION)
    assert health_act.ASG_DIMENSION == "AutoScalingGroupName"


def test_each_served_fleet_has_a_row_on_its_load_balancer_and_target_group() -> None:
    stack = bare_stack()
    metric = cloudwatch.Metric(namespace="AWS/FSx", metric_name="FreeDataStorageCapacity")
    service = ServiceTarget("infer", "app/infer-lb/50dc6c495c0c9188", "targetgroup/infer-tg/943f017f100becff")
    PlatformDashboard(stack, "Dash", dashboard_name="gpu-platform-dev", namespace="GpuPlatform/dev",
                      fleets=[FleetPanel("infer", "gpu-platform-dev-infer")], fsx_throughput=metric,
                      fsx_free_capacity=metric, alarms=[], services=[service])  # fmt: skip
    tmpl = template(stack)
    body = json.loads(resolved(tmpl, only(tmpl, "AWS::CloudWatch::Dashboard")[1]["Properties"]["DashboardBody"]))
    row = {
        w["properties"]["title"]: w["properties"]["metrics"]
        for w in body["widgets"]
        if w["properties"].get("title", "").startswith("infer: ")
        and any("AWS/ApplicationELB" in json.dumps(m) for m in w["properties"]["metrics"])
    }
    assert sorted(row) == ["infer: 5xx", "infer: hosts", "infer: requests per minute", "infer: response time (s)"]
    named = {m[1] for metrics in row.values() for m in metrics if m[0] == "AWS/ApplicationELB"}
    assert named >= {"RequestCount", "HTTPCode_Target_5XX_Count", "TargetResponseTime", "HealthyHostCount",
                     "UnHealthyHostCount"}  # fmt: skip
    for metrics in row.values():
        for m in metrics:
            if m[0] == "AWS/ApplicationELB" and m[1] in LOAD_BALANCER_ONLY:  # published per load balancer only
                assert m[2:4] == ["LoadBalancer", service.load_balancer_full_name] and "TargetGroup" not in m
            elif m[0] == "AWS/ApplicationELB":  # each series is dimensioned by this load balancer and target group
                assert m[2:6] == ["LoadBalancer", service.load_balancer_full_name, "TargetGroup",
                                  service.target_group_full_name]  # fmt: skip

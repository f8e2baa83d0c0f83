"""Observability: alarms from config, the composite, Spot events, the dashboard, consistency with the agent."""

from __future__ import annotations

import importlib
import json

import pytest

from config.naming import ResourceNames
from gpu_constructs.fleet.gpu_fleet import TERMINATE_HOOK_TIMEOUT
from gpu_constructs.fleet.render.agent_metrics import published_metrics
from gpu_constructs.observability.security_alarms import SECURITY_EVENTS
from tests.scripts.node.helpers import NODE_DIR  # noqa: F401 - puts scripts/node on sys.path
from tests.synth import StackTemplate, Synth

# The node's own module (run from /opt/gpu-platform/node), with the metric names it publishes.
gpu_health = importlib.import_module("gpu_health")

ENVS = ["dev", "staging", "prod"]

#: Metrics AWS services publish that the alarms use (namespace -> names), from the services' metric lists.
AWS_METRICS = {
    "AWS/AutoScaling": {"GroupDesiredCapacity", "GroupInServiceInstances", "GroupPendingInstances"},
    "AWS/FSx": {"FreeDataStorageCapacity", "DataReadBytes", "DataWriteBytes"},
    "AWS/Events": {"TriggeredRules"},
    # ALB user guide, CloudWatch metrics for your Application Load Balancer (per TargetGroup, LoadBalancer; the
    # load balancer's own 5xx per LoadBalancer only).
    "AWS/ApplicationELB": {
        "RequestCount",
        "HTTPCode_Target_5XX_Count",
        "TargetResponseTime",
        "UnHealthyHostCount",
        "HealthyHostCount",
        "HTTPCode_ELB_5XX_Count",
    },
}


def monitoring(synth: Synth, env: str) -> StackTemplate:
    return synth.stack(env, "Monitoring")


def _alarms(stack: StackTemplate) -> dict[str, dict]:
    return {v["Properties"]["AlarmName"]: v["Properties"] for v in stack.resources("AWS::CloudWatch::Alarm").values()}


def _metrics_of(alarm: dict) -> list[tuple[str, str, dict]]:
    """(namespace, metric name, dimensions) of every metric an alarm reads, plain or in math."""
    if "MetricName" in alarm:
        return [(alarm["Namespace"], alarm["MetricName"], {d["Name"]: d["Value"] for d in alarm.get("Dimensions", [])})]
    found = []
    for query in alarm["Metrics"]:
        if "MetricStat" in query:
            m = query["MetricStat"]["Metric"]
            found.append((m["Namespace"], m["MetricName"], {d["Name"]: d["Value"] for d in m.get("Dimensions", [])}))
    return found


def _period(alarm: dict) -> int:
    if "Period" in alarm:
        return alarm["Period"]
    return next(q["MetricStat"]["Period"] for q in alarm["Metrics"] if "MetricStat" in q)


@pytest.mark.parametrize("env", ENVS)
def test_fleet_alarms_follow_config(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    names = ResourceNames.of(cfg)
    alarms = _alarms(monitoring(synth, env))
    expected = {
        "gpu-utilization-high": (cfg.alarms.gpu_utilization_high, "GreaterThanThreshold", "nvidia_smi_utilization_gpu", "Average"),
        "gpu-temperature-critical": (cfg.alarms.gpu_temperature_critical, "GreaterThanThreshold", "nvidia_smi_temperature_gpu", "Maximum"),
        "gpu-idle": (cfg.alarms.gpu_idle, "LessThanThreshold", "nvidia_smi_utilization_gpu", "Average"),
        "health-check-failed": (cfg.alarms.health_check_failures, "GreaterThanOrEqualToThreshold", "GpuHealthCheckFailed", "Maximum"),
        "platform-units-down": (cfg.alarms.platform_units_down, "GreaterThanOrEqualToThreshold", "PlatformUnitsDown", "Maximum"),
    }  # fmt: skip
    for fleet in cfg.fleets:
        group = names.asg_name(fleet.name)
        for key, (threshold, comparison, metric, statistic) in expected.items():
            alarm = alarms[f"{names.prefix}-{fleet.name}-{key}"]
            assert alarm["Threshold"] == threshold.threshold, key
            assert alarm["Period"] == threshold.period_minutes * 60, key
            assert alarm["EvaluationPeriods"] == alarm["DatapointsToAlarm"] == threshold.evaluation_periods, key
            assert alarm["ComparisonOperator"] == comparison, key
            assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == (
                names.metrics_namespace,
                metric,
                statistic,
            )
            assert alarm["Dimensions"] == [{"Name": "AutoScalingGroupName", "Value": group}]
            assert alarm["AlarmActions"] and alarm["OKActions"]
        shortfall = alarms[f"{names.prefix}-{fleet.name}-capacity-shortfall"]
        assert shortfall["Threshold"] == cfg.alarms.capacity_shortfall.threshold
        assert shortfall["EvaluationPeriods"] == cfg.alarms.capacity_shortfall.evaluation_periods
        assert _period(shortfall) == cfg.alarms.capacity_shortfall.period_minutes * 60
        assert {m[1] for m in _metrics_of(shortfall)} == {
            "GroupDesiredCapacity",
            "GroupInServiceInstances",
            "GroupPendingInstances",
        }
        stalled = alarms[f"{names.prefix}-{fleet.name}-launch-stalled"]
        assert _period(stalled) == _period(shortfall)
        window = fleet.launch_hook_timeout_seconds + TERMINATE_HOOK_TIMEOUT.to_seconds()  # a replacement
        assert stalled["EvaluationPeriods"] * _period(stalled) > window
        assert {m[1] for m in _metrics_of(stalled)} == {"GroupDesiredCapacity", "GroupInServiceInstances"}


@pytest.mark.parametrize("env", ENVS)
def test_health_data_missing_has_the_group_metric_it_compares_with(synth: Synth, env: str) -> None:
    """The alarm compares the health checks' results with GroupInServiceInstances, which AWS publishes only for a
    group that collects its metrics: every fleet's group must (gpu_fleet.py: GroupMetrics.all(), every minute)."""
    cfg = synth.environments[env]
    names = ResourceNames.of(cfg)
    alarms = _alarms(monitoring(synth, env))
    groups = {
        g["Properties"]["AutoScalingGroupName"]: g["Properties"]
        for g in synth.stack(env, "Fleets").resources("AWS::AutoScaling::AutoScalingGroup").values()
    }
    for fleet in cfg.fleets:
        group = names.asg_name(fleet.name)
        alarm = alarms[f"{names.prefix}-{fleet.name}-health-data-missing"]
        threshold = cfg.alarms.health_data_missing
        assert (alarm["Threshold"], alarm["EvaluationPeriods"]) == (threshold.threshold, threshold.evaluation_periods)
        assert _period(alarm) == threshold.period_minutes * 60
        assert {(m[0], m[1]) for m in _metrics_of(alarm)} == {
            (names.metrics_namespace, "GpuHealthCheckFailed"),
            ("AWS/AutoScaling", "GroupInServiceInstances"),
        }
        assert all(m[2] == {"AutoScalingGroupName": group} for m in _metrics_of(alarm))
        (collection,) = groups[group]["MetricsCollection"]
        assert collection["Granularity"] == "1Minute"
        assert "GroupInServiceInstances" in collection.get("Metrics", ["GroupInServiceInstances"])  # none listed: all


def test_defaults_are_the_users_thresholds(synth: Synth) -> None:
    a = synth.environments["prod"].alarms
    assert (
        a.gpu_utilization_high.threshold,
        a.gpu_utilization_high.period_minutes * a.gpu_utilization_high.evaluation_periods,
    ) == (95, 10)
    assert a.gpu_temperature_critical.threshold == 85
    assert (a.gpu_idle.threshold, a.gpu_idle.period_minutes * a.gpu_idle.evaluation_periods) == (30, 30)


@pytest.mark.parametrize("env", ENVS)
def test_composite_fleet_unhealthy(synth: Synth, env: str) -> None:
    stack = monitoring(synth, env)
    names = ResourceNames.of(synth.environments[env])
    composites = {
        v["Properties"]["AlarmName"]: v["Properties"]
        for v in stack.resources("AWS::CloudWatch::CompositeAlarm").values()
    }
    assert sorted(composites) == sorted(f"{names.prefix}-{f.name}-unhealthy" for f in synth.environments[env].fleets)
    for fleet in synth.environments[env].fleets:
        rule = json.dumps(composites[f"{names.prefix}-{fleet.name}-unhealthy"]["AlarmRule"])
        alarm_ids = {k: v["Properties"]["AlarmName"] for k, v in stack.resources("AWS::CloudWatch::Alarm").items()}
        referenced = {alarm_ids[k] for k in alarm_ids if k in rule}
        assert referenced == {
            f"{names.prefix}-{fleet.name}-{k}"
            for k in ("health-check-failed", "capacity-shortfall", "launch-stalled", "gpu-temperature-critical")
        }
        assert rule.count(" OR ") == 3


@pytest.mark.parametrize("env", ENVS)
def test_fsx_alarms(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    fs = cfg.storage.file_system
    names = ResourceNames.of(cfg)
    alarms = _alarms(monitoring(synth, env))
    free = alarms[f"{names.prefix}-fsx-free-capacity-low"]
    assert free["Threshold"] == fs.storage_capacity_gib * 1024**3 * cfg.alarms.fsx_free_capacity_percent.threshold / 100
    assert free["ComparisonOperator"] == "LessThanThreshold"
    assert (free["Namespace"], free["MetricName"]) == ("AWS/FSx", "FreeDataStorageCapacity")
    busy = alarms[f"{names.prefix}-fsx-throughput-saturated"]
    assert busy["Threshold"] == cfg.alarms.fsx_throughput_percent.threshold
    expression = next(q["Expression"] for q in busy["Metrics"] if "Expression" in q)
    per_tib = fs.per_unit_storage_throughput or 200
    assert expression == f"100 * (r + w) / PERIOD(r) / {round(per_tib * fs.storage_capacity_gib / 1024 * 1000**2)}"


@pytest.mark.parametrize("env", ENVS)
def test_security_change_alarms_from_the_trail(synth: Synth, env: str) -> None:
    stack = monitoring(synth, env)
    names = ResourceNames.of(synth.environments[env])
    filters = {
        v["Properties"]["MetricTransformations"][0]["MetricName"]: v["Properties"]
        for v in stack.resources("AWS::Logs::MetricFilter").values()
    }
    assert sorted(filters) == sorted(SECURITY_EVENTS)
    for name, events in SECURITY_EVENTS.items():
        assert filters[name]["LogGroupName"]["Fn::GetStackOutput"]["StackName"] == f"{env}-Security"
        for event in events:
            assert f"($.eventName = {event})" in filters[name]["FilterPattern"]
    alarms = _alarms(stack)
    for name in SECURITY_EVENTS:
        alarm = alarms[f"{names.prefix}-security-{name}"]
        assert alarm["Namespace"] == f"{names.metrics_namespace}/Security" and alarm["Threshold"] == 1


@pytest.mark.parametrize("env", ENVS)
def test_spot_notices_rule_and_alarm(synth: Synth, env: str) -> None:
    stack = monitoring(synth, env)
    names = ResourceNames.of(synth.environments[env])
    (rule,) = stack.resources("AWS::Events::Rule").values()
    assert rule["Properties"]["EventPattern"] == {
        "detail-type": ["EC2 Spot Instance Interruption Warning", "EC2 Instance Rebalance Recommendation"],
        "source": ["aws.ec2"],
    }
    (target,) = rule["Properties"]["Targets"]
    assert "AlertsTopic" in json.dumps(target["Arn"])
    alarm = _alarms(stack)[f"{names.prefix}-spot-interruptions"]
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/Events", "TriggeredRules")
    assert alarm["Dimensions"] == [{"Name": "RuleName", "Value": rule["Properties"]["Name"]}]


def _dashboard_body(stack: StackTemplate) -> dict:
    (dashboard,) = stack.resources("AWS::CloudWatch::Dashboard").values()
    body = dashboard["Properties"]["DashboardBody"]
    if isinstance(body, dict):
        body = "".join(p if isinstance(p, str) else "TOKEN" for p in body["Fn::Join"][1])
    return json.loads(body)


@pytest.mark.parametrize("env", ENVS)
def test_dashboard_has_a_row_per_fleet(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    body = _dashboard_body(monitoring(synth, env))
    titles = [w["properties"].get("title") for w in body["widgets"]]
    for fleet in cfg.fleets:
        for what in ("GPU utilization (%)", "GPU memory", "GPU temperature (°C) and power (W)", "nodes by market"):
            assert f"{fleet.name}: {what}" in titles
    assert "Alarms" in titles
    assert "Lustre: throughput used (%)" in titles and "Lustre: free capacity (bytes)" in titles
    text = json.dumps(body)
    for metric in (
        "nvidia_smi_utilization_gpu",
        "nvidia_smi_memory_used",
        "nvidia_smi_temperature_gpu",
        "nvidia_smi_power_draw",
    ):
        assert metric in text


def _agent_config(synth: Synth, env: str) -> dict:
    """The agent config the nodes receive, read back from a Fleets launch template's user data."""
    template = next(iter(synth.stack(env, "Fleets").resources("AWS::EC2::LaunchTemplate").values()))
    parts = template["Properties"]["LaunchTemplateData"]["UserData"]["Fn::Base64"]["Fn::Join"][1]
    script = "".join(p for p in parts if isinstance(p, str))
    return json.loads(script.split("<<'AGENT_CONFIG'\n", 1)[1].split("\nAGENT_CONFIG", 1)[0])


@pytest.mark.parametrize("env", ENVS)
def test_every_alarm_metric_is_published_by_someone(synth: Synth, env: str) -> None:
    """Read both sides: a metric an alarm waits for must be one something really publishes."""
    names = ResourceNames.of(synth.environments[env])
    agent = _agent_config(synth, env)
    assert agent["metrics"]["namespace"] == names.metrics_namespace
    node_metrics = published_metrics(agent) | {
        gpu_health.METRIC_NAME,
        gpu_health.NODE_RUNNING_METRIC,
        gpu_health.UNITS_DOWN_METRIC,
    }
    stack = monitoring(synth, env)
    filters = {
        (t["MetricNamespace"], t["MetricName"])
        for v in stack.resources("AWS::Logs::MetricFilter").values()
        for t in v["Properties"]["MetricTransformations"]
    }
    checked = 0
    for alarm in _alarms(stack).values():
        for namespace, metric, dims in _metrics_of(alarm):
            checked += 1
            if namespace == names.metrics_namespace:
                assert metric in node_metrics, metric
                assert set(dims) == {"AutoScalingGroupName"}  # the agent's aggregation dimension
                assert agent["metrics"]["aggregation_dimensions"][:1] == [["AutoScalingGroupName"]]
            elif (namespace, metric) in filters:
                continue
            else:
                assert metric in AWS_METRICS[namespace], (namespace, metric)
    assert checked >= 10

"""FleetAlarms: each alarm reads the metric its writer publishes for this group; a launch is "stalled" only
after the launch hook could have held it; the composite "unhealthy" fires on health, shortfall, stalls or heat."""

from __future__ import annotations

import pytest
from aws_cdk import Duration
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Template

from gpu_constructs.observability.alarm_factory import AlarmFactory
from gpu_constructs.observability.fleet_alarms import HEALTH_DATA_MISSING, HEALTH_METRIC, UNITS_DOWN_METRIC, FleetAlarms
from tests.gpu_constructs.helpers import ALARMS, bare_stack, template

GROUP = "gpu-platform-dev-train"
#: A training fleet's launch hook at DCGM level 2 (config/fleets/health.py): 2400 + 600 s.
LAUNCH_HOOK_TIMEOUT = Duration.seconds(3000)
TERMINATE_HOOK_TIMEOUT = Duration.minutes(10)


@pytest.fixture(scope="module")
def tmpl() -> Template:
    stack = bare_stack()
    factory = AlarmFactory(prefix="gpu-platform-dev", topic=sns.Topic(stack, "Topic"))
    FleetAlarms(stack, "Train", fleet_name="train", group_name=GROUP, namespace="GpuPlatform/dev",
                thresholds=ALARMS, factory=factory, launch_hook_timeout=LAUNCH_HOOK_TIMEOUT,
                terminate_hook_timeout=TERMINATE_HOOK_TIMEOUT)  # fmt: skip
    return template(stack)


def _alarms(tmpl: Template) -> dict[str, dict]:
    return {
        a["Properties"]["AlarmName"].removeprefix("gpu-platform-dev-train-"): a["Properties"]
        for a in tmpl.find_resources("AWS::CloudWatch::Alarm").values()
    }


def test_health_alarm_reads_the_health_checks_metric_of_this_group(tmpl: Template) -> None:
    health = _alarms(tmpl)["health-check-failed"]
    assert (health["Namespace"], health["MetricName"]) == ("GpuPlatform/dev", HEALTH_METRIC)
    assert health["Dimensions"] == [{"Name": "AutoScalingGroupName", "Value": GROUP}]
    assert health["ComparisonOperator"] == "GreaterThanOrEqualToThreshold" and health["Threshold"] == 1


def test_units_down_alarm_reads_the_count_the_health_check_publishes_for_this_group(tmpl: Template) -> None:
    down = _alarms(tmpl)["platform-units-down"]
    assert (down["Namespace"], down["MetricName"], down["Statistic"]) == (
        "GpuPlatform/dev",
        UNITS_DOWN_METRIC,
        "Maximum",
    )
    assert down["Dimensions"] == [{"Name": "AutoScalingGroupName", "Value": GROUP}]
    assert down["ComparisonOperator"] == "GreaterThanOrEqualToThreshold" and down["Threshold"] == 1
    # The health check runs every 5 minutes after the previous run ended (a DCGM run takes up to 3): a period
    # holds a count from every node. No count (no node, or no check) is not a unit down.
    assert down["Period"] == ALARMS.platform_units_down.period_minutes * 60 >= 10 * 60
    assert down["TreatMissingData"] == "notBreaching"
    assert down["AlarmActions"] and down["OKActions"]


def test_health_data_missing_compares_the_checks_results_with_the_nodes_in_service(tmpl: Template) -> None:
    """gpu-health dead on a node: no GpuHealthCheckFailed from it, and the health alarm sees only missing data (not
    breaching). This one counts the results of this group's checks against its instances in service all period."""
    missing = _alarms(tmpl)[HEALTH_DATA_MISSING]
    queries = {q["Id"]: q for q in missing["Metrics"]}
    (expression,) = [q for q in queries.values() if "Expression" in q]
    assert expression["Expression"] == "inservice - FILL(results, 0)"  # no result at all: every node silent
    assert expression.get("ReturnData", True) is True
    results = queries["results"]["MetricStat"]
    assert (results["Metric"]["Namespace"], results["Metric"]["MetricName"], results["Stat"]) == (
        "GpuPlatform/dev",
        HEALTH_METRIC,
        "SampleCount",  # results, not their value (0 healthy, 1 not)
    )
    assert results["Metric"]["Dimensions"] == [{"Name": "AutoScalingGroupName", "Value": GROUP}]
    inservice = queries["inservice"]["MetricStat"]
    assert (inservice["Metric"]["Namespace"], inservice["Metric"]["MetricName"], inservice["Stat"]) == (
        "AWS/AutoScaling",
        "GroupInServiceInstances",
        "Minimum",  # a node that joined during the period is not yet owed a result
    )
    assert inservice["Metric"]["Dimensions"] == [{"Name": "AutoScalingGroupName", "Value": GROUP}]
    # A node reports at least once per period: the timer waits 5 minutes after a check ends (10 after boot at
    # first), a check publishes within DCGM level 1's 3 minutes.
    assert results["Period"] == inservice["Period"] == ALARMS.health_data_missing.period_minutes * 60 >= 15 * 60
    assert missing["ComparisonOperator"] == "GreaterThanOrEqualToThreshold" and missing["Threshold"] == 1
    assert missing["EvaluationPeriods"] == missing["DatapointsToAlarm"] == ALARMS.health_data_missing.evaluation_periods
    assert missing["TreatMissingData"] == "notBreaching"  # no group metrics yet: nothing to compare
    assert missing["AlarmActions"] and missing["OKActions"]


def test_launch_stalled_outlasts_the_launch_hook(tmpl: Template) -> None:
    stalled = _alarms(tmpl)["launch-stalled"]
    period = ALARMS.capacity_shortfall.period_minutes
    assert (
        stalled["EvaluationPeriods"] * period > LAUNCH_HOOK_TIMEOUT.to_minutes() + TERMINATE_HOOK_TIMEOUT.to_minutes()
    )
    expressions = {m["Id"]: m.get("Expression") for m in stalled["Metrics"]}
    assert "desired - inservice" in expressions.values()
    shortfall = {m["Id"]: m.get("Expression") for m in _alarms(tmpl)["capacity-shortfall"]["Metrics"]}
    assert "desired - (inservice + pending)" in shortfall.values()  # launching nodes are not missing


def test_unhealthy_composite_fires_on_health_shortfall_stall_or_heat(tmpl: Template) -> None:
    (composite,) = tmpl.find_resources("AWS::CloudWatch::CompositeAlarm").values()
    props = composite["Properties"]
    assert props["AlarmName"] == "gpu-platform-dev-train-unhealthy"
    names = {lid: a["Properties"]["AlarmName"] for lid, a in tmpl.find_resources("AWS::CloudWatch::Alarm").items()}
    parts = props["AlarmRule"]["Fn::Join"][1]
    rule = "".join(p if isinstance(p, str) else names[p["Fn::GetAtt"][0]] for p in parts)
    children = ("health-check-failed", "capacity-shortfall", "launch-stalled", "gpu-temperature-critical")
    assert rule == "(" + " OR ".join(f'ALARM("gpu-platform-dev-train-{c}")' for c in children) + ")"
    assert props["AlarmActions"] and props["OKActions"]

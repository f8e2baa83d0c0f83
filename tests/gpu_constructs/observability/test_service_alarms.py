"""ServiceAlarms: the 5xx rate, p99 and unhealthy-host alarms read this load balancer's target group, take their
thresholds from the fleet's service config, are named like the fleet's other alarms and notify the topic; the
5xx rate behaves as CloudWatch would evaluate it (no traffic is not an error, no 5xx is zero). The load balancer's
own 5xx and no-healthy-host alarms read the load balancer as a whole and the fleet's group (their behaviour over
a rollout: tests/flows/test_served_rollout.py)."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Template

from config.fleets.service import ServiceAlarmThresholds as Thresholds
from gpu_constructs.observability.alarm_factory import AlarmFactory
from gpu_constructs.observability.service_alarms import ServiceAlarms, ServiceTarget
from tests.alarm_evaluator import alarm_states
from tests.gpu_constructs.helpers import bare_stack, only, template

TARGET = ServiceTarget("infer", "app/infer-lb/50dc6c495c0c9188", "targetgroup/infer-tg/943f017f100becff")
DIMENSIONS = [
    {"Name": "LoadBalancer", "Value": TARGET.load_balancer_full_name},
    {"Name": "TargetGroup", "Value": TARGET.target_group_full_name},
]
THRESHOLDS = Thresholds(http_5xx_percent=2.5, p99_latency_seconds=0.8, unhealthy_hosts=2)


@pytest.fixture(scope="module")
def tmpl() -> Template:
    stack = bare_stack()
    factory = AlarmFactory(prefix="gpu-platform-dev", topic=sns.Topic(stack, "Topic"))
    ServiceAlarms(stack, "Service", target=TARGET, thresholds=THRESHOLDS, factory=factory)
    return template(stack)


def _alarms(tmpl: Template) -> dict[str, dict[str, Any]]:
    return {
        a["Properties"]["AlarmName"]: a["Properties"] for a in tmpl.find_resources("AWS::CloudWatch::Alarm").values()
    }


def test_named_like_the_fleet_alarms_and_notifying_the_topic(tmpl: Template) -> None:
    alarms = _alarms(tmpl)
    assert sorted(alarms) == [
        f"gpu-platform-dev-infer-{k}"
        for k in ("http-5xx-rate", "lb-5xx-rate", "no-healthy-hosts", "p99-latency", "unhealthy-hosts")
    ]
    topic_id, _ = only(tmpl, "AWS::SNS::Topic")
    for alarm in alarms.values():
        assert alarm["AlarmActions"] == [{"Ref": topic_id}] and alarm["OKActions"] == [{"Ref": topic_id}]
        assert alarm["TreatMissingData"] == "notBreaching"


def test_p99_and_unhealthy_hosts_read_this_target_group_with_the_configured_thresholds(tmpl: Template) -> None:
    alarms = _alarms(tmpl)
    p99 = alarms["gpu-platform-dev-infer-p99-latency"]
    assert (p99["Namespace"], p99["MetricName"], p99["ExtendedStatistic"]) == (
        "AWS/ApplicationELB", "TargetResponseTime", "p99",
    )  # fmt: skip
    assert p99["Dimensions"] == DIMENSIONS and p99["Threshold"] == 0.8
    assert p99["ComparisonOperator"] == "GreaterThanThreshold" and p99["Period"] == 300
    hosts = alarms["gpu-platform-dev-infer-unhealthy-hosts"]
    assert (hosts["MetricName"], hosts["Statistic"], hosts["Dimensions"]) == (
        "UnHealthyHostCount",
        "Minimum",
        DIMENSIONS,
    )
    assert hosts["Threshold"] == 2 and hosts["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


def test_5xx_rate_is_target_errors_over_requests_of_this_target_group(tmpl: Template) -> None:
    rate = _alarms(tmpl)["gpu-platform-dev-infer-http-5xx-rate"]
    stats = {q["Id"]: q["MetricStat"] for q in rate["Metrics"] if "MetricStat" in q}
    assert {s["Metric"]["MetricName"] for s in stats.values()} == {"HTTPCode_Target_5XX_Count", "RequestCount"}
    assert all(s["Metric"]["Dimensions"] == DIMENSIONS and s["Stat"] == "Sum" for s in stats.values())
    assert rate["Threshold"] == 2.5 and rate["ComparisonOperator"] == "GreaterThanThreshold"
    minute = 100.0
    cases = {
        "no traffic": ([None] * 5, [None] * 5, "OK"),
        "traffic, no 5xx published": ([minute] * 5, [None] * 5, "OK"),
        "2 % answered 5xx": ([minute] * 5, [2.0] * 5, "OK"),
        "3 % answered 5xx": ([minute] * 5, [3.0] * 5, "ALARM"),
        "one bad minute in five": ([minute] * 5, [None, None, 20.0, None, None], "ALARM"),
    }
    for case, (requests, errors, expected) in cases.items():
        series = {"RequestCount": requests, "HTTPCode_Target_5XX_Count": errors}
        assert alarm_states(rate, series) == [expected], case


def _stats(alarm: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {q["Id"]: q["MetricStat"] for q in alarm["Metrics"] if "MetricStat" in q}


def test_the_load_balancers_own_5xx_are_read_per_load_balancer_gated_by_the_fleets_group(tmpl: Template) -> None:
    rate = _alarms(tmpl)["gpu-platform-dev-infer-lb-5xx-rate"]
    stats = _stats(rate)
    lb_only = [{"Name": "LoadBalancer", "Value": TARGET.load_balancer_full_name}]
    assert {k: (s["Metric"]["MetricName"], s["Metric"]["Dimensions"], s["Stat"]) for k, s in stats.items()} == {
        "refused": ("HTTPCode_ELB_5XX_Count", lb_only, "Sum"),
        "requests": ("RequestCount", lb_only, "Sum"),
        # No group name given: the fleet's group by the platform's naming (<prefix>-<fleet>).
        "desired": (
            "GroupDesiredCapacity",
            [{"Name": "AutoScalingGroupName", "Value": "gpu-platform-dev-infer"}],
            "Minimum",
        ),
    }
    assert rate["Threshold"] == 2.5 and rate["ComparisonOperator"] == "GreaterThanThreshold"
    assert {s["Period"] for s in stats.values()} == {300} and rate["EvaluationPeriods"] == 1


def test_no_healthy_host_reads_the_target_group_and_must_hold_two_periods(tmpl: Template) -> None:
    alarm = _alarms(tmpl)["gpu-platform-dev-infer-no-healthy-hosts"]
    stats = _stats(alarm)
    assert (stats["healthy"]["Metric"]["MetricName"], stats["healthy"]["Stat"]) == ("HealthyHostCount", "Maximum")
    assert stats["healthy"]["Metric"]["Dimensions"] == DIMENSIONS
    assert stats["inservice"]["Metric"]["MetricName"] == "GroupInServiceInstances"
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"], alarm["Threshold"]) == (2, 2, 1)
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


def test_a_group_name_given_is_the_one_read() -> None:
    stack = bare_stack()
    factory = AlarmFactory(prefix="gpu-platform-dev", topic=sns.Topic(stack, "Topic"))
    named = ServiceTarget("infer", TARGET.load_balancer_full_name, TARGET.target_group_full_name, "my-group")
    ServiceAlarms(stack, "Service", target=named, thresholds=THRESHOLDS, factory=factory)
    alarm = _alarms(template(stack))["gpu-platform-dev-infer-no-healthy-hosts"]
    groups = {
        d["Value"]
        for s in _stats(alarm).values()
        for d in s["Metric"]["Dimensions"]
        if d["Name"] == "AutoScalingGroupName"
    }
    assert groups == {"my-group"}

"""AlarmFactory: names alarms after the environment, takes threshold, periods and datapoints from config,
and notifies the topic on ALARM and on OK."""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sns as sns

from config.alarms import Threshold
from gpu_constructs.observability.alarm_factory import BELOW, AlarmFactory, period
from tests.gpu_constructs.helpers import bare_stack, only, template


def test_alarm_carries_the_configured_threshold_and_notifies_both_ways() -> None:
    stack = bare_stack()
    topic = sns.Topic(stack, "Topic")
    threshold = Threshold(threshold=30, period_minutes=5, evaluation_periods=6)
    AlarmFactory(prefix="gpu-platform-dev", topic=topic).metric_alarm(
        stack, "Idle", name="train-gpu-idle", description="idle",
        metric=cloudwatch.Metric(namespace="N", metric_name="M", period=period(threshold)),
        threshold=threshold, comparison=BELOW,
    )  # fmt: skip
    tmpl = template(stack)
    topic_id, _ = only(tmpl, "AWS::SNS::Topic")
    props = only(tmpl, "AWS::CloudWatch::Alarm")[1]["Properties"]
    assert props["AlarmName"] == "gpu-platform-dev-train-gpu-idle"
    assert (props["Threshold"], props["EvaluationPeriods"], props["DatapointsToAlarm"], props["Period"]) == (
        30,
        6,
        6,
        300,
    )
    assert props["ComparisonOperator"] == "LessThanThreshold" and props["TreatMissingData"] == "notBreaching"
    assert props["AlarmActions"] == props["OKActions"] == [{"Ref": topic_id}]

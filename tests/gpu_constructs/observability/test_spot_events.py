"""SpotEvents: both Spot notices go to the alerts topic, and an alarm counts the rule's triggers."""

from __future__ import annotations

from aws_cdk import aws_sns as sns

from gpu_constructs.observability.alarm_factory import AlarmFactory
from gpu_constructs.observability.spot_events import DETAIL_TYPES, SpotEvents
from tests.gpu_constructs.helpers import ALARMS, bare_stack, only, template


def test_notices_reach_the_topic_and_an_alarm_counts_them() -> None:
    stack = bare_stack()
    topic = sns.Topic(stack, "Topic")
    SpotEvents(stack, "Spot", rule_name="gpu-platform-dev-spot", topic=topic, thresholds=ALARMS,
               factory=AlarmFactory(prefix="gpu-platform-dev", topic=topic))  # fmt: skip
    tmpl = template(stack)
    topic_id, _ = only(tmpl, "AWS::SNS::Topic")
    _, rule = only(tmpl, "AWS::Events::Rule")
    assert rule["Properties"]["EventPattern"] == {"source": ["aws.ec2"], "detail-type": DETAIL_TYPES}
    assert rule["Properties"]["Targets"] == [{"Id": "AlertsTopic", "Arn": {"Ref": topic_id}}]
    tmpl.resource_count_is("AWS::SNS::TopicPolicy", 0)  # no looser grant of a CDK target
    _, alarm = only(tmpl, "AWS::CloudWatch::Alarm")
    assert alarm["Properties"]["Dimensions"] == [{"Name": "RuleName", "Value": "gpu-platform-dev-spot"}]
    assert (alarm["Properties"]["Namespace"], alarm["Properties"]["MetricName"]) == ("AWS/Events", "TriggeredRules")

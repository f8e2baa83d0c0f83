"""SecurityAlarms: one metric filter on the trail's log group per kind of change, each with an alarm."""

from __future__ import annotations

from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns

from gpu_constructs.observability.alarm_factory import AlarmFactory
from gpu_constructs.observability.security_alarms import SECURITY_EVENTS, SecurityAlarms, event_pattern
from tests.gpu_constructs.helpers import ALARMS, bare_stack, template


def test_each_kind_of_change_is_counted_from_the_trail_and_alarmed() -> None:
    stack = bare_stack()
    trail_logs = logs.LogGroup(stack, "TrailLogs")
    factory = AlarmFactory(prefix="gpu-platform-dev", topic=sns.Topic(stack, "Topic"))
    SecurityAlarms(stack, "Sec", trail_log_group=trail_logs, namespace="GpuPlatform/dev/security",
                   thresholds=ALARMS, factory=factory)  # fmt: skip
    tmpl = template(stack)
    filters = {
        f["Properties"]["MetricTransformations"][0]["MetricName"]: f["Properties"]
        for f in tmpl.find_resources("AWS::Logs::MetricFilter").values()
    }
    assert set(filters) == set(SECURITY_EVENTS)
    for name, events in SECURITY_EVENTS.items():
        assert filters[name]["FilterPattern"] == event_pattern(events)
        assert filters[name]["LogGroupName"]["Ref"].startswith("TrailLogs")
    alarms = {
        a["Properties"]["MetricName"]: a["Properties"] for a in tmpl.find_resources("AWS::CloudWatch::Alarm").values()
    }
    assert set(alarms) == set(SECURITY_EVENTS)
    assert all(a["Namespace"] == "GpuPlatform/dev/security" and a["Threshold"] == 1 for a in alarms.values())
    assert "($.eventName = StopLogging)" in event_pattern(SECURITY_EVENTS["CloudTrailChanges"])

"""Alarms on security-relevant API calls, from the CloudTrail log group (CIS-style metric filters)."""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_logs as logs
from constructs import Construct

from config.alarms import Alarms
from gpu_constructs.observability.alarm_factory import AT_LEAST, AlarmFactory, period

#: metric name -> the CloudTrail event names it counts.
SECURITY_EVENTS = {
    "IamPolicyChanges": [
        "DeleteGroupPolicy", "DeleteRolePolicy", "DeleteUserPolicy", "PutGroupPolicy", "PutRolePolicy",
        "PutUserPolicy", "CreatePolicy", "DeletePolicy", "CreatePolicyVersion", "DeletePolicyVersion",
        "SetDefaultPolicyVersion", "AttachRolePolicy", "DetachRolePolicy", "AttachUserPolicy", "DetachUserPolicy",
        "AttachGroupPolicy", "DetachGroupPolicy", "PutRolePermissionsBoundary", "DeleteRolePermissionsBoundary",
    ],
    "SecurityGroupChanges": [
        "AuthorizeSecurityGroupIngress", "AuthorizeSecurityGroupEgress", "RevokeSecurityGroupIngress",
        "RevokeSecurityGroupEgress", "CreateSecurityGroup", "DeleteSecurityGroup",
        "ModifySecurityGroupRules",
    ],
    "CloudTrailChanges": ["CreateTrail", "UpdateTrail", "DeleteTrail", "StartLogging", "StopLogging", "PutEventSelectors"],
}  # fmt: skip


def event_pattern(event_names: list[str]) -> str:
    """A CloudWatch Logs JSON filter matching any of the event names."""
    return "{ " + " || ".join(f"($.eventName = {name})" for name in event_names) + " }"


class SecurityAlarms(Construct):
    """One metric filter and one alarm per kind of change. Attributes: alarms (metric name -> alarm)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        trail_log_group: logs.ILogGroup,
        namespace: str,
        thresholds: Alarms,
        factory: AlarmFactory,
    ) -> None:
        super().__init__(scope, construct_id)
        t = thresholds.security_changes
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        for metric_name, events in SECURITY_EVENTS.items():
            metric_filter = logs.MetricFilter(
                self,
                f"{metric_name}Filter",
                log_group=trail_log_group,
                filter_pattern=logs.FilterPattern.literal(event_pattern(events)),
                metric_namespace=namespace,
                metric_name=metric_name,
                metric_value="1",
                default_value=0,
            )
            self.alarms[metric_name] = factory.metric_alarm(
                self,
                f"{metric_name}Alarm",
                name=f"security-{metric_name}",
                description=f"SECURITY: {metric_name} in CloudTrail (check who and why)",
                metric=metric_filter.metric(statistic="Sum", period=period(t)),
                threshold=t,
                comparison=AT_LEAST,
            )

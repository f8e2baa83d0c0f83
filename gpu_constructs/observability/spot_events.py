"""Spot interruption warnings and rebalance recommendations, to the alerts topic and an alarm."""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from aws_cdk import aws_sns as sns
from constructs import Construct

from config.alarms import Alarms
from gpu_constructs.compliance.cfn_child import cfn_child
from gpu_constructs.observability.alarm_factory import AT_LEAST, AlarmFactory, period

DETAIL_TYPES = ["EC2 Spot Instance Interruption Warning", "EC2 Instance Rebalance Recommendation"]


class SpotEvents(Construct):
    """An EventBridge rule on both notices for the environment's account (the platform's instances:
    each environment has its account), notifying the topic, and an alarm on the rule's triggers.

    Attributes: rule, alarm.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        rule_name: str,
        topic: sns.ITopic,
        thresholds: Alarms,
        factory: AlarmFactory,
    ) -> None:
        super().__init__(scope, construct_id)
        self.rule = events.Rule(
            self,
            "Rule",
            rule_name=rule_name,
            description="Spot interruption warnings and rebalance recommendations of GPU nodes",
            event_pattern=events.EventPattern(source=["aws.ec2"], detail_type=DETAIL_TYPES),
        )
        # The topic by ARN only: its own policy and the alerts key already admit EventBridge of this
        # account (with a source-account condition); a CDK target would add looser grants of its own.
        cfn_rule = cfn_child(self.rule, events.CfnRule)
        cfn_rule.targets = [events.CfnRule.TargetProperty(id="AlertsTopic", arn=topic.topic_arn)]
        t = thresholds.spot_interruptions
        self.alarm = factory.metric_alarm(
            self,
            "Alarm",
            name="spot-interruptions",
            description="WARNING: Spot capacity is being reclaimed (interruption or rebalance notices)",
            metric=cloudwatch.Metric(
                namespace="AWS/Events",
                metric_name="TriggeredRules",
                dimensions_map={"RuleName": rule_name},
                statistic="Sum",
                period=period(t),
            ),
            threshold=t,
            comparison=AT_LEAST,
        )

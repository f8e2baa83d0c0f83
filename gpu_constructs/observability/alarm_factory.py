"""Alarms built the same way everywhere: named, thresholds from config, notifying the alerts topic."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_sns as sns
from constructs import Construct

from config.alarms import Threshold

ABOVE = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
AT_LEAST = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
BELOW = cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD


@dataclass(frozen=True)
class AlarmFactory:
    """Makes alarms named ``<prefix>-<name>`` that notify ``topic`` on ALARM and OK."""

    prefix: str
    topic: sns.ITopic

    def metric_alarm(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        description: str,
        metric: cloudwatch.IMetric,
        threshold: Threshold,
        comparison: cloudwatch.ComparisonOperator,
        missing_data: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
    ) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(
            scope,
            construct_id,
            alarm_name=f"{self.prefix}-{name}",
            alarm_description=description,
            metric=metric,
            threshold=threshold.threshold,
            evaluation_periods=threshold.evaluation_periods,
            datapoints_to_alarm=threshold.evaluation_periods,
            comparison_operator=comparison,
            treat_missing_data=missing_data,
        )
        self.notify(alarm)
        return alarm

    def notify(self, alarm: cloudwatch.AlarmBase) -> None:
        alarm.add_alarm_action(actions.SnsAction(self.topic))
        alarm.add_ok_action(actions.SnsAction(self.topic))


def period(threshold: Threshold) -> Duration:
    return Duration.minutes(threshold.period_minutes)

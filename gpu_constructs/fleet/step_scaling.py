"""Step scaling on the fleet's GPU utilization: one alarm and one ``StepScaling`` policy for each direction.

Built from ``StepScalingAction`` and an alarm, not ``AutoScalingGroup.scale_on_metric``: CDK's
``StepScalingPolicy`` always hands its actions a ``cooldown`` key, even unset, and jsii then prints the
``StepScalingActionProps#cooldown`` deprecation on every synth (aws/aws-cdk#37833). A step scaling
policy has no cooldown in CloudFormation anyway (``Cooldown`` is valid only for ``SimpleScaling``).
The constructs keep the ids ``scale_on_metric`` gave them (``GpuBusyScaleOut/UpperPolicy``, ...),
so the logical ids of the template stay what they were.
"""

from __future__ import annotations

from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from constructs import Construct

from config.fleets import StepScaling
from gpu_constructs.fleet.fleet_metrics import gpu_metric

#: Period of the step-scaling alarms; the configured durations are multiples of it.
STEP_PERIOD_MINUTES = 5


def add_step_scaling(group: autoscaling.AutoScalingGroup, step: StepScaling, namespace: str, group_name: str) -> None:
    """Scale out by ``scale_out_instances`` while GPUs stay busy, in by ``scale_in_instances`` while idle."""
    metric = gpu_metric(namespace, group_name, "utilization_gpu", "Average", STEP_PERIOD_MINUTES)
    _one_way(
        Construct(group, "GpuBusyScaleOut"),
        group,
        metric,
        upper=True,
        threshold=step.scale_out_above_percent,
        change=step.scale_out_instances,
        minutes=step.scale_out_after_minutes,
    )
    _one_way(
        Construct(group, "GpuIdleScaleIn"),
        group,
        metric,
        upper=False,
        threshold=step.scale_in_below_percent,
        change=-step.scale_in_instances,
        minutes=step.scale_in_after_minutes,
    )


def _one_way(
    scope: Construct,
    group: autoscaling.AutoScalingGroup,
    metric: cloudwatch.Metric,
    *,
    upper: bool,
    threshold: float,
    change: int,
    minutes: int,
) -> None:
    """``change`` instances once ``metric`` is at or past ``threshold`` (above it if ``upper``) for ``minutes``."""
    side = "Upper" if upper else "Lower"
    action = autoscaling.StepScalingAction(
        scope,
        f"{side}Policy",
        auto_scaling_group=group,
        adjustment_type=autoscaling.AdjustmentType.CHANGE_IN_CAPACITY,
        metric_aggregation_type=autoscaling.MetricAggregationType.AVERAGE,
    )
    # The bound is relative to the alarm's threshold: the whole range past it.
    action.add_adjustment(adjustment=change, lower_bound=0 if upper else None, upper_bound=None if upper else 0)
    periods = minutes // STEP_PERIOD_MINUTES
    alarm = cloudwatch.Alarm(
        scope,
        f"{side}Alarm",
        metric=metric,
        alarm_description=f"{side} threshold scaling alarm",
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
        if upper
        else cloudwatch.ComparisonOperator.LESS_THAN_OR_EQUAL_TO_THRESHOLD,
        threshold=threshold,
        evaluation_periods=periods,
        datapoints_to_alarm=periods,
    )
    alarm.add_alarm_action(cloudwatch_actions.AutoScalingAction(action))

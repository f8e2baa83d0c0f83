"""add_step_scaling: one alarm and one StepScaling policy per direction, the alarm's action the policy, no Cooldown
(CloudFormation takes Cooldown for SimpleScaling only), and no deprecated CDK call on the way."""

from __future__ import annotations

from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_ec2 as ec2

from config.fleets import StepScaling
from gpu_constructs.fleet.step_scaling import STEP_PERIOD_MINUTES, add_step_scaling
from tests.gpu_constructs.helpers import bare_stack, template


def _synth(step: StepScaling) -> dict:
    stack = bare_stack()
    vpc = ec2.Vpc(stack, "Vpc", max_azs=1, nat_gateways=0)
    group = autoscaling.AutoScalingGroup(
        stack,
        "Group",
        vpc=vpc,
        instance_type=ec2.InstanceType("g5.xlarge"),
        machine_image=ec2.MachineImage.generic_linux({"us-east-1": "ami-0123456789abcdef0"}),
    )
    add_step_scaling(group, step, "GpuPlatform/dev", "gpu-platform-dev-train")
    return template(stack).to_json()


def test_each_direction_is_an_alarm_whose_action_is_its_step_policy() -> None:
    step = StepScaling(
        scale_out_above_percent=80,
        scale_out_after_minutes=15,
        scale_out_instances=2,
        scale_in_below_percent=20,
        scale_in_after_minutes=30,
        scale_in_instances=1,
    )
    resources = _synth(step)["Resources"]
    policies = {k: v["Properties"] for k, v in resources.items() if v["Type"] == "AWS::AutoScaling::ScalingPolicy"}
    alarms = {k: v["Properties"] for k, v in resources.items() if v["Type"] == "AWS::CloudWatch::Alarm"}
    assert len(policies) == len(alarms) == 2
    out = next(k for k in policies if "GpuBusyScaleOut" in k)
    into = next(k for k in policies if "GpuIdleScaleIn" in k)
    assert all(p["PolicyType"] == "StepScaling" and "Cooldown" not in p for p in policies.values())
    assert policies[out]["StepAdjustments"] == [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 2}]
    assert policies[into]["StepAdjustments"] == [{"MetricIntervalUpperBound": 0, "ScalingAdjustment": -1}]
    by_policy = {a["AlarmActions"][0]["Ref"]: a for a in alarms.values()}
    busy, idle = by_policy[out], by_policy[into]
    assert (busy["ComparisonOperator"], busy["Threshold"], busy["EvaluationPeriods"]) == (
        "GreaterThanOrEqualToThreshold",
        80,
        15 // STEP_PERIOD_MINUTES,
    )
    assert (idle["ComparisonOperator"], idle["Threshold"], idle["EvaluationPeriods"]) == (
        "LessThanOrEqualToThreshold",
        20,
        30 // STEP_PERIOD_MINUTES,
    )
    assert busy["Period"] == STEP_PERIOD_MINUTES * 60 and busy["DatapointsToAlarm"] == busy["EvaluationPeriods"]

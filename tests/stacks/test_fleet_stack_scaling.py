"""Fleet elasticity: scaling on GPU utilization and schedules from config, warm pools."""

from __future__ import annotations

import pytest

from config.naming import ResourceNames
from tests.fleet_synth import fleets_stack
from tests.fleet_synth import group as _group
from tests.fleet_synth import group_id as _group_id
from tests.fleet_synth import of_group as _of_group
from tests.fleet_synth import templates as _templates
from tests.fleet_synth import user_data as _user_data
from tests.synth import StackTemplate, Synth


def _scaling_alarms(stack: StackTemplate, fleet: str) -> list[dict]:
    policies = {
        k for k, v in stack.resources("AWS::AutoScaling::ScalingPolicy").items()
        if v["Properties"]["AutoScalingGroupName"] == {"Ref": _group_id(stack, fleet)}
    }  # fmt: skip
    return [
        v["Properties"]
        for v in stack.resources("AWS::CloudWatch::Alarm").values()
        if any(a.get("Ref") in policies for a in v["Properties"]["AlarmActions"])
    ]


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_step_scaling_follows_the_users_rules(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    stack = fleets_stack(synth, env)
    names = ResourceNames.of(cfg)
    for fleet in cfg.fleets:
        step = fleet.scaling.step if fleet.scaling else None
        policies = [
            p
            for p in _of_group(stack, "AWS::AutoScaling::ScalingPolicy", fleet.name)
            if p.get("PolicyType") == "StepScaling"  # target tracking (GPU, requests per target) is tested apart
        ]
        if step is None:
            assert policies == [], fleet.name
            continue
        adjustments = sorted(p["StepAdjustments"][0]["ScalingAdjustment"] for p in policies)
        assert adjustments == [-step.scale_in_instances, step.scale_out_instances]
        alarms = {a["ComparisonOperator"]: a for a in _scaling_alarms(stack, fleet.name)}
        out = alarms["GreaterThanOrEqualToThreshold"]
        assert out["Threshold"] == step.scale_out_above_percent
        assert out["Period"] * out["EvaluationPeriods"] == step.scale_out_after_minutes * 60
        scale_in = alarms["LessThanOrEqualToThreshold"]
        assert scale_in["Threshold"] == step.scale_in_below_percent
        assert scale_in["Period"] * scale_in["EvaluationPeriods"] == step.scale_in_after_minutes * 60
        for alarm in (out, scale_in):
            assert (alarm["Namespace"], alarm["MetricName"]) == (names.metrics_namespace, "nvidia_smi_utilization_gpu")
            assert alarm["Dimensions"] == [{"Name": "AutoScalingGroupName", "Value": names.asg_name(fleet.name)}]
            assert alarm["DatapointsToAlarm"] == alarm["EvaluationPeriods"]


def test_defaults_scale_out_above_85_for_15_minutes_and_in_below_30_for_30() -> None:
    from config.fleets import StepScaling

    step = StepScaling()
    assert (step.scale_out_above_percent, step.scale_out_after_minutes) == (85, 15)
    assert (step.scale_in_below_percent, step.scale_in_after_minutes) == (30, 30)


def test_training_fleets_do_not_scale_unless_configured(synth: Synth) -> None:
    for env, cfg in synth.environments.items():
        stack = fleets_stack(synth, env)
        for fleet in cfg.fleets:
            if fleet.role == "training":
                assert fleet.scaling is None
                assert _of_group(stack, "AWS::AutoScaling::ScalingPolicy", fleet.name) == []


def test_target_tracking_on_fleet_gpu_utilization(synth: Synth, fleet_synth: Synth) -> None:
    for stack_synth, env, fleet_name in ((synth, "staging", "inference"), (fleet_synth, "dev", "warm")):
        cfg = stack_synth.environments[env]
        fleet = next(f for f in cfg.fleets if f.name == fleet_name)
        (policy,) = _of_group(fleets_stack(stack_synth, env), "AWS::AutoScaling::ScalingPolicy", fleet_name)
        spec = policy["TargetTrackingConfiguration"]
        assert policy["PolicyType"] == "TargetTrackingScaling"
        assert spec["TargetValue"] == fleet.scaling.target_tracking.gpu_utilization_percent
        metric = spec["CustomizedMetricSpecification"]
        assert metric["MetricName"] == "nvidia_smi_utilization_gpu"
        assert metric["Namespace"] == ResourceNames.of(cfg).metrics_namespace
        assert metric["Dimensions"] == [
            {"Name": "AutoScalingGroupName", "Value": ResourceNames.of(cfg).asg_name(fleet_name)}
        ]


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_scheduled_actions_from_config(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    stack = fleets_stack(synth, env)
    for fleet in cfg.fleets:
        actions = sorted(
            _of_group(stack, "AWS::AutoScaling::ScheduledAction", fleet.name), key=lambda a: a["Recurrence"]
        )
        expected = sorted(fleet.scaling.schedules if fleet.scaling else [], key=lambda a: a.cron)
        assert [
            (a["Recurrence"], a["TimeZone"], a.get("MinSize"), a.get("MaxSize"), a.get("DesiredCapacity"))
            for a in actions
        ] == [(e.cron, e.time_zone, e.min, e.max, e.desired) for e in expected]
    assert any(f.scaling and f.scaling.schedules for f in cfg.fleets)


def test_warm_pool(fleet_synth: Synth) -> None:
    stack = fleets_stack(fleet_synth)
    (pool,) = stack.resources("AWS::AutoScaling::WarmPool").values()
    props = pool["Properties"]
    assert props["AutoScalingGroupName"] == {"Ref": _group_id(stack, "warm")}
    assert (props["MinSize"], props["MaxGroupPreparedCapacity"], props["PoolState"]) == (1, 6, "Stopped")
    assert props["InstanceReusePolicy"] == {"ReuseOnScaleIn": True}
    group = _group(stack, "warm")
    assert "MixedInstancesPolicy" not in group  # warm pools take no Spot and no mixed types
    (data,) = _templates(stack, "warm").values()
    assert data["InstanceType"] == "g5.xlarge"
    script = _user_data(data)
    # started again from Stopped, the node runs its bootstrap (GPU check, mount, launch hook) again
    assert 'ln -sf "$node/bootstrap.sh" "$per_boot/gpu-platform-bootstrap.sh"' in script
    assert 'per_boot="${GPU_PLATFORM_PER_BOOT_DIR:-/var/lib/cloud/scripts/per-boot}"' in script
    for env, cfg in fleet_synth.environments.items():
        for fleet in cfg.fleets:
            if fleet.warm_pool is None:
                for other in _templates(fleets_stack(fleet_synth, env), fleet.name).values():
                    assert "$per_boot/" not in _user_data(other)

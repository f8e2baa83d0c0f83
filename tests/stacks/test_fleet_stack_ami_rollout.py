"""Rolling AMI updates: the AMI parameter's change starts a runbook that refreshes each fleet onto the
new AMI with its configured preferences and auto rollback on its own health alarms."""

from __future__ import annotations

import json
from typing import Any

import botocore.session
import pytest
from botocore.validate import ParamValidator

from config.fleets import Fleet
from config.naming import ResourceNames
from gpu_constructs.fleet.ami_rollout import REFRESH_SCRIPT
from tests.fleet_synth import fleets_stack
from tests.iam_documents import Resolver
from tests.synth import StackTemplate, Synth

ENVS = ["dev", "staging"]  # environments whose fleets roll automatically
MANUAL_ENVS = ["prod"]  # refresh: {enabled: false}: a new AMI arrives through the pipeline


def _one(stack: StackTemplate, kind: str) -> dict[str, Any]:
    (resource,) = [v for k, v in stack.resources(kind).items() if k.startswith("AmiRollout")]
    return resource["Properties"]


def _runbook(stack: StackTemplate) -> dict[str, Any]:
    return _one(stack, "AWS::SSM::Document")


def _steps(stack: StackTemplate) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in _runbook(stack)["Content"]["mainSteps"]}


def _fleet_steps(stack: StackTemplate) -> dict[str, dict[str, Any]]:
    """Group name -> the runbook step that refreshes it."""
    return {
        s["inputs"]["InputPayload"]["GroupName"]: s
        for s in _runbook(stack)["Content"]["mainSteps"]
        if s["action"] == "aws:executeScript"
    }


def _policy(stack: StackTemplate, prefix: str) -> dict[str, dict[str, Any]]:
    (policy,) = [v["Properties"] for k, v in stack.resources("AWS::IAM::ManagedPolicy").items() if k.startswith(prefix)]
    return {s["Sid"]: s for s in policy["PolicyDocument"]["Statement"]}


def _role(stack: StackTemplate, prefix: str) -> tuple[str, dict[str, Any]]:
    (role,) = [(k, v["Properties"]) for k, v in stack.resources("AWS::IAM::Role").items() if k.startswith(prefix)]
    return role


def _rolled(cfg: Any) -> list[Fleet]:
    return [f for f in cfg.fleets if f.rollout is not None]


def _template_ids(stack: StackTemplate, fleet: str) -> set[str]:
    return {k for k in stack.resources("AWS::EC2::LaunchTemplate") if k.startswith(f"Fleet{fleet.replace('-', '')}")}


def _synths(synth: Synth, fleet_synth: Synth) -> list[tuple[Synth, str]]:
    return [(synth, env) for env in ENVS] + [(fleet_synth, "dev")]


@pytest.mark.parametrize("env", MANUAL_ENVS)
def test_no_rollout_where_every_fleet_waits_for_the_pipeline(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    assert cfg.fleets and all(f.rollout is None for f in cfg.fleets)
    stack = fleets_stack(synth, env)
    assert not [k for k in stack.json["Resources"] if k.startswith("AmiRollout")]


@pytest.mark.parametrize("env", ENVS)
def test_rule_fires_when_the_image_pipeline_writes_the_ami_parameter(synth: Synth, env: str) -> None:
    names = ResourceNames.of(synth.environments[env])
    rule = _one(fleets_stack(synth, env), "AWS::Events::Rule")
    assert rule["Name"] == names.ami_rollout_rule
    assert rule["EventPattern"] == {
        "source": ["aws.ssm"],
        "detail-type": ["Parameter Store Change"],
        "detail": {"name": [names.ami_parameter], "operation": ["Create", "Update"]},
    }
    # The parameter is the one the image stack seeds and its distribution overwrites after each build.
    image = synth.stack(env, "Image")
    (seed,) = image.resources("Custom::AWS").values()
    assert names.ami_parameter in json.dumps(seed["Properties"]["Create"])
    # A build writes it: the environment's own pipeline, or the building environment's (dev) in this account.
    writes = [
        (c.get("AmiAccountId", cfg_env.account), c["ParameterName"])
        for cfg_env in synth.environments.values()
        for d in synth.stack(cfg_env.name, "Image").resources("AWS::ImageBuilder::DistributionConfiguration").values()
        for dist in d["Properties"]["Distributions"]
        for c in dist["SsmParameterConfigurations"]
    ]
    assert (synth.environments[env].account, names.ami_parameter) in writes


@pytest.mark.parametrize("env", ENVS)
def test_rule_starts_the_runbook_as_its_role(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    names = ResourceNames.of(cfg)
    stack = fleets_stack(synth, env)
    resolve = Resolver(stack.json, account=cfg.account, region=cfg.region).resolve
    rule = _one(stack, "AWS::Events::Rule")
    (target,) = rule["Targets"]
    definition = f"arn:aws:ssm:{cfg.region}:{cfg.account}:automation-definition/{names.ami_rollout_document}"
    assert target["Arn"] == f"{definition}:$DEFAULT"
    assert _runbook(stack)["Name"] == names.ami_rollout_document
    rollout_role_id, rollout_role = _role(stack, "AmiRolloutRole")
    rollout_arn = f"arn:aws:iam::{cfg.account}:role/{names.ami_rollout_role}"
    assert rollout_role["RoleName"] == names.ami_rollout_role
    assert json.loads(resolve(target["Input"])) == {"AutomationAssumeRole": [rollout_arn]}

    events_role_id, events_role = _role(stack, "AmiRolloutEventsRole")
    assert target["RoleArn"] == {"Fn::GetAtt": [events_role_id, "Arn"]}
    (trust,) = events_role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "events.amazonaws.com"}
    assert trust["Condition"] == {
        "StringEquals": {
            "aws:SourceAccount": cfg.account,
            "aws:SourceArn": f"arn:aws:events:{cfg.region}:{cfg.account}:rule/{names.ami_rollout_rule}",
        }
    }
    start = _policy(stack, "AmiRolloutStartPolicy")
    assert sorted(start) == ["PassRolloutRoleToSsm", "StartRolloutRunbook"]
    assert start["StartRolloutRunbook"]["Action"] == "ssm:StartAutomationExecution"
    assert start["StartRolloutRunbook"]["Resource"] == f"{definition}:*"
    passing = start["PassRolloutRoleToSsm"]
    assert (passing["Action"], passing["Resource"]) == ("iam:PassRole", {"Fn::GetAtt": [rollout_role_id, "Arn"]})
    assert passing["Condition"] == {"StringEquals": {"iam:PassedToService": "ssm.amazonaws.com"}}


def test_runbook_reads_the_ami_then_refreshes_each_rolled_fleet(synth: Synth, fleet_synth: Synth) -> None:
    script = REFRESH_SCRIPT.read_text(encoding="utf-8")
    for stack_synth, env in _synths(synth, fleet_synth):
        cfg = stack_synth.environments[env]
        names = ResourceNames.of(cfg)
        stack = fleets_stack(stack_synth, env)
        content = _runbook(stack)["Content"]
        assert (_runbook(stack)["DocumentType"], content["schemaVersion"]) == ("Automation", "0.3")
        rollout_role_id, _ = _role(stack, "AmiRolloutRole")
        assert content["assumeRole"] == "{{ AutomationAssumeRole }}"
        assert content["parameters"]["AutomationAssumeRole"]["allowedValues"] == [
            {"Fn::GetAtt": [rollout_role_id, "Arn"]}
        ]
        first, *rest = content["mainSteps"]
        assert first["name"] == "ReadAmi" and first["action"] == "aws:executeAwsApi"
        assert first["inputs"] == {"Service": "ssm", "Api": "GetParameter", "Name": names.ami_parameter}
        assert first["outputs"] == [{"Name": "ImageId", "Selector": "$.Parameter.Value", "Type": "String"}]
        # One step per rolled fleet, in config order; Capacity Block fleets and enabled: false have none.
        assert [s["inputs"]["InputPayload"]["GroupName"] for s in rest] == [
            names.asg_name(f.name) for f in _rolled(cfg)
        ]
        for step in rest:
            assert step["action"] == "aws:executeScript"
            assert step["onFailure"] == "Continue" and step["isCritical"] is True  # the others still run
            inputs = step["inputs"]
            assert (inputs["Runtime"], inputs["Handler"]) == ("python3.11", "handler")
            assert inputs["Script"] == script
            assert inputs["InputPayload"]["ImageId"] == "{{ ReadAmi.ImageId }}"
    rolled = {f.name for f in _rolled(fleet_synth.environments["dev"])}
    assert "block" not in rolled and "warm" not in rolled and {"mixed-efa", "g4dn-efa"} <= rolled


def test_refresh_preferences_equal_the_fleet_config(synth: Synth, fleet_synth: Synth) -> None:
    model = botocore.session.get_session().get_service_model("autoscaling")
    preferences_shape = model.operation_model("StartInstanceRefresh").input_shape.members["Preferences"]
    seen_custom = False
    for stack_synth, env in _synths(synth, fleet_synth):
        cfg = stack_synth.environments[env]
        steps = _fleet_steps(fleets_stack(stack_synth, env))
        for fleet in _rolled(cfg):
            refresh = fleet.rollout
            prefs = steps[f"gpu-platform-{env}-{fleet.name}"]["inputs"]["InputPayload"]["Preferences"]
            high = refresh.max_healthy_percentage
            maximum = {} if high is None else {"MaxHealthyPercentage": high}
            assert prefs == {
                "MinHealthyPercentage": refresh.min_healthy_percentage,
                **maximum,
                "InstanceWarmup": refresh.instance_warmup_minutes * 60,
                "CheckpointPercentages": refresh.checkpoint_percentages,
                "CheckpointDelay": refresh.checkpoint_delay_minutes * 60,
                "SkipMatching": True,
                "AutoRollback": refresh.auto_rollback,
                "AlarmSpecification": {
                    "Alarms": [f"gpu-platform-{env}-{fleet.name}-{a.value}" for a in refresh.rollback_alarms]
                },
                # After the last replacement its alarms still roll back (two 5-minute periods and CloudWatch's delay).
                "BakeTime": refresh.bake_minutes * 60,
            }
            assert prefs["BakeTime"] >= 10 * 60
            # A served fleet launches before it terminates (tests/flows/test_served_rollout.py); others do not.
            assert (prefs["MinHealthyPercentage"], "MaxHealthyPercentage" in prefs) == (
                (100, True) if fleet.service is not None else (refresh.min_healthy_percentage, False)
            )
            report = ParamValidator().validate(prefs, preferences_shape)
            assert not report.has_errors(), report.generate_report()
            seen_custom |= fleet.refresh is not None
    assert seen_custom
    # The shipped configs take the defaults: 90 % healthy, checkpoints at 50 and 100 % 15 minutes apart.
    prefs = _fleet_steps(fleets_stack(synth, "staging"))["gpu-platform-staging-training"]["inputs"]["InputPayload"]
    assert prefs["Preferences"]["MinHealthyPercentage"] == 90
    assert (prefs["Preferences"]["CheckpointPercentages"], prefs["Preferences"]["CheckpointDelay"]) == ([50, 100], 900)
    assert prefs["Preferences"]["AutoRollback"] is True


def _dimension_values(node: Any, name: str) -> list[Any]:
    """Every value of dimension ``name`` in an alarm's properties (its metric or its math expression's)."""
    if isinstance(node, dict):
        if node.get("Name") == name and "Value" in node:
            return [node["Value"]]
        return [v for child in node.values() for v in _dimension_values(child, name)]
    if isinstance(node, list):
        return [v for child in node for v in _dimension_values(child, name)]
    return []


def _watches(alarm: dict[str, Any], group: str, fleets: StackTemplate) -> bool:
    """The alarm's metrics are the group's own, or (a service alarm) those of the target group the group
    registers its nodes in, followed from the monitoring stack's reference to the fleets stack's output."""
    if group in _dimension_values(alarm, "AutoScalingGroupName"):
        return True
    (asg,) = [
        r
        for r in fleets.resources("AWS::AutoScaling::AutoScalingGroup").values()
        if r["Properties"]["AutoScalingGroupName"] == group
    ]
    registered = {ref["Ref"] for ref in asg["Properties"].get("TargetGroupARNs", [])}
    watched = _dimension_values(alarm, "TargetGroup")
    outputs = fleets.json.get("Outputs", {})
    full_names = [outputs[v["Fn::GetStackOutput"]["OutputName"]]["Value"] for v in watched]
    return bool(full_names) and all(
        value["Fn::GetAtt"][1] == "TargetGroupFullName" and value["Fn::GetAtt"][0] in registered for value in full_names
    )


def test_rollback_alarms_exist_in_the_monitoring_stack_and_watch_that_fleet(synth: Synth, fleet_synth: Synth) -> None:
    seen_service = False
    for stack_synth, env in _synths(synth, fleet_synth):
        alarms = {
            a["Properties"]["AlarmName"]: a["Properties"]
            for a in stack_synth.stack(env, "Monitoring").resources("AWS::CloudWatch::Alarm").values()
        }
        fleets = fleets_stack(stack_synth, env)
        for group, step in _fleet_steps(fleets).items():
            names = step["inputs"]["InputPayload"]["Preferences"]["AlarmSpecification"]["Alarms"]
            assert names and len(names) <= 10  # the API takes up to 10
            for name in names:
                assert name in alarms, name  # a metric alarm of that name (not a composite)
                assert _watches(alarms[name], group, fleets), name
                seen_service |= name.endswith(("-http-5xx-rate", "-unhealthy-hosts"))
    assert seen_service  # dev's served fleet rolls back on its service alarms too


def test_rollout_role_can_touch_only_the_rolled_fleets(synth: Synth, fleet_synth: Synth) -> None:
    for stack_synth, env in _synths(synth, fleet_synth):
        cfg = stack_synth.environments[env]
        names = ResourceNames.of(cfg)
        stack = fleets_stack(stack_synth, env)
        resolve = Resolver(stack.json, account=cfg.account, region=cfg.region).resolve
        arn = f"arn:aws:{{}}:{cfg.region}:{cfg.account}"
        role_id, role = _role(stack, "AmiRolloutRole")
        (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
        assert trust["Principal"] == {"Service": "ssm.amazonaws.com"}
        assert trust["Condition"] == {
            "StringEquals": {"aws:SourceAccount": cfg.account},
            "ArnLike": {"aws:SourceArn": f"{arn.format('ssm')}:automation-execution/*"},
        }
        assert "Policies" not in role and "ManagedPolicyArns" not in role
        policy = _policy(stack, "AmiRolloutRolloutPolicy")
        assert sorted(policy) == [
            "LaunchOnlyThroughFleetTemplates",
            "NewFleetTemplateVersions",
            "PassNodeRoleToEc2",
            "ReadAmiParameter",
            "ReadGroupsAndTemplates",
            "RefreshFleetGroups",
            "TagOnLaunchOnly",
        ]
        assert policy["ReadAmiParameter"]["Action"] == "ssm:GetParameter"
        assert policy["ReadAmiParameter"]["Resource"] == f"{arn.format('ssm')}:parameter{names.ami_parameter}"
        assert sorted(policy["ReadGroupsAndTemplates"]["Action"]) == [
            "autoscaling:DescribeAutoScalingGroups",
            "ec2:DescribeLaunchTemplateVersions",
        ]
        rolled = _rolled(cfg)
        templates = sorted(
            f"{arn.format('ec2')}:launch-template/{t.lower()}" for f in rolled for t in _template_ids(stack, f.name)
        )
        assert templates and sorted(_as_list(resolve(policy["NewFleetTemplateVersions"]["Resource"]))) == templates
        launch = policy["LaunchOnlyThroughFleetTemplates"]
        assert (launch["Action"], launch["Resource"]) == ("ec2:RunInstances", "*")
        assert sorted(_as_list(resolve(launch["Condition"]["ArnLike"]["ec2:LaunchTemplate"]))) == templates
        assert launch["Condition"]["Bool"] == {"ec2:IsLaunchTemplateResource": "true"}
        assert sorted(_as_list(policy["RefreshFleetGroups"]["Resource"])) == sorted(
            f"{arn.format('autoscaling')}:autoScalingGroup:*:autoScalingGroupName/{names.asg_name(f.name)}"
            for f in rolled
        )
        assert policy["TagOnLaunchOnly"]["Condition"] == {"StringEquals": {"ec2:CreateAction": "RunInstances"}}
        node = policy["PassNodeRoleToEc2"]
        assert node["Action"] == "iam:PassRole"
        assert node["Resource"]["Fn::GetStackOutput"]["StackName"] == f"{env}-Security"
        assert "GpuNodeRole" in node["Resource"]["Fn::GetStackOutput"]["OutputName"]
        assert node["Condition"] == {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}
        (attached,) = [
            v["Properties"]["Roles"]
            for k, v in stack.resources("AWS::IAM::ManagedPolicy").items()
            if k.startswith("AmiRolloutRolloutPolicy")
        ]
        assert attached == [{"Ref": role_id}]
    # Not rolled, not reachable: the Capacity Block fleet's and the enabled: false fleet's templates.
    stack = fleets_stack(fleet_synth)
    excluded = _template_ids(stack, "block") | _template_ids(stack, "warm")
    assert excluded and not any(t in json.dumps(_policy(stack, "AmiRolloutRolloutPolicy")) for t in excluded)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]

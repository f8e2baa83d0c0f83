"""The launch flow across resources: the synthesized group (its lifecycle hooks, what it waits for),
that group created in moto with those hooks, the real bootstrap.sh completing the launch hook the
group names, with the hook and group names the group's own user data gives the node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws

from config.fleets.health import dcgm_level
from config.naming import ResourceNames, launch_hook_name, terminate_hook_name
from tests.fleet_synth import fleets_stack
from tests.fleet_synth import user_data as _user_data
from tests.flows.hooked_group import HookedGroup, hook_specs
from tests.scripts.node.fake_aws import FakeAws
from tests.scripts.node.fake_node import new_node
from tests.scripts.node.helpers import FakeImds
from tests.synth import StackTemplate, Synth

HOOK_KEYS = ("ASG_NAME", "LAUNCH_HOOK_NAME", "TERMINATE_HOOK_NAME")


def _groups(stack: StackTemplate) -> dict[str, dict[str, Any]]:
    return stack.resources("AWS::AutoScaling::AutoScalingGroup")


def _node_env_of(stack: StackTemplate, group: dict[str, Any]) -> dict[str, str]:
    """The literal KEY=value lines of node.env in the user data of the group's launch template."""
    props = group["Properties"]
    spec = props.get("LaunchTemplate") or props["MixedInstancesPolicy"]["LaunchTemplate"]["LaunchTemplateSpecification"]
    template = stack.resources("AWS::EC2::LaunchTemplate")[spec["LaunchTemplateId"]["Ref"]]
    script = _user_data(template["Properties"]["LaunchTemplateData"])
    body = script.split("<<'NODE_ENV'\n", 1)[1].split("\nNODE_ENV\n", 1)[0]
    return dict(line.split("=", 1) for line in body.splitlines() if "<token>" not in line)


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_hooks_are_in_the_group_which_waits_for_the_scripts_policy(synth: Synth, env: str) -> None:
    stack = fleets_stack(synth, env)
    assert stack.resources("AWS::AutoScaling::LifecycleHook") == {}  # none created after their group
    (policy_id,) = [k for k in stack.resources("AWS::IAM::ManagedPolicy") if k.startswith("NodeScriptsRead")]
    names = ResourceNames.of(synth.environments[env])
    groups = _groups(stack)
    assert len(groups) == len(synth.environments[env].fleets)
    for fleet in synth.environments[env].fleets:
        (group,) = [g for g in groups.values() if g["Properties"]["AutoScalingGroupName"] == names.asg_name(fleet.name)]
        assert policy_id in group["DependsOn"]  # launches only once the node role may fetch the scripts
        specs = {s["LifecycleHookName"]: s for s in hook_specs(group["Properties"])}
        group_name = names.asg_name(fleet.name)
        launch, terminate = launch_hook_name(group_name), terminate_hook_name(group_name)
        # Not the names of the removed AWS::AutoScaling::LifecycleHook resources (their cleanup would delete these).
        assert launch.endswith("-launch-hold") and terminate.endswith("-terminate-hold")
        assert specs == {
            launch: {
                "LifecycleHookName": launch,
                "LifecycleTransition": "autoscaling:EC2_INSTANCE_LAUNCHING",
                "HeartbeatTimeout": fleet.launch_hook_timeout_seconds,  # bootstrap + its DCGM level
                "DefaultResult": "ABANDON",  # no CONTINUE unless the node says it is ready
            },
            terminate: {
                "LifecycleHookName": terminate,
                "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
                "HeartbeatTimeout": 600,
                "DefaultResult": "CONTINUE",
            },
        }
        node_env = _node_env_of(stack, group)
        assert {k: node_env[k] for k in HOOK_KEYS} == {
            "ASG_NAME": group_name,
            "LAUNCH_HOOK_NAME": launch,
            "TERMINATE_HOOK_NAME": terminate,
        }
        # The node runs the DCGM level the hook's timeout was sized for.
        assert node_env["HEALTH_DCGM_LEVEL"] == str(dcgm_level(fleet.health, fleet.role.value))


def _prod_training(synth: Synth) -> tuple[list[dict[str, Any]], dict[str, str]]:
    stack = fleets_stack(synth, "prod")
    name = ResourceNames.of(synth.environments["prod"]).asg_name("training")
    (group,) = [g for g in _groups(stack).values() if g["Properties"]["AutoScalingGroupName"] == name]
    return hook_specs(group["Properties"]), _node_env_of(stack, group)


@pytest.mark.parametrize(
    ("efa_devices", "result", "state", "returncode"),
    [(4, "CONTINUE", "InService", 0), (3, "ABANDON", "Terminating", 1)],
    ids=["healthy", "failing-efa-step"],
)
def test_first_node_of_the_group_waits_until_the_real_bootstrap_completes_its_launch_hook(
    synth: Synth, tmp_path: Path, efa_devices: int, result: str, state: str, returncode: int
) -> None:
    specs, node_env = _prod_training(synth)
    with mock_aws(), FakeAws(HookedGroup(asg_name=node_env["ASG_NAME"], specs=specs)) as aws, FakeImds() as imds:
        assert aws.fleet.state == "Pending:Wait"  # the group's very first instance is held
        node = new_node(tmp_path, aws, imds)
        node.write_node_env(**{k: node_env[k] for k in HOOK_KEYS})
        node.env["FAKE_EFA_DEVICES"] = str(efa_devices)  # a p4d shows 4; 3 fails the efa step
        run = node.run()
        assert run.returncode == returncode, run.stderr
        (call,) = [c for c in aws.calls if c["Action"] == "CompleteLifecycleAction"]
        assert call["LifecycleHookName"] == node_env["LAUNCH_HOOK_NAME"] == specs[0]["LifecycleHookName"]
        assert call["AutoScalingGroupName"] == node_env["ASG_NAME"]
        assert call["InstanceId"] == aws.fleet.instance_id
        assert call["LifecycleActionResult"] == result
        assert aws.fleet.state == state

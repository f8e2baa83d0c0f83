"""An Auto Scaling group created in moto from a synthesized group's lifecycle hook specifications.

moto 5.2.5 accepts ``LifecycleHookSpecificationList`` in CreateAutoScalingGroup but drops it, and
does not model wait states (see tests/scripts/node/fake_aws.py). ``HookedGroup`` sends the specifications
as the template does, then does what Auto Scaling does with them: the hooks exist before the
first instance launches, so that instance starts in Pending:Wait. That is the fake's premise, not
something a test here proves: the evidence that the hooks hold the first nodes is the template (the
hooks are in the group's own specification list, tests/flows/test_launch_flow.py) and Auto Scaling's
documented behaviour of that property.
"""

from __future__ import annotations

import threading
from typing import Any

import boto3

from tests.scripts.node.fake_aws import LAUNCHING, WAIT_STATE, LifecycleFleet


def hook_specs(group_properties: dict[str, Any]) -> list[dict[str, Any]]:
    """The group's LifecycleHookSpecificationList in the API's shape (numbers as numbers)."""
    return [
        {
            "LifecycleHookName": spec["LifecycleHookName"],
            "LifecycleTransition": spec["LifecycleTransition"],
            "HeartbeatTimeout": int(spec["HeartbeatTimeout"]),
            "DefaultResult": spec["DefaultResult"],
        }
        for spec in group_properties["LifecycleHookSpecificationList"]
    ]


class HookedGroup(LifecycleFleet):
    """One group of one instance, its hooks from ``specs`` (given at creation)."""

    def __init__(
        self,
        *,
        asg_name: str,
        specs: list[dict[str, Any]],
        region: str = "us-east-1",
        instance_type: str = "p4d.24xlarge",
    ) -> None:
        self.region = region
        self.asg_name = asg_name
        by_transition = {spec["LifecycleTransition"]: spec["LifecycleHookName"] for spec in specs}
        self.launch_hook = by_transition.get(LAUNCHING, "")
        self.terminate_hook = by_transition.get("autoscaling:EC2_INSTANCE_TERMINATING", "")
        ec2 = boto3.client("ec2", region_name=region)
        self.autoscaling = boto3.client("autoscaling", region_name=region)
        ec2.create_launch_template(
            LaunchTemplateName=f"{asg_name}-lt",
            LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": instance_type},
        )
        group = {
            "AutoScalingGroupName": asg_name,
            "LaunchTemplate": {"LaunchTemplateName": f"{asg_name}-lt", "Version": "$Latest"},
            "MinSize": 1,
            "MaxSize": 1,
            "DesiredCapacity": 1,
            "AvailabilityZones": [f"{region}a"],
            "LifecycleHookSpecificationList": specs,
        }
        self.autoscaling.create_auto_scaling_group(**group)
        (instance,) = self.autoscaling.describe_auto_scaling_instances()["AutoScalingInstances"]
        self.instance_id: str = instance["InstanceId"]
        # What Auto Scaling does and moto does not: the specified hooks are the group's from the start.
        for spec in specs:
            self.autoscaling.put_lifecycle_hook(AutoScalingGroupName=asg_name, **spec)
        held = bool(self.launch_hook)
        self._first_state = WAIT_STATE[LAUNCHING] if held else "InService"
        self._lock = threading.Lock()
        self.states: dict[str, str] = {self.instance_id: self._first_state}
        self.heartbeats: list[tuple[str, str]] = []

    def reset(self) -> None:
        with self._lock:
            self.states = {self.instance_id: self._first_state}
            self.heartbeats.clear()

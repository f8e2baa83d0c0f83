"""Fixtures of the health check's tests: one moto world per module, a group with one instance per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import boto3
import pytest

from tests.scripts.node.health.support import REGION, Fleet
from tests.scripts.node.helpers import moto_account


@pytest.fixture(scope="module")
def aws() -> Iterator[None]:
    """One moto world for the module (its first Auto Scaling group costs about 2 s); every test
    gets its own group, instance and metric dimension in it."""
    with moto_account(REGION, "gpu-p4d", "p4d.24xlarge"):
        yield


@pytest.fixture
def fleet(aws: None) -> Fleet:
    """A group of one p4d instance of its own (its name unique in the module's moto world)."""
    asg_name = f"dev-training-p4d-{uuid.uuid4().hex[:8]}"
    autoscaling = boto3.client("autoscaling", region_name=REGION)
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=asg_name,
        LaunchTemplate={"LaunchTemplateName": "gpu-p4d", "Version": "$Latest"},
        MinSize=1,
        MaxSize=1,
        DesiredCapacity=1,
        AvailabilityZones=[f"{REGION}a"],
    )
    group = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[asg_name])
    return Fleet(asg_name, group["AutoScalingGroups"][0]["Instances"][0]["InstanceId"])

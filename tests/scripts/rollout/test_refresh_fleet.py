"""scripts/rollout/refresh_fleet.py (the AMI rollout runbook's step per fleet) against botocore's Stubber.

The Stubber checks every request against the service model and the exact parameters we expect,
and every response against the model; moto 5.2.5 has no instance refresh.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

REPO_ROOT = Path(__file__).resolve().parents[3]
SCRIPT = REPO_ROOT / "scripts" / "rollout" / "refresh_fleet.py"
GROUP = "gpu-platform-dev-train"
OLD_AMI, NEW_AMI = "ami-0000000000000000a", "ami-0123456789abcdef0"
TEMPLATE_A, TEMPLATE_B = "lt-0aaaaaaaaaaaaaaaa", "lt-0bbbbbbbbbbbbbbbb"
PREFERENCES = {
    "MinHealthyPercentage": 90,
    "InstanceWarmup": 600,
    "SkipMatching": True,
    "AutoRollback": True,
    "CheckpointPercentages": [50, 100],
    "CheckpointDelay": 900,
    "AlarmSpecification": {"Alarms": [f"{GROUP}-health-check-failed"]},
}
EVENT = {"GroupName": GROUP, "ImageId": NEW_AMI, "Preferences": PREFERENCES}


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("refresh_fleet", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Clients:
    def __init__(self) -> None:
        self.autoscaling = boto3.client("autoscaling", region_name="us-east-1")
        self.ec2 = boto3.client("ec2", region_name="us-east-1")
        self.asg = Stubber(self.autoscaling)
        self.lt = Stubber(self.ec2)

    def group(self, group: dict[str, Any]) -> None:
        self.asg.add_response(
            "describe_auto_scaling_groups",
            {"AutoScalingGroups": [group] if group else []},
            {"AutoScalingGroupNames": [GROUP]},
        )

    def version(self, template_id: str, asked: str, number: int, image: str) -> None:
        self.lt.add_response(
            "describe_launch_template_versions",
            {
                "LaunchTemplateVersions": [
                    {"LaunchTemplateId": template_id, "VersionNumber": number, "LaunchTemplateData": {"ImageId": image}}
                ]
            },
            {"LaunchTemplateId": template_id, "Versions": [asked]},
        )

    def new_version(self, template_id: str, source: int, number: int) -> None:
        self.lt.add_response(
            "create_launch_template_version",
            {"LaunchTemplateVersion": {"LaunchTemplateId": template_id, "VersionNumber": number}},
            {
                "LaunchTemplateId": template_id,
                "SourceVersion": str(source),
                "VersionDescription": f"AMI rollout: {NEW_AMI} (from version {source})",
                "LaunchTemplateData": {"ImageId": NEW_AMI},
            },
        )


@pytest.fixture
def clients() -> Iterator[Clients]:
    c = Clients()
    with c.asg, c.lt:
        yield c
        c.asg.assert_no_pending_responses()
        c.lt.assert_no_pending_responses()


def _base_group(**extra: Any) -> dict[str, Any]:
    return {
        "AutoScalingGroupName": GROUP,
        "MinSize": 0,
        "MaxSize": 4,
        "DesiredCapacity": 2,
        "DefaultCooldown": 300,
        "AvailabilityZones": ["us-east-1a"],
        "HealthCheckType": "EC2",
        "CreatedTime": "2026-01-01T00:00:00Z",
        **extra,
    }


def _run(script: ModuleType, clients: Clients, event: dict[str, Any] = EVENT) -> dict[str, str]:
    return script.refresh_fleet(event, autoscaling=clients.autoscaling, ec2=clients.ec2)


def test_single_template_group_gets_a_new_version_and_a_refresh_to_exactly_it(
    script: ModuleType, clients: Clients
) -> None:
    clients.group(_base_group(LaunchTemplate={"LaunchTemplateId": TEMPLATE_A, "Version": "7"}))
    clients.version(TEMPLATE_A, "7", 7, OLD_AMI)
    clients.new_version(TEMPLATE_A, source=7, number=8)
    clients.asg.add_response(
        "start_instance_refresh",
        {"InstanceRefreshId": "refresh-1"},
        {
            "AutoScalingGroupName": GROUP,
            "Strategy": "Rolling",
            "DesiredConfiguration": {"LaunchTemplate": {"LaunchTemplateId": TEMPLATE_A, "Version": "8"}},
            "Preferences": PREFERENCES,
        },
    )
    assert _run(script, clients) == {
        "Status": "started",
        "Detail": f"{GROUP}: instance refresh refresh-1 to {NEW_AMI} ({TEMPLATE_A} v8)",
        "InstanceRefreshId": "refresh-1",
    }


def test_mixed_group_restates_its_policy_with_every_template_at_its_new_version(
    script: ModuleType, clients: Clients
) -> None:
    """An EFA fleet mixing p5 and p4d: one template per layout, named by the overrides."""
    distribution = {
        "OnDemandAllocationStrategy": "prioritized",
        "OnDemandBaseCapacity": 0,
        "OnDemandPercentageAboveBaseCapacity": 50,
        "SpotAllocationStrategy": "capacity-optimized",
    }
    clients.group(
        _base_group(
            MixedInstancesPolicy={
                "LaunchTemplate": {
                    "LaunchTemplateSpecification": {
                        "LaunchTemplateId": TEMPLATE_A,
                        "LaunchTemplateName": "gpu-node-efa",
                        "Version": "3",
                    },
                    "Overrides": [
                        {
                            "InstanceType": "p5.48xlarge",
                            "LaunchTemplateSpecification": {"LaunchTemplateId": TEMPLATE_A, "Version": "3"},
                        },
                        {
                            "InstanceType": "p4d.24xlarge",
                            "LaunchTemplateSpecification": {"LaunchTemplateId": TEMPLATE_B, "Version": "5"},
                        },
                    ],
                },
                "InstancesDistribution": distribution,
            }
        )
    )
    clients.version(TEMPLATE_A, "3", 3, OLD_AMI)
    clients.version(TEMPLATE_B, "5", 5, OLD_AMI)
    clients.new_version(TEMPLATE_A, source=3, number=4)
    clients.new_version(TEMPLATE_B, source=5, number=6)
    clients.asg.add_response(
        "start_instance_refresh",
        {"InstanceRefreshId": "refresh-2"},
        {
            "AutoScalingGroupName": GROUP,
            "Strategy": "Rolling",
            "DesiredConfiguration": {
                "MixedInstancesPolicy": {
                    "LaunchTemplate": {
                        "LaunchTemplateSpecification": {"LaunchTemplateId": TEMPLATE_A, "Version": "4"},
                        "Overrides": [
                            {
                                "InstanceType": "p5.48xlarge",
                                "LaunchTemplateSpecification": {"LaunchTemplateId": TEMPLATE_A, "Version": "4"},
                            },
                            {
                                "InstanceType": "p4d.24xlarge",
                                "LaunchTemplateSpecification": {"LaunchTemplateId": TEMPLATE_B, "Version": "6"},
                            },
                        ],
                    },
                    "InstancesDistribution": distribution,
                }
            },
            "Preferences": PREFERENCES,
        },
    )
    assert _run(script, clients)["Status"] == "started"


def test_a_fleet_already_on_the_ami_is_left_alone(script: ModuleType, clients: Clients) -> None:
    """A repeated or spurious parameter event (or a rollback put back by hand) replaces nothing."""
    clients.group(
        _base_group(
            MixedInstancesPolicy={
                "LaunchTemplate": {
                    "LaunchTemplateSpecification": {"LaunchTemplateId": TEMPLATE_A, "Version": "9"},
                    "Overrides": [{"InstanceType": "g5.2xlarge"}, {"InstanceType": "g4dn.2xlarge"}],
                }
            }
        )
    )
    clients.version(TEMPLATE_A, "9", 9, NEW_AMI)
    assert _run(script, clients) == {
        "Status": "skipped",
        "Detail": f"{GROUP} already launches {NEW_AMI}: nothing to replace",
        "InstanceRefreshId": "",
    }


def test_a_refresh_in_progress_is_reported_with_what_to_do(script: ModuleType, clients: Clients) -> None:
    clients.group(_base_group(LaunchTemplate={"LaunchTemplateId": TEMPLATE_A, "Version": "7"}))
    clients.version(TEMPLATE_A, "7", 7, OLD_AMI)
    clients.new_version(TEMPLATE_A, source=7, number=8)
    clients.asg.add_client_error(
        "start_instance_refresh", service_error_code="InstanceRefreshInProgress", http_status_code=400
    )
    with pytest.raises(script.RolloutError) as err:
        _run(script, clients)
    assert str(err.value) == (
        f"{GROUP}: an instance refresh is already in progress; fix: let it finish (or cancel it with aws "
        "autoscaling cancel-instance-refresh), then run the runbook again"
    )


def test_a_missing_group_is_an_error(script: ModuleType, clients: Clients) -> None:
    clients.group({})
    with pytest.raises(script.RolloutError, match="no such Auto Scaling group; fix: deploy the Fleets stack"):
        _run(script, clients)


def test_an_alias_version_cannot_be_rolled_back_to(script: ModuleType, clients: Clients) -> None:
    clients.group(_base_group(LaunchTemplate={"LaunchTemplateId": TEMPLATE_A, "Version": "$Latest"}))
    with pytest.raises(script.RolloutError, match=r"used as \$Latest, which an instance refresh cannot roll back to"):
        _run(script, clients)


def test_not_an_ami_id(script: ModuleType, clients: Clients) -> None:
    with pytest.raises(script.RolloutError, match="is not an AMI id"):
        _run(script, clients, {**EVENT, "ImageId": "resolve:ssm:/x"})

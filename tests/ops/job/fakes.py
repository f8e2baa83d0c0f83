"""What the job command tests share: a deployed training fleet in moto, and nodes that answer the job document
(the fixtures that put them in place, ``aws`` and ``nodes``: conftest.py).

moto records SendCommand and ListCommands as AWS does, but runs nothing on an instance: every invocation
succeeds with empty output. ``FakeNodes`` plays the node side of the job document instead, following the
runner's contract (``scripts/node/jobs/runner.py start|status|stop``: one JSON line per run, exit 1 when a
start is refused): it sets each invocation's status, exit code and output on moto's SSM backend as the
node would have produced them, and can hold an invocation InProgress for a number of polls. It also keeps
a command to the instance ids it was sent to (moto adds every instance of the region when Targets is empty).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import boto3
from moto.ec2.models import ec2_backends

ACCOUNT = "222222222222"  # tests/fixtures/config/staging.yaml
REGION = "us-east-1"
ENV = "staging"
GROUP = "gpu-platform-staging-training"
PLACEMENT_GROUP = "staging-training-cluster"
DOCUMENT = "gpu-platform-staging-job"
STARTED_AT = "2026-01-05T10:00:00+00:00"


@dataclass
class FakeNodes:
    """The job units of each node, as the runner would keep them in systemd."""

    units: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    refuse: set[str] = field(default_factory=set)  # nodes whose start fails
    polls_in_progress: int = 0  # GetCommandInvocation answers InProgress this many times per invocation
    polled: dict[tuple[str, str], int] = field(default_factory=dict)

    def report(self, job: str, instance_id: str) -> dict[str, Any]:
        unit = self.units.get((instance_id, job), {"state": "inactive", "result": None, "exit_code": None})
        return {
            "job": job,
            "instance_id": instance_id,
            "unit": f"gpu-job-{job}.service",
            "started_at": unit.get("started_at"),
            **{k: unit[k] for k in ("state", "result", "exit_code")},
        }

    def set_state(self, instance_id: str, job: str, state: str, result: str | None, exit_code: int | None) -> None:
        unit = self.units.setdefault((instance_id, job), {"started_at": STARTED_AT})
        unit.update(state=state, result=result, exit_code=exit_code)

    def run(self, instance_id: str, parameters: dict[str, list[str]]) -> tuple[str, int, str, str]:
        """Status, exit code, stdout, stderr of the document on one node."""
        action = parameters.get("Action", ["start"])[0]
        job = parameters["JobId"][0]
        if action == "start":
            running = self.report(job, instance_id)["state"] in ("active", "activating")
            if instance_id in self.refuse or running:
                reason = "nvidia-smi reports no GPU" if instance_id in self.refuse else f"job {job} is already active"
                return (
                    "Failed",
                    1,
                    json.dumps({**self.report(job, instance_id), "reason": reason}),
                    f"refused: {reason}",
                )
            self.set_state(instance_id, job, "active", None, None)
        elif action == "stop" and (instance_id, job) in self.units:
            self.set_state(instance_id, job, "inactive", "success", 143)
        return "Success", 0, json.dumps(self.report(job, instance_id)) + "\n", ""


@dataclass
class Fleet:
    session: boto3.session.Session
    subnet: str
    ami: str
    group: str = GROUP
    account: str = ACCOUNT
    instance_type: str = "p4d.24xlarge"
    placement_group: str = PLACEMENT_GROUP
    document: str = DOCUMENT

    def launch(self, instance_type: str | None = None, placement_group: str | None = "") -> str:
        """A node the group launched: an instance attached to the group, placed as EC2 would place it (in the
        group's placement group unless ``placement_group`` says otherwise; ``None``: in none)."""
        ec2 = self.session.client("ec2")
        instance = ec2.run_instances(
            ImageId=self.ami, InstanceType=instance_type or self.instance_type, MinCount=1, MaxCount=1,
            SubnetId=self.subnet,
        )["Instances"][0]["InstanceId"]  # fmt: skip
        placed = self.placement_group if placement_group == "" else placement_group
        ec2_backends[self.account][REGION].get_instance(instance).placement.group_name = placed or ""
        self.session.client("autoscaling").attach_instances(InstanceIds=[instance], AutoScalingGroupName=self.group)
        return instance

    def ip(self, instance_id: str) -> str:
        found = self.session.client("ec2").describe_instances(InstanceIds=[instance_id])
        return found["Reservations"][0]["Instances"][0]["PrivateIpAddress"]

    def commands(self, action: str | None = None) -> list[dict[str, Any]]:
        """The job document's commands moto recorded, oldest first."""
        listed = self.session.client("ssm").list_commands()["Commands"]
        mine = [c for c in listed if c["DocumentName"] == self.document]
        return [c for c in mine if action is None or c["Parameters"]["Action"] == [action]]


def deploy(session: boto3.session.Session, count: int = 2, **fleet: str) -> tuple[Fleet, list[str]]:
    """The training fleet's group (cluster placement group, as the Fleets stack makes it) with ``count`` nodes;
    returns the fleet and its node ids in id order. ``fleet``: another environment's names (see ``Fleet``)."""
    ec2 = session.client("ec2")
    ami = ec2.register_image(Name="gpu-platform-test", RootDeviceName="/dev/xvda")["ImageId"]
    vpc = ec2.create_vpc(CidrBlock="10.20.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.20.0.0/20", AvailabilityZone="us-east-1a")["Subnet"]
    template = ec2.create_launch_template(
        LaunchTemplateName="training", LaunchTemplateData={"ImageId": ami, "InstanceType": "p4d.24xlarge"}
    )["LaunchTemplate"]["LaunchTemplateId"]
    made = Fleet(session, subnet["SubnetId"], ami, **fleet)
    session.client("autoscaling").create_auto_scaling_group(
        AutoScalingGroupName=made.group,
        LaunchTemplate={"LaunchTemplateId": template, "Version": "$Latest"},
        MinSize=0,
        MaxSize=8,
        DesiredCapacity=0,
        VPCZoneIdentifier=subnet["SubnetId"],
        PlacementGroup=made.placement_group,
    )
    return made, sorted(made.launch() for _ in range(count))

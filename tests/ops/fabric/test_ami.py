"""``gpu-platform job fabric-test`` names the AMI its nodes were booted from (the image a passing check vouches
for, which the pipeline's AMI gate compares with a later environment's), and refuses nodes of different AMIs."""

from __future__ import annotations

from pathlib import Path

import typer
from typer.testing import CliRunner

from ops.fabric import command as fabric_command
from ops.fabric.command import fabric_test
from tests.ops.fabric.fakes import GROUP, FakeNodes, deploy_training, run
from tests.ops.helpers import config_dir


def _image(session, instance_id: str) -> str:
    found = session.client("ec2").describe_instances(InstanceIds=[instance_id])
    return found["Reservations"][0]["Instances"][0]["ImageId"]


def test_the_json_report_names_the_ami_of_the_nodes(aws, capsys, tmp_path) -> None:
    nodes = deploy_training(aws, 2)
    FakeNodes(aws)
    code, report, err = run(aws, capsys, tmp_path)
    assert (code, err) == (0, "")
    assert report["ami"] == {"id": _image(aws, nodes[0]["id"]), "name": "gpu-platform-test"}


def test_the_tables_name_the_ami_too(aws, tmp_path, monkeypatch) -> None:
    nodes = deploy_training(aws, 2)
    FakeNodes(aws)
    monkeypatch.setattr(fabric_command, "open_session", lambda region: aws)
    app = typer.Typer()
    app.command("fabric-test")(fabric_test)
    app.command("noop")(lambda: None)
    folder = config_dir(tmp_path, "staging")
    result = CliRunner().invoke(
        app, ["fabric-test", "--env", "staging", "--fleet", "training", "--config-dir", str(folder)]
    )
    assert result.exit_code == 0, result.output
    assert f"nodes booted from AMI {_image(aws, nodes[0]['id'])} (gpu-platform-test)" in result.output


def test_nodes_of_different_amis_are_refused_in_one_line_before_any_job(aws, capsys, tmp_path) -> None:
    """A node launched from another AMI (an instance refresh under way): the check would vouch for no one image."""
    nodes = deploy_training(aws, 2)
    ec2 = aws.client("ec2")
    newer = ec2.register_image(Name="gpu-platform-newer", RootDeviceName="/dev/xvda")["ImageId"]
    subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
    odd = ec2.run_instances(ImageId=newer, InstanceType="p4d.24xlarge", MinCount=1, MaxCount=1, SubnetId=subnet)
    odd_id = odd["Instances"][0]["InstanceId"]
    aws.client("autoscaling").attach_instances(InstanceIds=[odd_id], AutoScalingGroupName=GROUP)
    fake = FakeNodes(aws)
    code, report, err = run(aws, capsys, tmp_path)
    assert (code, report) == (2, {})
    old = _image(aws, nodes[0]["id"])
    first = ", ".join(sorted(n["id"] for n in nodes))
    groups = sorted(
        [f"{first}: {old} (gpu-platform-test)", f"{odd_id}: {newer} (gpu-platform-newer)"],
        key=lambda g: g.split(": ")[1],
    )
    assert err == (
        f"fabric-test: the nodes were booted from different AMIs ({'; '.join(groups)}); the fabric check tests one "
        f"image; fix: let the instance refresh finish (aws autoscaling describe-instance-refreshes "
        f"--auto-scaling-group-name {GROUP}), then rerun\n"
    )
    assert fake.sent == []


def test_an_ami_ec2_no_longer_describes_is_reported_without_a_name(aws, capsys, tmp_path: Path) -> None:
    nodes = deploy_training(aws, 2)
    image = _image(aws, nodes[0]["id"])
    aws.client("ec2").deregister_image(ImageId=image)
    FakeNodes(aws)
    code, report, _ = run(aws, capsys, tmp_path)
    assert code == 0 and report["ami"] == {"id": image, "name": None}

"""FleetLaunchTemplate: IMDSv2 only, encrypted gp3 volumes with the data key, no public address; one more
metadata hop for containers; a training fleet's training group on every interface that carries the node group."""

from __future__ import annotations

import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template

from gpu_constructs.fleet.fleet_launch_template import ROOT_DEVICE, SCRATCH_DEVICE, FleetLaunchTemplate, Volumes
from tests.gpu_constructs.helpers import REGION, bare_stack, group_id, only, template, vpc


def _build(
    *,
    containers: bool,
    scratch_gib: int,
    training: bool = False,
    efa_cards: tuple[int, ...] = (),
    efa_only: bool = False,
) -> Template:
    stack = bare_stack()
    network = vpc(stack)
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    FleetLaunchTemplate(
        stack,
        "Lt",
        machine_image=ec2.MachineImage.generic_linux({REGION: "ami-0123456789abcdef0"}),
        user_data=ec2.UserData.for_linux(),
        instance_profile=iam.InstanceProfile(stack, "Profile", role=role),
        node_security_group=ec2.SecurityGroup(stack, "NodeSg", vpc=network),
        efa_security_group=ec2.SecurityGroup(stack, "EfaSg", vpc=network),
        efa_cards=efa_cards,
        efa_only=efa_only,
        training_security_group=ec2.SecurityGroup(stack, "TrainingSg", vpc=network) if training else None,
        volumes=Volumes(root_gib=200, scratch_gib=scratch_gib),
        volume_key=kms.Key(stack, "DataKey"),
        containers=containers,
    )
    return template(stack)


@pytest.fixture(scope="module")
def plain() -> Template:
    return _build(containers=False, scratch_gib=500)


def _data(tmpl: Template) -> dict:
    return only(tmpl, "AWS::EC2::LaunchTemplate")[1]["Properties"]["LaunchTemplateData"]


def test_metadata_is_imdsv2_only_with_tags(plain: Template) -> None:
    options = _data(plain)["MetadataOptions"]
    assert options == {"HttpEndpoint": "enabled", "HttpPutResponseHopLimit": 1, "HttpTokens": "required",
                       "InstanceMetadataTags": "enabled"}  # fmt: skip
    assert _data(_build(containers=True, scratch_gib=0))["MetadataOptions"]["HttpPutResponseHopLimit"] == 2


def test_root_and_scratch_volumes_are_encrypted_gp3_with_the_data_key(plain: Template) -> None:
    devices = {d["DeviceName"]: d["Ebs"] for d in _data(plain)["BlockDeviceMappings"]}
    assert set(devices) == {ROOT_DEVICE, SCRATCH_DEVICE}
    for ebs in devices.values():
        assert ebs["Encrypted"] is True and ebs["VolumeType"] == "gp3" and ebs["DeleteOnTermination"] is True
        assert ebs["KmsKeyId"]["Fn::GetAtt"][0].startswith("DataKey")
    assert devices[ROOT_DEVICE]["VolumeSize"] == 200 and devices[SCRATCH_DEVICE]["VolumeSize"] == 500


def test_plain_node_has_one_private_interface_in_the_node_group(plain: Template) -> None:
    data = _data(plain)
    node_group = [{"Fn::GetAtt": [group_id(plain, "NodeSg"), "GroupId"]}]
    assert data["NetworkInterfaces"] == [{"AssociatePublicIpAddress": False, "DeviceIndex": 0, "Groups": node_group}]
    assert "SecurityGroupIds" not in data
    assert "KeyName" not in data


def _group_ref(tmpl: Template, prefix: str) -> dict:
    return {"Fn::GetAtt": [group_id(tmpl, prefix), "GroupId"]}


def test_a_training_node_without_efa_carries_the_node_and_training_groups() -> None:
    tmpl = _build(containers=False, scratch_gib=0, training=True)
    (nic,) = _data(tmpl)["NetworkInterfaces"]
    assert nic["Groups"] == [_group_ref(tmpl, "NodeSg"), _group_ref(tmpl, "TrainingSg")]
    assert nic["AssociatePublicIpAddress"] is False


@pytest.mark.parametrize("efa_only", [False, True], ids=["efa", "efa-only"])
def test_every_interface_of_an_efa_training_node_carries_the_training_group(efa_only: bool) -> None:
    tmpl = _build(containers=False, scratch_gib=0, training=True, efa_cards=(0, 1, 2, 3), efa_only=efa_only)
    nics = _data(tmpl)["NetworkInterfaces"]
    assert len(nics) == (5 if efa_only else 4)
    expected = [_group_ref(tmpl, "EfaSg"), _group_ref(tmpl, "NodeSg"), _group_ref(tmpl, "TrainingSg")]
    assert all(nic["Groups"] == expected for nic in nics)


def test_an_efa_node_of_another_fleet_carries_no_training_group() -> None:
    tmpl = _build(containers=False, scratch_gib=0, efa_cards=(0, 1))
    expected = [_group_ref(tmpl, "EfaSg"), _group_ref(tmpl, "NodeSg")]
    assert [nic["Groups"] for nic in _data(tmpl)["NetworkInterfaces"]] == [expected, expected]

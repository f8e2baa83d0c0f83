"""Preflight resources: the AMI parameters (moto's SSM and CloudFormation), the FSx for Lustre storage quota
(moto's FSx) and NAT gateway and Elastic IP quotas (moto's EC2); Service Quotas by botocore's Stubber."""

from __future__ import annotations

import json
from typing import Any

from botocore.stub import Stubber
from moto.ec2.models import ec2_backends

from ops.findings import Level
from ops.preflight.aws import Aws
from ops.preflight.resources import check_ami_parameters, check_fsx_quota, check_nat_eip_quotas
from tests.ops.preflight.preflight_fixtures import (
    environment,
    stub_quotas,
)

#: A public parameter moto serves (the Deep Learning AMI's is not among them).
PUBLIC = "/aws/service/ami-amazon-linux-latest/amzn2-ami-hvm-x86_64-gp2"
LATEST = "/imagebuilder/gpu-platform/staging/ami/latest"


def _staging(bootstrap: str = PUBLIC):
    env = environment("staging")
    return env.model_copy(update={"image": env.image.model_copy(update={"bootstrap_ami_parameter": bootstrap})})


#: The account that owns the public Deep Learning AMIs.
DLAMI_OWNER = "898082745236"


def _ami(aws: Aws, owner: str | None = None) -> str:
    """An AMI in moto's EC2, owned by the environment's account unless owner says otherwise (as EC2 reports a
    public AMI: its owner's account, not the caller's)."""
    ami = aws.client("ec2").register_image(Name="Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04)")[
        "ImageId"
    ]
    if owner:
        region = aws.region
        account = environment("staging").account
        ec2_backends[account][region].amis[ami].owner_id = owner
    return ami


def test_ami_parameters_exist(aws: Aws) -> None:
    golden = _ami(aws)
    aws.client("ssm").put_parameter(Name=LATEST, Value=golden, Type="String")
    findings = check_ami_parameters(_staging(), aws)
    assert {f.level for f in findings} == {Level.INFO}
    assert findings[-1].message == f"{LATEST} = {golden}"


def test_the_public_bootstrap_ami_is_a_warning_with_where_the_first_golden_ami_comes_from(aws: Aws) -> None:
    public = _ami(aws, owner=DLAMI_OWNER)
    aws.client("ssm").put_parameter(Name=LATEST, Value=public, Type="String")
    finding = check_ami_parameters(_staging(), aws)[-1]
    assert finding.level is Level.WARNING
    assert finding.message.startswith(f"no golden AMI yet: {LATEST} holds {public} (")
    assert f"owner {DLAMI_OWNER}), the public bootstrap AMI" in finding.message
    # staging receives its AMIs: the build runs in the environment that shares with it.
    assert "lists staging in image.share_with builds one" in finding.fix


def test_an_ami_the_account_cannot_see_is_a_warning(aws: Aws) -> None:
    aws.client("ssm").put_parameter(Name=LATEST, Value="ami-0123456789abcdef0", Type="String")
    finding = check_ami_parameters(_staging(), aws)[-1]
    assert finding.level is Level.WARNING and "which this account cannot describe" in finding.message


def test_fleet_parameter_absent_before_the_first_deploy_is_info(aws: Aws) -> None:
    [_, finding] = check_ami_parameters(_staging(), aws)
    assert finding.level is Level.INFO and "staging-Image creates it on its first deploy" in finding.message


def test_fleet_parameter_absent_after_the_image_stack_is_an_error(aws: Aws) -> None:
    body = '{"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}'
    aws.client("cloudformation").create_stack(StackName="staging-Image", TemplateBody=body)
    [_, finding] = check_ami_parameters(_staging(), aws)
    assert finding.level is Level.ERROR and "although staging-Image exists" in finding.message
    assert f"--name {LATEST}" in finding.fix


def _image_stack_holding_the_released_parameter(aws: Aws, retained: bool) -> None:
    legacy = {"Type": "AWS::SSM::Parameter", "Properties": {"Name": LATEST, "Type": "String", "Value": "ami-0"}}
    if retained:
        legacy["DeletionPolicy"] = "Retain"
    body = json.dumps({"Resources": {"AmiParameter3D3A0D31": legacy}})
    aws.client("cloudformation").create_stack(StackName="staging-Image", TemplateBody=body)


def test_an_image_stack_with_the_released_parameter_unretained_refuses_the_upgrade(aws: Aws) -> None:
    _image_stack_holding_the_released_parameter(aws, retained=False)
    errors = [f for f in check_ami_parameters(_staging(), aws) if f.level is Level.ERROR]
    assert len(errors) == 1
    assert "holds /imagebuilder/gpu-platform/staging/ami/latest as AmiParameter3D3A0D31 without DeletionPolicy" in (
        errors[0].message
    )
    assert (
        errors[0].fix == "deploy release d8fda28 first (git checkout d8fda28 && make deploy ENV=staging), then this one"
    )


def test_an_image_stack_that_retains_it_may_upgrade(aws: Aws) -> None:
    _image_stack_holding_the_released_parameter(aws, retained=True)
    assert not [f for f in check_ami_parameters(_staging(), aws) if "AmiParameter3D3A0D31" in f.message]


def test_missing_bootstrap_ami_parameter_is_an_error(aws: Aws) -> None:
    missing = "/aws/service/deeplearning/ami/x86_64/no-such-ami/latest/ami-id"
    [finding, _] = check_ami_parameters(_staging(missing), aws)
    assert finding.level is Level.ERROR
    assert finding.message == f"image.bootstrap_ami_parameter: {missing} does not exist in us-east-1"


def _fsx_quotas(aws: Aws, value: float) -> Stubber:
    quota = {"ServiceCode": "fsx", "QuotaCode": "L-1216C47A", "Value": value}
    stub = Stubber(aws.client("service-quotas"))
    persistent = {**quota, "QuotaName": "Lustre Persistent SSD storage capacity (GiB)"}
    others = [
        {**quota, "QuotaCode": "L-0000000A", "QuotaName": "Lustre Scratch SSD storage capacity (GiB)"},
        {**quota, "QuotaCode": "L-0000000B", "QuotaName": "Lustre file systems"},
    ]
    stub.add_response("list_service_quotas", {"Quotas": [persistent]}, {"ServiceCode": "fsx"})
    stub.add_response("list_aws_default_service_quotas", {"Quotas": [persistent, *others]}, {"ServiceCode": "fsx"})
    stub.activate()
    return stub


def _lustre(aws: Aws, gib: int, tags: list[dict[str, str]]) -> None:
    aws.client("fsx").create_file_system(
        FileSystemType="LUSTRE", StorageCapacity=gib, SubnetIds=["subnet-0123456789abcdef0"], Tags=tags
    )


def test_fsx_quota_covers_the_file_system(aws: Aws) -> None:
    # staging's own file system (its tags) is replaced by a deploy, not added: it does not count.
    _lustre(aws, 2400, [{"Key": "Project", "Value": "gpu-platform"}, {"Key": "Environment", "Value": "staging"}])
    _lustre(aws, 1200, [{"Key": "Project", "Value": "other"}])
    _fsx_quotas(aws, 2400)
    [finding] = check_fsx_quota(_staging(), aws)
    assert finding.level is Level.INFO and "2400 GiB cover 1200 in use + 1200" in finding.message


def test_fsx_quota_short_of_others_plus_ours_is_an_error(aws: Aws) -> None:
    _lustre(aws, 2400, [{"Key": "Project", "Value": "other"}])
    _fsx_quotas(aws, 2400)
    [finding] = check_fsx_quota(_staging(), aws)
    assert finding.level is Level.ERROR
    assert "1 other Lustre file system(s) use 2400 and storage.file_system needs 1200" in finding.message
    assert finding.fix.startswith("request L-1216C47A >= 3600")


def _nat_gateway(aws: Aws, subnet: str, tags: list[dict[str, str]]) -> None:
    ec2 = aws.client("ec2")
    spec = [{"ResourceType": "elastic-ip", "Tags": tags}] if tags else []
    allocation = ec2.allocate_address(Domain="vpc", TagSpecifications=spec)["AllocationId"]
    natspec = [{"ResourceType": "natgateway", "Tags": tags}] if tags else []
    ec2.create_nat_gateway(SubnetId=subnet, AllocationId=allocation, TagSpecifications=natspec)


def _subnet(aws: Aws) -> str:
    ec2 = aws.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.99.0.0/16")["Vpc"]["VpcId"]
    return ec2.create_subnet(VpcId=vpc, CidrBlock="10.99.0.0/24", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]


def test_nat_and_eip_quotas_cover_the_nat_gateway(aws: Aws) -> None:
    subnet = _subnet(aws)
    ours: list[dict[str, Any]] = [{"Key": "Project", "Value": "gpu-platform"}, {"Key": "Environment", "Value": "dev"}]
    _nat_gateway(aws, subnet, ours)  # dev's own, from an earlier deploy
    _nat_gateway(aws, subnet, [])
    stub_quotas(aws, [("vpc", "L-FE5A380F", 2), ("ec2", "L-0263D0A3", 2)])
    [finding] = check_nat_eip_quotas(environment("dev"), aws)
    assert finding.level is Level.INFO and finding.message == "1 NAT gateway(s) fit 2 per zone; 2 Elastic IPs fit 2"


def test_nat_and_eip_quotas_taken_by_others_are_errors(aws: Aws) -> None:
    subnet = _subnet(aws)
    for _ in range(2):
        _nat_gateway(aws, subnet, [])
    stub_quotas(aws, [("vpc", "L-FE5A380F", 2), ("ec2", "L-0263D0A3", 2)])
    nat, eip = check_nat_eip_quotas(environment("dev"), aws)
    assert (nat.level, eip.level) == (Level.ERROR, Level.ERROR)
    assert nat.message.startswith("us-east-1a holds 2 NAT gateway(s) of others")
    assert eip.fix.startswith("request L-0263D0A3 >= 3")


def test_isolated_environment_needs_no_nat(aws: Aws) -> None:
    [finding] = check_nat_eip_quotas(environment("staging"), aws)
    assert finding.level is Level.INFO and "isolated" in finding.message

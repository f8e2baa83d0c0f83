"""What the preflight tests share: the fixture environments in a moto account (the account itself: the ``aws``
fixture of conftest.py), a bootstrapped account, Service Quotas stubs.

moto serves STS, EC2, CloudFormation, SSM and FSx; Service Quotas (moto knows only the vpc
quotas) and DescribeCapacityReservations (not in moto) are answered by botocore's Stubber.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from botocore.stub import Stubber

from config.loader import load_environment
from config.schema import Environment
from ops.preflight.aws import Aws
from ops.preflight.identity import BOOTSTRAP_VERSION_PARAMETER

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "config"
#: The account moto answers as.
MOTO_ACCOUNT = "123456789012"
#: A public AMI parameter moto answers.
PUBLIC = "/aws/service/ami-amazon-linux-latest/amzn2-ami-hvm-x86_64-gp2"
#: The CDK bootstrap stack's template, as small as CloudFormation takes it.
TOOLKIT = '{"Resources": {"Bucket": {"Type": "AWS::S3::Bucket"}}}'


def environment(name: str, **updates: Any) -> Environment:
    """A fixture environment, in moto's account unless ``updates`` says otherwise."""
    env = load_environment(name, FIXTURES)
    return env.model_copy(update={"account": MOTO_ACCOUNT, **updates})


def fleet_changed(env: Environment, index: int, **updates: Any) -> Environment:
    """``env`` with one fleet's fields replaced (unvalidated: for account-side failures the config allows)."""
    fleets = list(env.fleets)
    fleets[index] = fleets[index].model_copy(update=updates)
    return env.model_copy(update={"fleets": fleets})


def stub_quotas(aws: Aws, answers: list[tuple[str, str, float | None]]) -> Stubber:
    """Service Quotas answers in call order: (service, code, value); None = no applied value and no default."""
    stub = Stubber(aws.client("service-quotas"))
    for service, code, value in answers:
        params = {"ServiceCode": service, "QuotaCode": code}
        if value is None:
            stub.add_client_error("get_service_quota", "NoSuchResourceException", expected_params=params)
            stub.add_client_error("get_aws_default_service_quota", "NoSuchResourceException", expected_params=params)
        else:
            quota = {"ServiceCode": service, "QuotaCode": code, "QuotaName": code, "Value": value}
            stub.add_response("get_service_quota", {"Quota": quota}, params)
    stub.activate()
    return stub


def moto_dev_config(tmp_path: Path, **changes: Any) -> Path:
    """tests/fixtures/config/dev.yaml in moto's account with moto's public AMI parameter, plus ``changes``."""
    data = yaml.safe_load((FIXTURES / "dev.yaml").read_text())
    data["account"] = MOTO_ACCOUNT
    data["image"]["bootstrap_ami_parameter"] = data["image"]["parent_image_parameter"] = PUBLIC
    data.update(changes)
    folder = tmp_path / "config"
    folder.mkdir()
    (folder / "dev.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return folder


def dev_assembly(tmp_path: Path) -> Path:
    """A cloud assembly of dev's Network stack that asks for bootstrap version 6."""
    folder = tmp_path / "assembly-dev"
    folder.mkdir()
    stack = {"type": "aws:cloudformation:stack", "properties": {"requiresBootstrapStackVersion": 6}}
    (folder / "manifest.json").write_text(json.dumps({"artifacts": {"devNetwork": stack}}))
    return folder


def bootstrapped(aws: Aws) -> None:
    """The account bootstrapped for CDK (the toolkit stack and its version parameter)."""
    aws.client("cloudformation").create_stack(StackName="CDKToolkit", TemplateBody=TOOLKIT)
    aws.client("ssm").put_parameter(Name=BOOTSTRAP_VERSION_PARAMETER, Value="21", Type="String")


def dev_quotas(aws: Aws, spot_g: float = 64) -> Stubber:
    """dev's Service Quotas calls in order: G Spot vCPUs (its fleet is all Spot), FSx, NAT per zone, EIPs."""
    stub = Stubber(aws.client("service-quotas"))

    def quota(service: str, code: str, value: float) -> None:
        answer = {"Quota": {"ServiceCode": service, "QuotaCode": code, "QuotaName": code, "Value": value}}
        stub.add_response("get_service_quota", answer, {"ServiceCode": service, "QuotaCode": code})

    quota("ec2", "L-3819A6DF", spot_g)
    scratch = {
        "ServiceCode": "fsx",
        "QuotaCode": "L-0000000A",
        "QuotaName": "Lustre Scratch SSD storage capacity (GiB)",
    }
    stub.add_response("list_service_quotas", {"Quotas": []}, {"ServiceCode": "fsx"})
    stub.add_response(
        "list_aws_default_service_quotas", {"Quotas": [{**scratch, "Value": 100800}]}, {"ServiceCode": "fsx"}
    )
    quota("vpc", "L-FE5A380F", 5)
    quota("ec2", "L-0263D0A3", 5)
    stub.activate()
    return stub

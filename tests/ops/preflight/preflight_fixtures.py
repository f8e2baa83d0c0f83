"""What the preflight tests share: a moto account, the fixture environments in it, Service Quotas stubs.

moto serves STS, EC2, CloudFormation, SSM and FSx; Service Quotas (moto knows only the vpc
quotas) and DescribeCapacityReservations (not in moto) are answered by botocore's Stubber.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from config.loader import load_environment
from config.schema import Environment
from ops.preflight.aws import Aws

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "config"
#: The account moto answers as.
MOTO_ACCOUNT = "123456789012"


@pytest.fixture(name="aws")
def aws_fixture(monkeypatch: pytest.MonkeyPatch) -> Iterator[Aws]:
    """An Aws on a moto account in us-east-1 (fake credentials; nothing leaves the process)."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        yield Aws(boto3.session.Session(region_name="us-east-1"))


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

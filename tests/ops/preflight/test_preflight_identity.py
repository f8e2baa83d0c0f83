"""Preflight identity checks against a moto account: the account, the region, the CDK bootstrap."""

from __future__ import annotations

import json
from pathlib import Path

from botocore.stub import Stubber

from ops.findings import Level
from ops.preflight.aws import Aws
from ops.preflight.identity import BOOTSTRAP_VERSION_PARAMETER, check_account, check_bootstrap, check_region
from tests.ops.preflight.preflight_fixtures import (
    environment,
)

_TOOLKIT_TEMPLATE = json.dumps(
    {
        "Resources": {"Bucket": {"Type": "AWS::S3::Bucket"}},
        "Outputs": {"BootstrapVersion": {"Value": "6"}},
    }
)


def _assembly(tmp_path: Path, version: int) -> Path:
    """A cloud assembly whose stacks require ``version`` (as cdk synth writes manifest.json)."""
    manifest = {
        "artifacts": {
            "devNetwork": {
                "type": "aws:cloudformation:stack",
                "properties": {
                    "requiresBootstrapStackVersion": version,
                    "bootstrapStackVersionSsmParameter": BOOTSTRAP_VERSION_PARAMETER,
                },
            },
            "devNetwork.assets": {"type": "cdk:asset-manifest", "properties": {"requiresBootstrapStackVersion": 6}},
            "Tree": {"type": "cdk:tree", "properties": {"file": "tree.json"}},
        }
    }
    tmp_path.joinpath("manifest.json").write_text(json.dumps(manifest))
    return tmp_path


def _bootstrap(aws: Aws, version: str) -> None:
    aws.client("cloudformation").create_stack(StackName="CDKToolkit", TemplateBody=_TOOLKIT_TEMPLATE)
    aws.client("ssm").put_parameter(Name=BOOTSTRAP_VERSION_PARAMETER, Value=version, Type="String")


def test_account_matches(aws: Aws) -> None:
    [finding] = check_account(environment("dev"), aws)
    assert finding.level is Level.INFO and "123456789012" in finding.message


def test_account_of_other_credentials_is_an_error(aws: Aws) -> None:
    [finding] = check_account(environment("dev", account="111111111111"), aws)
    assert finding.level is Level.ERROR
    assert "for account 123456789012, but dev deploys to 111111111111" in finding.message
    assert "111111111111" in finding.fix


def test_region_enabled(aws: Aws) -> None:
    [finding] = check_region(environment("dev"), aws)
    assert finding.level is Level.INFO and "opt-in-not-required" in finding.message


def test_region_not_opted_in_is_an_error(aws: Aws) -> None:
    [finding] = check_region(environment("dev", region="ap-east-1"), aws)
    assert finding.level is Level.ERROR and "not-opted-in" in finding.message
    assert "enable-region --region-name ap-east-1" in finding.fix


def test_region_refused_by_ec2_is_an_error(aws: Aws) -> None:
    stub = Stubber(aws.client("ec2"))
    stub.add_client_error("describe_regions", "OptInRequired", "You are not subscribed to this service.")
    stub.activate()
    [finding] = check_region(environment("dev"), aws)
    assert finding.level is Level.ERROR and "(OptInRequired): the region is not enabled" in finding.message


def test_bootstrap_at_the_required_version(aws: Aws, tmp_path: Path) -> None:
    _bootstrap(aws, "21")
    [finding] = check_bootstrap(environment("dev"), aws, _assembly(tmp_path, 6))
    assert finding.level is Level.INFO and "version 21 (the templates require 6)" in finding.message


def test_bootstrap_below_the_required_version_is_an_error(aws: Aws, tmp_path: Path) -> None:
    _bootstrap(aws, "5")
    [finding] = check_bootstrap(environment("dev"), aws, _assembly(tmp_path, 6))
    assert finding.level is Level.ERROR and "version 5 is below the 6" in finding.message
    assert "cdk bootstrap aws://123456789012/us-east-1" in finding.fix


def test_no_bootstrap_stack_is_an_error(aws: Aws, tmp_path: Path) -> None:
    [finding] = check_bootstrap(environment("dev"), aws, _assembly(tmp_path, 6))
    assert finding.level is Level.ERROR and "not bootstrapped" in finding.message


def test_bootstrap_stack_without_its_version_parameter_is_an_error(aws: Aws, tmp_path: Path) -> None:
    aws.client("cloudformation").create_stack(StackName="CDKToolkit", TemplateBody=_TOOLKIT_TEMPLATE)
    [finding] = check_bootstrap(environment("dev"), aws, _assembly(tmp_path, 6))
    assert finding.level is Level.ERROR and BOOTSTRAP_VERSION_PARAMETER in finding.message


def test_bootstrap_without_an_assembly_asks_for_a_synth(aws: Aws, tmp_path: Path) -> None:
    _bootstrap(aws, "21")
    [finding] = check_bootstrap(environment("dev"), aws, tmp_path / "missing")
    assert finding.level is Level.WARNING and "make synth ENV=dev" in finding.fix

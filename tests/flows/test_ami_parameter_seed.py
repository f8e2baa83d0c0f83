"""The AMI parameter: seeded once by the Image stack, then owned by Image Builder's distribution.

The flow: the Image stack's custom resource runs its synthesized Create call (PutParameter,
Overwrite false) the way AwsCustomResource's handler does; Image Builder writes a golden AMI;
any later run of the resource (an update, a delete, even a second create) leaves that value.
The call runs against moto, and the provider's role policy and the permissions boundary are
evaluated for exactly the calls it makes.
"""

from __future__ import annotations

import json
import re
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from config.naming import ResourceNames
from tests.iam_documents import Resolver
from tests.policy_eval import Request, explain, role_may
from tests.role_policies import role
from tests.synth import StackTemplate, Synth

ENVS = ["dev", "staging", "prod"]
REGION = "us-east-1"


def _seed(stack: StackTemplate, parameter_name: str) -> tuple[str, dict[str, Any]]:
    found = [
        (k, r["Properties"])
        for k, r in stack.resources("Custom::AWS").items()
        if parameter_name in json.dumps(r["Properties"].get("Create", ""))
    ]
    assert len(found) == 1, f"{stack.name}: one custom resource seeds {parameter_name}"
    return found[0]


def _call(properties: dict[str, Any], request_type: str, resolver: Resolver, ami_id: str) -> dict[str, Any] | None:
    """The SDK call the handler makes for ``request_type``: the property's JSON, with the bootstrap AMI's
    CloudFormation parameter replaced by ``ami_id`` (its value at deploy time)."""
    raw = properties.get(request_type)
    if raw is None:
        return None
    parts = raw["Fn::Join"][1] if isinstance(raw, dict) else [raw]
    text = "".join(ami_id if isinstance(p, dict) and "Ref" in p else str(resolver.resolve(p)) for p in parts)
    return json.loads(text)


def _run(call: dict[str, Any] | None) -> None:
    """What AwsCustomResource's handler does with a call: invoke it; an error whose code matches
    ``ignoreErrorCodesMatching`` (a regular expression) is not a failure."""
    if call is None:
        return
    client = boto3.client(call["service"].lower(), region_name=REGION)
    operation = re.sub(r"(?<!^)(?=[A-Z])", "_", call["action"]).lower()
    try:
        getattr(client, operation)(**call["parameters"])
    except ClientError as error:
        pattern = call.get("ignoreErrorCodesMatching")
        if not pattern or not re.search(pattern, error.response["Error"]["Code"]):
            raise


@pytest.mark.parametrize("env", ENVS)
def test_seed_puts_once_and_never_overwrites_what_image_builder_wrote(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    name = ResourceNames.of(cfg).ami_parameter
    stack = synth.stack(env, "Image")
    # CloudFormation writes no value of the parameter: no AWS::SSM::Parameter of that name in any stack, so on a
    # fresh stack the seed's call below is the one that creates it (tests/update/test_upgrade_names.py: how the
    # released resource of that name left the template).
    owned = [
        k
        for s in synth.stacks.values()
        if s.env == env
        for k, r in s.resources("AWS::SSM::Parameter").items()
        if r["Properties"].get("Name") == name
    ]
    assert owned == []
    _, props = _seed(stack, name)
    resolver = Resolver(stack.json, account=cfg.account, region=cfg.region)
    (bootstrap_ref,) = [p for p in props["Create"]["Fn::Join"][1] if isinstance(p, dict)]
    bootstrap = stack.json["Parameters"][bootstrap_ref["Ref"]]
    assert bootstrap["Type"] == "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>"
    assert bootstrap["Default"] == cfg.image.bootstrap_ami_parameter

    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        bootstrap_ami, golden_ami = (
            ec2.register_image(Name=name, RootDeviceName="/dev/xvda")["ImageId"] for name in ("bootstrap", "golden")
        )
        create = _call(props, "Create", resolver, bootstrap_ami)
        assert create["parameters"]["Overwrite"] is False
        assert create["parameters"]["DataType"] == "aws:ec2:image"
        ssm = boto3.client("ssm", region_name=REGION)

        _run(create)  # first deploy: the parameter did not exist
        assert ssm.get_parameter(Name=name)["Parameter"]["Value"] == bootstrap_ami

        # A build's distribution overwrites it (Image Builder's SsmParameterConfiguration).
        ssm.put_parameter(Name=name, Value=golden_ami, Type="String", DataType="aws:ec2:image", Overwrite=True)
        version = ssm.get_parameter(Name=name)["Parameter"]["Version"]

        for request_type in ("Update", "Delete", "Create"):  # stack update, stack delete, a re-created stack
            _run(_call(props, request_type, resolver, bootstrap_ami))
            parameter = ssm.get_parameter(Name=name)["Parameter"]
            assert (parameter["Value"], parameter["Version"]) == (golden_ami, version), request_type

    assert "Update" not in props and "Delete" not in props
    assert props["Create"] and create["physicalResourceId"] == {"id": name}  # an update never replaces it


@pytest.mark.parametrize("env", ENVS)
def test_seed_provider_may_make_exactly_its_calls(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    names = ResourceNames.of(cfg)
    arn = f"arn:aws:ssm:{cfg.region}:{cfg.account}:parameter"
    provider = role(synth, env, "Image", "AWS679f53fac002430cb0da5b7982bd2287ServiceRole")
    allowed = [
        Request("ssm:PutParameter", f"{arn}{names.ami_parameter}"),
        # Parameter Store requires DescribeImages of whoever creates an aws:ec2:image parameter.
        Request("ec2:DescribeImages", "*"),
        Request("logs:CreateLogStream", f"arn:aws:logs:{cfg.region}:{cfg.account}:log-group:x:log-stream:y"),
        Request("logs:PutLogEvents", f"arn:aws:logs:{cfg.region}:{cfg.account}:log-group:x:log-stream:y"),
    ]
    for request in allowed:
        assert role_may(provider.identity, provider.boundary, request), explain(provider.identity, request)
    refused = [
        Request("ssm:PutParameter", f"{arn}/imagebuilder/gpu-platform/{env}/ami/other"),
        Request("ssm:PutParameter", f"{arn}{names.ssm_parameter_prefix}fsx/file-system-id"),
        Request("ssm:DeleteParameter", f"{arn}{names.ami_parameter}"),
    ]
    for request in refused:
        assert not role_may(provider.identity, provider.boundary, request), explain(provider.identity, request)


@pytest.mark.parametrize("env", ENVS)
def test_fleets_and_distribution_come_after_the_seed(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    stack = synth.stack(env, "Image")
    seed_id, _ = _seed(stack, ResourceNames.of(cfg).ami_parameter)
    assert "Image" in str(synth.stack(env, "Fleets").manifest.get("dependencies", []))
    for dist in stack.resources("AWS::ImageBuilder::DistributionConfiguration").values():
        assert seed_id in dist["DependsOn"]

"""Every role's grants against the permissions boundary, and every custom resource provider's calls.

A grant the boundary does not also allow is void: the role's call fails at deploy or run time
(a provider's Delete that cannot restore what its Create removed makes teardown fail). So for
every role of every stack, each statement of its identity policies is evaluated against the
boundary for each resource it names; and for every custom resource in the templates, the calls
its handler makes on Create, Update and Delete are evaluated against the provider role's policy
AND the boundary.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from config.naming import ResourceNames
from tests.iam_documents import Resolver
from tests.policy_eval import ALLOW, Request, decide, explain, role_may
from tests.role_policies import granted_requests as _requests
from tests.role_policies import roles
from tests.synth import StackTemplate, Synth

ENVS = ["dev", "staging", "prod"]

# The calls of CDK's default-security-group provider, read from its handler (aws-cdk
# packages/@aws-cdk/custom-resource-handlers/lib/aws-ec2/restrict-default-security-group-handler/index.ts,
# the code shipped in the synthesized asset): Create revokes the default rules, Delete authorizes
# them back, an Update that changes the group does both.
REVOKE = ["ec2:RevokeSecurityGroupEgress", "ec2:RevokeSecurityGroupIngress"]
AUTHORIZE = ["ec2:AuthorizeSecurityGroupIngress", "ec2:AuthorizeSecurityGroupEgress"]
RESTRICT_DEFAULT_SG = {"Create": REVOKE, "Update": AUTHORIZE + REVOKE, "Delete": AUTHORIZE}


@pytest.mark.parametrize("env", ENVS)
def test_every_role_statement_is_inside_the_boundary(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    checked = 0
    for role in roles(synth, env):
        for request, sid in _requests(role, cfg.account, cfg.region):
            checked += 1
            assert decide([role.boundary], request) == ALLOW, (
                f"{role.stack}/{role.logical_id} statement {sid}: the boundary voids "
                + explain([role.boundary], request)
            )
    assert checked > 50


@pytest.mark.parametrize("env", ENVS)
def test_boundary_keeps_data_keys_parameters_and_images_to_the_environment(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    names = ResourceNames.of(cfg)
    (boundary,) = {json.dumps(r.boundary, sort_keys=True) for r in roles(synth, env)}
    boundary_doc = json.loads(boundary)
    acct, region, other = cfg.account, cfg.region, "999999999999"
    other_env = next(e for e in ENVS if e != env)
    own, elsewhere = {"aws:ResourceAccount": acct}, {"aws:ResourceAccount": other}
    provider = next(r for r in roles(synth, env) if r.logical_id.startswith("CustomVpcRestrictDefaultSG"))
    inside = [
        Request("s3:GetObject", f"arn:aws:s3:::{names.data_bucket}/datasets/a", context=own),
        Request("s3:PutObject", f"arn:aws:s3:::{names.data_bucket}/checkpoints/a", context=own),
        Request("s3:ListBucket", f"arn:aws:s3:::{names.data_bucket}", context=own),
        Request("ecr:BatchGetImage", f"arn:aws:ecr:{region}:{acct}:repository/team/model"),
        Request("kms:Decrypt", f"arn:aws:kms:{region}:{acct}:key/k"),
        Request("ssm:PutParameter", f"arn:aws:ssm:{region}:{acct}:parameter{names.ami_parameter}"),
        Request("ec2:ModifyImageAttribute", f"arn:aws:ec2:{region}::image/ami-1"),
        Request(
            "ec2:AuthorizeSecurityGroupIngress",
            f"arn:aws:ec2:{region}:{acct}:security-group/sg-1",
            context=provider.as_caller,
        ),
    ]
    outside = [
        # same bucket name, another account's bucket (S3 ARNs carry no account)
        Request("s3:PutObject", f"arn:aws:s3:::{names.prefix}-exfil/a", context=elsewhere),
        Request("s3:GetObject", f"arn:aws:s3:::{names.data_bucket}/datasets/a", context=elsewhere),
        Request("s3:ListBucket", f"arn:aws:s3:::{names.data_bucket}", context=elsewhere),
        Request("ecr:BatchGetImage", f"arn:aws:ecr:{region}:{other}:repository/team/model"),
        Request("ecr:PutImage", f"arn:aws:ecr:{region}:{acct}:repository/team/model"),
        Request("s3:GetObject", f"arn:aws:s3:::{ResourceNames(other_env, acct, region).data_bucket}/datasets/a"),
        Request("s3:PutObject", "arn:aws:s3:::someone-elses-bucket/a"),
        Request("s3:PutObject", f"arn:aws:s3:::cdk-hnb659fds-assets-{acct}-{region}/a"),  # assets: read only
        Request("kms:Decrypt", f"arn:aws:kms:{region}:{other}:key/k"),
        Request("kms:CreateGrant", f"arn:aws:kms:{region}:{acct}:key/k"),
        Request("ssm:PutParameter", f"arn:aws:ssm:{region}:{acct}:parameter/gpu-platform/{env}/fsx/id"),
        Request("ssm:PutParameter", f"arn:aws:ssm:{region}:{acct}:parameter/imagebuilder/gpu-platform/{other_env}/a"),
        Request("ec2:ModifyImageAttribute", "arn:aws:ec2:eu-west-1::image/ami-1"),
        Request(
            "ec2:AuthorizeSecurityGroupIngress",
            f"arn:aws:ec2:{region}:{other}:security-group/sg-1",
            context=provider.as_caller,
        ),
    ]
    # Only the default-security-group provider may change rules: no other role of the environment
    # (the node role, the rollout role, the other providers) may open a group, even if its policy widened.
    others = [r for r in roles(synth, env) if (r.stack, r.logical_id) != (provider.stack, provider.logical_id)]
    assert any(r.logical_id.startswith("GpuNodeRole") for r in others)
    rollout = synth.stack(env, "Fleets").resources("AWS::IAM::Role")  # no rollout where no fleet refreshes (prod)
    assert any(r["Properties"].get("RoleName") == names.ami_rollout_role for r in rollout.values()) == any(
        r.arn.endswith(f":role/{names.ami_rollout_role}") for r in others
    )
    for caller in others:
        for action in AUTHORIZE:
            request = Request(action, f"arn:aws:ec2:{region}:{acct}:security-group/sg-1", context=caller.as_caller)
            assert decide([boundary_doc], request) != ALLOW, f"{caller.stack}/{caller.logical_id} may {action}"
    for request in inside:
        assert decide([boundary_doc], request) == ALLOW, explain([boundary_doc], request)
    for request in outside:
        assert decide([boundary_doc], request) != ALLOW, explain([boundary_doc], request)
    # another account's key only as EC2 uses it on the role's behalf (an AMI copy's source snapshots)
    through_ec2 = {"kms:ViaService": f"ec2.{region}.amazonaws.com"}
    grant = Request("kms:CreateGrant", f"arn:aws:kms:{region}:{other}:key/k", context=through_ec2)
    assert decide([boundary_doc], grant) == ALLOW


def _provider_role(stack: StackTemplate, properties: dict[str, Any]) -> str:
    token = properties["ServiceToken"]
    (function_id,) = token["Fn::GetAtt"][:1]
    function = stack.json["Resources"][function_id]
    return function["Properties"]["Role"]["Fn::GetAtt"][0]


def _calls(type_: str, properties: dict[str, Any], resolver: Resolver, account: str, region: str) -> dict:
    """Request type -> the requests its handler makes."""
    if type_ == "Custom::VpcRestrictDefaultSG":
        group = resolver.resolve(properties["DefaultSecurityGroupId"])
        arn = f"arn:aws:ec2:{region}:{account}:security-group/{group}"
        return {kind: [Request(a, arn) for a in actions] for kind, actions in RESTRICT_DEFAULT_SG.items()}
    if type_ == "Custom::AWS":
        calls = {}
        for kind in ("Create", "Update", "Delete"):
            raw = properties.get(kind)
            if raw is None:
                calls[kind] = []
                continue
            parts = raw["Fn::Join"][1] if isinstance(raw, dict) else [raw]
            call = json.loads("".join("ami-0" if isinstance(p, dict) else p for p in parts))
            service = call["service"].lower()
            if (service, call["action"]) == ("ec2", "DescribePrefixLists"):
                calls[kind] = [Request("ec2:DescribePrefixLists", "*")]
                continue
            assert (service, call["action"]) == ("ssm", "PutParameter"), f"add the calls of {call}"
            params = call["parameters"]
            requests = [Request("ssm:PutParameter", f"arn:aws:ssm:{region}:{account}:parameter{params['Name']}")]
            if params.get("DataType") == "aws:ec2:image":
                requests.append(Request("ec2:DescribeImages", "*"))  # Parameter Store checks the AMI as the caller
            calls[kind] = requests
        return calls
    raise AssertionError(f"{type_}: add the calls its handler makes to this test")


@pytest.mark.parametrize("env", ENVS)
def test_every_custom_resource_provider_may_make_its_calls(synth: Synth, env: str) -> None:
    """Teardown included: CDK's default-security-group provider authorizes the default rules back on Delete."""
    cfg = synth.environments[env]
    by_role = {(r.stack, r.logical_id): r for r in roles(synth, env)}
    seen = set()
    for stack in (s for s in synth.stacks.values() if s.env == env):
        resolver = Resolver(stack.json, account=cfg.account, region=cfg.region)
        for logical_id, resource in stack.json["Resources"].items():
            type_ = resource["Type"]
            if not (type_.startswith("Custom::") or type_ == "AWS::CloudFormation::CustomResource"):
                continue
            seen.add(type_)
            role = by_role[(stack.name, _provider_role(stack, resource["Properties"]))]
            logs = f"arn:aws:logs:{cfg.region}:{cfg.account}:log-group:/aws/lambda/x:log-stream:y"
            for kind, requests in _calls(type_, resource["Properties"], resolver, cfg.account, cfg.region).items():
                for call in [*requests, Request("logs:CreateLogStream", logs), Request("logs:PutLogEvents", logs)]:
                    request = Request(call.action, call.resource, context={**role.as_caller, **call.context})
                    assert role_may(role.identity, role.boundary, request), (
                        f"{stack.name}/{logical_id} {kind}: "
                        + explain(role.identity, request)
                        + " / boundary: "
                        + explain([role.boundary], request)
                    )
    assert {"Custom::VpcRestrictDefaultSG", "Custom::AWS"} <= seen

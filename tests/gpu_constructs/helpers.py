"""Construct tests: each construct on a bare stack, asserted with ``aws_cdk.assertions``.

No config file is read and no stage of the app is synthesized: a test builds the construct's typed
inputs itself (``fleet(...)``, ``ALARMS``) and synthesizes one small stack. Building a stack is cheap;
synthesizing is what costs, so a module builds each variant once (module-scoped fixtures) and its tests
read that one template. A stack that a test adds to is never shared.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from aws_cdk import Environment, RemovalPolicy, Stack, Stage
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Template

from config.alarms import Alarms
from config.fleets import Capacity, Fleet
from stacks.compliance import platform_app
from tests.iam_documents import Resolver, _strings
from tests.policy_eval import Request, decide
from tests.synth import cdk_json_context

ACCOUNT = "111111111111"
REGION = "us-east-1"
ENV = Environment(account=ACCOUNT, region=REGION)
ZONES = ("us-east-1a", "us-east-1b")
VPC_CIDR = "10.20.0.0/16"
#: The platform's defaults, as a config without an ``alarms:`` section gets them.
ALARMS = Alarms()

_ids: Iterator[int] = itertools.count()


#: cdk.json's feature flags (partition literals among them: acknowledgments name ARNs as literals).
CDK_CONTEXT = {k: v for k, v in cdk_json_context().items() if k.startswith("@aws-cdk")}


def bare_stack(*, stage: str | None = None) -> Stack:
    """A new stack in a new app with the project's feature flags (optionally inside a stage named
    ``stage``, for constructs that take the environment's name from their stage)."""
    app = platform_app(context=CDK_CONTEXT)
    scope = Stage(app, stage, env=ENV) if stage else app
    return Stack(scope, f"Test{next(_ids)}", env=ENV)


def template(stack: Stack) -> Template:
    return Template.from_stack(stack)


def vpc(stack: Stack, *, with_nat: bool = False) -> ec2.Vpc:
    """A plain two-zone VPC for constructs that only need one to live in."""
    subnets = [ec2.SubnetConfiguration(name="gpu", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=20)]
    return ec2.Vpc(
        stack,
        "Vpc",
        ip_addresses=ec2.IpAddresses.cidr(VPC_CIDR),
        availability_zones=list(ZONES),
        subnet_configuration=subnets,
        nat_gateways=0,
        restrict_default_security_group=False,
    )


def key(stack: Stack, construct_id: str = "Key") -> kms.Key:
    return kms.Key(stack, construct_id, enable_key_rotation=True)


RETENTION = logs.RetentionDays.ONE_MONTH
DESTROY = RemovalPolicy.DESTROY


def fleet(**overrides: Any) -> Fleet:
    """A valid fleet: two g5 types on Spot in two zones, sizes 0..4, unless overridden."""
    values: dict[str, Any] = {
        "name": "infer",
        "role": "inference",
        "instance_types": ["g5.xlarge", "g5.2xlarge"],
        "availability_zones": list(ZONES),
        "capacity": Capacity(min=0, max=4),
    }
    values.update(overrides)
    return Fleet(**values)


def resources(tmpl: Template, kind: str) -> dict[str, dict[str, Any]]:
    return tmpl.find_resources(kind)


def only(tmpl: Template, kind: str) -> tuple[str, dict[str, Any]]:
    """The one resource of ``kind`` (logical id, resource)."""
    found = tmpl.find_resources(kind)
    assert len(found) == 1, f"expected one {kind}, found {sorted(found)}"
    return next(iter(found.items()))


def resolved(tmpl: Template, value: Any) -> Any:
    """``value`` with Ref/GetAtt/Join resolved against the template (for the policy evaluator)."""
    return _strings(Resolver(tmpl.to_json(), account=ACCOUNT, region=REGION).resolve(value))


def arn_of(tmpl: Template, logical_id: str) -> str:
    return resolved(tmpl, {"Fn::GetAtt": [logical_id, "Arn"]})


def _peer(rule: dict[str, Any]) -> Any:
    for field in ("CidrIp", "DestinationPrefixListId", "SourcePrefixListId"):
        if field in rule:
            return rule[field]
    for field in ("SourceSecurityGroupId", "DestinationSecurityGroupId"):
        if field in rule:
            return rule[field]["Fn::GetAtt"][0] if "Fn::GetAtt" in rule[field] else rule[field]
    raise AssertionError(f"rule without a peer: {rule}")


def sg_rules(tmpl: Template, group_id: str, direction: str) -> set[tuple[Any, str, int, int]]:
    """Every ``direction`` ("Ingress" | "Egress") rule of the group ``group_id``, inline or separate, as
    (peer: CIDR, prefix list or the peer group's logical id, protocol, from port, to port); the
    no-traffic placeholder left out."""
    group = tmpl.find_resources("AWS::EC2::SecurityGroup")[group_id]
    rules = [r for r in group["Properties"].get(f"SecurityGroup{direction}", []) if r.get("FromPort") != 252]
    ref = {"Fn::GetAtt": [group_id, "GroupId"]}
    for rule in tmpl.find_resources(f"AWS::EC2::SecurityGroup{direction}").values():
        if rule["Properties"]["GroupId"] == ref:
            rules.append(rule["Properties"])
    return {(_peer(r), str(r["IpProtocol"]), r.get("FromPort", -1), r.get("ToPort", -1)) for r in rules}


def group_id(tmpl: Template, prefix: str) -> str:
    """Logical id of the one security group whose id starts with ``prefix``."""
    (found,) = [lid for lid in tmpl.find_resources("AWS::EC2::SecurityGroup") if lid.startswith(prefix)]
    return found


def document(tmpl: Template, logical_id: str, field: str = "PolicyDocument") -> dict[str, Any]:
    """A resource's policy document (``field``: PolicyDocument, KeyPolicy, AssumeRolePolicyDocument), resolved."""
    return resolved(tmpl, tmpl.to_json()["Resources"][logical_id]["Properties"][field])


def managed_policies(tmpl: Template) -> list[dict[str, Any]]:
    """Every managed and inline policy document of the template, resolved (a role's identity policies)."""
    return [
        document(tmpl, lid)
        for kind in ("AWS::IAM::ManagedPolicy", "AWS::IAM::Policy")
        for lid in tmpl.find_resources(kind)
    ]


def bounded_role(tmpl: Template, role_name: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The template's one role, named ``role_name``: (its identity policies, the permissions boundary it carries)."""
    role_id, role = only(tmpl, "AWS::IAM::Role")
    managed = resources(tmpl, "AWS::IAM::ManagedPolicy")
    (boundary_id,) = [k for k, p in managed.items() if p["Properties"].get("ManagedPolicyName")]
    assert role["Properties"]["PermissionsBoundary"] == {"Ref": boundary_id}
    assert role["Properties"]["RoleName"] == role_name
    identity = [document(tmpl, k) for k, p in managed.items() if p["Properties"].get("Roles") == [{"Ref": role_id}]]
    assert len(identity) == 1
    return identity, document(tmpl, boundary_id)


def trust_decision(tmpl: Template, caller: str) -> str:
    """What the trust policy of the template's one role decides for ``caller``'s sts:AssumeRole."""
    role_id, _ = only(tmpl, "AWS::IAM::Role")
    trust = document(tmpl, role_id, "AssumeRolePolicyDocument")
    request = Request("sts:AssumeRole", "*", {"AWS": caller}, context={"aws:PrincipalArn": caller})
    return decide([trust], request, resource_policy=True)

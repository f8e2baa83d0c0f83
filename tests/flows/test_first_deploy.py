"""The first deploy into a fresh account: no policy names a principal that does not exist yet, and the
Auto Scaling service-linked role (made by the first group launch, after the keys) can use the keys.

KMS refuses a key policy whose principals do not exist (CreateKey: "The principals in the key policy
must exist and be visible to KMS"); IAM and S3 refuse the same in trust and bucket policies. A fresh
account has no service-linked role until a service makes it, so a role may be named only where a
stack deployed earlier (or the same stack, through a reference) creates it; anything else is granted
through a condition on ``aws:PrincipalArn``.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.flows.assembly import Environment, Ref, autoscaling_role
from tests.policy_eval import Request, explain, key_policy_may
from tests.synth import Synth

ENVS = ["dev", "staging", "prod"]
#: Resource policies whose principals AWS checks when the policy is written.
POLICIES = {
    "AWS::KMS::Key": "KeyPolicy",
    "AWS::S3::BucketPolicy": "PolicyDocument",
    "AWS::SNS::TopicPolicy": "PolicyDocument",
    "AWS::IAM::Role": "AssumeRolePolicyDocument",
}
ACCOUNT_ROOT = re.compile(r"^(arn:aws:iam::\d{12}:root|\d{12})$")


def _aws_principals(statement: dict[str, Any]) -> list[Any]:
    principal = statement.get("Principal", {})
    if principal == "*" or not isinstance(principal, dict):
        return []
    values = principal.get("AWS", [])
    return values if isinstance(values, list) else [values]


def _unmade_principals(env: Environment) -> tuple[list[str], int]:
    """Principals named before anything creates them, in deploy order, and how many principals were checked."""
    deployed: list[str] = []
    problems, checked = [], 0
    for stack in env.deploy_order:
        for type_, prop in POLICIES.items():
            for logical_id, res in env.stacks[stack].resources(type_).items():
                for statement in res["Properties"][prop]["Statement"]:
                    for raw in _aws_principals(statement):
                        checked += 1
                        made = env.target(stack, raw)
                        if made is not None:  # a reference: the named resource is created first
                            assert made.stack in (*deployed, stack), f"{stack} references {made} deployed later"
                            continue
                        value = env.resolve(Ref(stack, logical_id), raw)
                        if value != "*" and not ACCOUNT_ROOT.match(value):
                            problems.append(f"{stack}/{logical_id} {statement.get('Sid', '')}: {value}")
        deployed.append(stack)
    return problems, checked


@pytest.mark.parametrize("env", ENVS)
def test_no_policy_names_a_principal_before_it_exists(synth: Synth, env: str) -> None:
    environment = Environment(synth, env)
    assert environment.deploy_order[0] == f"{env}-Security"
    problems, checked = _unmade_principals(environment)
    assert checked > 10, "the walk found the policies"
    assert problems == [], "principals a fresh account does not have when the policy is written"


def _launch_requests(account: str, region: str) -> list[Request]:
    """What EC2 asks KMS, as the Auto Scaling service-linked role, to launch a node with encrypted volumes
    (Auto Scaling user guide, "Required AWS KMS key policy for use with encrypted volumes")."""
    role = autoscaling_role(account)
    context = {"aws:PrincipalArn": role, "kms:CallerAccount": account, "kms:ViaService": f"ec2.{region}.amazonaws.com"}
    return [
        Request("kms:CreateGrant", "*", {"AWS": role}, {**context, "kms:GrantIsForAWSResource": True}),
        Request("kms:GenerateDataKeyWithoutPlaintext", "*", {"AWS": role}, context),
        Request("kms:Decrypt", "*", {"AWS": role}, context),
        Request("kms:ReEncryptFrom", "*", {"AWS": role}, context),
        Request("kms:DescribeKey", "*", {"AWS": role}, context),
    ]


def _refused_elsewhere(env: Environment, key_policy: dict[str, Any]) -> None:
    """The same calls are refused to the role of another account and to grants for non-AWS resources."""
    other = "999999999999"
    for request in _launch_requests(other, env.region):
        assert not key_policy_may(key_policy, request), explain([key_policy], request, resource_policy=True)
    grant = _launch_requests(env.account, env.region)[0]
    plain = Request(grant.action, "*", grant.principal, {**grant.context, "kms:GrantIsForAWSResource": False})
    assert not key_policy_may(key_policy, plain)


@pytest.mark.parametrize("env", ENVS)
def test_auto_scaling_launches_nodes_on_the_volume_key(synth: Synth, env: str) -> None:
    """Launch template -> its volumes' key (Security stack) -> that key's policy -> the service-linked role."""
    environment = Environment(synth, env)
    keys = set()
    for ref, template in environment.resources("AWS::EC2::LaunchTemplate"):
        for mapping in template["Properties"]["LaunchTemplateData"].get("BlockDeviceMappings", []):
            ebs = mapping.get("Ebs")
            if ebs is None:
                continue
            assert ebs["Encrypted"] is True, ref
            key = environment.target(ref.stack, ebs["KmsKeyId"])
            assert key is not None and key.stack == f"{env}-Security", (ref, ebs["KmsKeyId"])
            keys.add(key)
    assert len(keys) == 1, f"node volumes use one key: {keys}"
    (key,) = keys
    policy = environment.key_policy(key)
    for request in _launch_requests(environment.account, environment.region):
        assert key_policy_may(policy, request), explain([policy], request, resource_policy=True)
    _refused_elsewhere(environment, policy)


def test_auto_scaling_launches_from_the_golden_amis_key(synth: Synth) -> None:
    """Image recipe -> the key of its root volume (the AMI's snapshots) -> that key's policy -> the role."""
    environment = Environment(synth, "dev")
    ((ref, recipe),) = environment.resources("AWS::ImageBuilder::ImageRecipe")
    (mapping,) = [m for m in recipe["Properties"]["BlockDeviceMappings"] if "Ebs" in m]
    key = environment.target(ref.stack, mapping["Ebs"]["KmsKeyId"])
    assert key is not None and key.stack == "dev-Image"
    policy = environment.key_policy(key)
    for request in _launch_requests(environment.account, environment.region):
        assert key_policy_may(policy, request), explain([policy], request, resource_policy=True)
    _refused_elsewhere(environment, policy)

"""PlatformPermissionsBoundary: the ceiling of every role. Whatever a role's own policies grant, the boundary
lets through its environment's resources only, never IAM, key or bucket policies, and launches only through
launch templates; a role may pass only the named roles, each to its one service."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Template

from gpu_constructs.security.permissions_boundary import PassRoleGrant, PlatformPermissionsBoundary
from tests.gpu_constructs.helpers import ACCOUNT, REGION, bare_stack, document, only, template
from tests.policy_eval import Request, role_may

EVERYTHING = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
ROLLOUT_ROLE = f"arn:aws:iam::{ACCOUNT}:role/gpu-platform-dev-ami-rollout"
#: CDK's default-security-group provider restores the group's rules on delete (Authorize*): it alone may.
DEFAULT_SG_PROVIDER = f"arn:aws:iam::{ACCOUNT}:role/dev-Network-CustomVpcRestrictDefaultSG*"


@pytest.fixture(scope="module")
def tmpl() -> Template:
    # The boundary takes the environment's name from its stage, as in the app (one stage per environment).
    stack = bare_stack(stage="dev")
    PlatformPermissionsBoundary(
        stack,
        "Boundary",
        policy_name="gpu-platform-dev-boundary",
        pass_roles=[PassRoleGrant(sid="PassRolloutRoleToSsm", role_arns=[ROLLOUT_ROLE], service="ssm.amazonaws.com")],
        security_group_rule_roles=[DEFAULT_SG_PROVIDER],
    )
    return template(stack)


@pytest.fixture(scope="module")
def boundary(tmpl: Template) -> dict:
    logical_id, policy = only(tmpl, "AWS::IAM::ManagedPolicy")
    assert policy["Properties"]["ManagedPolicyName"] == "gpu-platform-dev-boundary"
    return document(tmpl, logical_id)


def _may(boundary: dict, action: str, resource: str, **context: object) -> bool:
    """What a role whose own policy allows everything may do under the boundary."""
    return role_may([EVERYTHING], boundary, Request(action, resource, context=context))


@pytest.mark.parametrize(
    ("action", "resource"),
    [
        ("iam:CreateRole", f"arn:aws:iam::{ACCOUNT}:role/x"),
        ("iam:PutRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/x"),
        ("iam:DeleteRolePermissionsBoundary", f"arn:aws:iam::{ACCOUNT}:role/x"),
        ("organizations:LeaveOrganization", "*"),
        ("cloudtrail:StopLogging", f"arn:aws:cloudtrail:{REGION}:{ACCOUNT}:trail/gpu-platform-dev-trail"),
        ("kms:PutKeyPolicy", f"arn:aws:kms:{REGION}:{ACCOUNT}:key/k"),
        ("kms:ScheduleKeyDeletion", f"arn:aws:kms:{REGION}:{ACCOUNT}:key/k"),
        ("s3:PutBucketPolicy", "arn:aws:s3:::gpu-platform-dev-data"),
        ("s3:DeleteBucket", "arn:aws:s3:::gpu-platform-dev-data"),
        ("s3:GetObject", "arn:aws:s3:::gpu-platform-prod-data/datasets/a"),  # another environment's bucket
        ("kms:Decrypt", f"arn:aws:kms:{REGION}:222222222222:key/k"),  # another account's key, not through EC2
        ("ec2:RunInstances", f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/*"),  # not from a launch template
        ("iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/admin"),
    ],
)
def test_denies_what_no_platform_role_may_do(boundary: dict, action: str, resource: str) -> None:
    assert not _may(boundary, action, resource)


def test_allows_this_environments_work(boundary: dict) -> None:
    checkpoint = "arn:aws:s3:::gpu-platform-dev-data/checkpoints/a"
    assert _may(boundary, "s3:PutObject", checkpoint, **{"aws:ResourceAccount": ACCOUNT})
    # Bucket names are global: a bucket of the same name in another account is not the environment's.
    assert not _may(boundary, "s3:PutObject", checkpoint, **{"aws:ResourceAccount": "222222222222"})
    assert _may(boundary, "cloudwatch:PutMetricData", "*")
    assert _may(
        boundary,
        "ssm:PutParameter",
        f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/imagebuilder/gpu-platform/dev/ami/latest",
    )
    assert not _may(
        boundary,
        "ssm:PutParameter",
        f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/imagebuilder/gpu-platform/prod/ami/latest",
    )


def test_launches_only_through_this_accounts_launch_templates(boundary: dict) -> None:
    template_arn = f"arn:aws:ec2:{REGION}:{ACCOUNT}:launch-template/lt-0123"
    run = "ec2:RunInstances"
    assert _may(boundary, run, "*", **{"ec2:LaunchTemplate": template_arn, "ec2:IsLaunchTemplateResource": True})
    foreign = template_arn.replace(ACCOUNT, "222222222222")
    assert not _may(boundary, run, "*", **{"ec2:LaunchTemplate": foreign, "ec2:IsLaunchTemplateResource": True})
    instance = f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-1"
    assert _may(boundary, "ec2:CreateTags", instance, **{"ec2:CreateAction": "RunInstances"})
    assert not _may(boundary, "ec2:CreateTags", instance, **{"ec2:CreateAction": "CreateTags"})


def test_passes_the_named_role_to_its_service_only(boundary: dict) -> None:
    assert _may(boundary, "iam:PassRole", ROLLOUT_ROLE, **{"iam:PassedToService": "ssm.amazonaws.com"})
    assert not _may(boundary, "iam:PassRole", ROLLOUT_ROLE, **{"iam:PassedToService": "ec2.amazonaws.com"})

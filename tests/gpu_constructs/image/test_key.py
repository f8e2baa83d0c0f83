"""ImageKey: rotates, is retained; Auto Scaling launches from the AMI; in a receiving account only its copy role
may decrypt the snapshots for the copy."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Template

from gpu_constructs.image.key import ImageKey
from tests.gpu_constructs.helpers import ACCOUNT, bare_stack, document, only, template
from tests.policy_eval import Request, key_policy_may

RECEIVER = "222222222222"
COPY_ROLE = "EC2ImageBuilderDistributionCrossAccountRole"


@pytest.fixture(scope="module")
def tmpl() -> Template:
    stack = bare_stack()
    ImageKey(stack, "Ami", alias="alias/gpu-platform/dev/ami", description="AMI snapshots",
             copy_accounts=[RECEIVER], copy_role_name=COPY_ROLE)  # fmt: skip
    return template(stack)


def test_key_rotates_and_outlives_the_stack(tmpl: Template) -> None:
    _, k = only(tmpl, "AWS::KMS::Key")
    assert k["Properties"]["EnableKeyRotation"] is True and k["DeletionPolicy"] == "Retain"


def _decrypt(role_arn: str) -> Request:
    return Request(
        "kms:Decrypt",
        "*",
        {"AWS": role_arn},
        {"aws:PrincipalArn": role_arn, "kms:CallerAccount": role_arn.split(":")[4]},
    )


def test_only_the_copy_role_of_the_receiving_account_decrypts(tmpl: Template) -> None:
    policy = document(tmpl, only(tmpl, "AWS::KMS::Key")[0], "KeyPolicy")
    copy_role = f"arn:aws:iam::{RECEIVER}:role/{COPY_ROLE}"
    # The statement names the receiving account: its IAM then lets the copy role use the key.
    allow_all = [{"Statement": [{"Effect": "Allow", "Action": "kms:*", "Resource": "*"}]}]
    assert key_policy_may(policy, _decrypt(copy_role), identity=allow_all)
    assert not key_policy_may(policy, _decrypt(f"arn:aws:iam::{RECEIVER}:role/admin"), identity=allow_all)
    assert not key_policy_may(policy, _decrypt(f"arn:aws:iam::444444444444:role/{COPY_ROLE}"), identity=allow_all)
    autoscaling = f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling"
    assert key_policy_may(policy, _decrypt(autoscaling))

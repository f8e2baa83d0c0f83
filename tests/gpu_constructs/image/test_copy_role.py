"""ImageCopyRole: only the building account's Image Builder assumes it; it copies AMIs and writes the one
parameter, nothing else."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Template

from config.sharing import DISTRIBUTION_ROLE_NAME
from gpu_constructs.image.copy_role import IMAGE_BUILDER_SERVICE_ROLE, ImageCopyRole
from tests.gpu_constructs.helpers import ACCOUNT, REGION, bare_stack, document, managed_policies, only, template
from tests.policy_eval import Request, decide, role_may

SOURCE = "999999999999"
PARAMETER = "/imagebuilder/gpu-platform/staging/ami/latest"


@pytest.fixture(scope="module")
def tmpl() -> Template:
    stack = bare_stack()
    ImageCopyRole(stack, "Copy", source_account=SOURCE, source_region=REGION, parameter_name=PARAMETER)
    return template(stack)


def test_only_the_source_accounts_image_builder_assumes_it(tmpl: Template) -> None:
    role_id, role = only(tmpl, "AWS::IAM::Role")
    assert role["Properties"]["RoleName"] == DISTRIBUTION_ROLE_NAME
    trust = document(tmpl, role_id, "AssumeRolePolicyDocument")

    def assume(principal_arn: str) -> str:
        return decide([trust], Request("sts:AssumeRole", "*", {"AWS": f"arn:aws:iam::{SOURCE}:root"},
                                       {"aws:PrincipalArn": principal_arn}), resource_policy=True)  # fmt: skip

    assert assume(f"arn:aws:iam::{SOURCE}:role/{IMAGE_BUILDER_SERVICE_ROLE}") == "Allow"
    assert assume(f"arn:aws:iam::{SOURCE}:role/admin") != "Allow"


def test_it_copies_amis_and_writes_its_parameter_only(tmpl: Template) -> None:
    policies = managed_policies(tmpl)
    assert role_may(policies, None, Request("ec2:CopyImage", f"arn:aws:ec2:{REGION}::image/ami-1"))
    parameter = f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter{PARAMETER}"
    assert role_may(policies, None, Request("ssm:PutParameter", parameter))
    assert not role_may(policies, None, Request("ssm:PutParameter", parameter.replace("staging", "prod")))
    assert role_may(policies, None, Request("kms:Decrypt", f"arn:aws:kms:{REGION}:{SOURCE}:key/k"))
    assert not role_may(policies, None, Request("kms:Decrypt", f"arn:aws:kms:{REGION}:{ACCOUNT}:key/k"))
    assert not role_may(policies, None, Request("ec2:DeregisterImage", f"arn:aws:ec2:{REGION}::image/ami-1"))

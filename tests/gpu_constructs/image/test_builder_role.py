"""ImageBuilderInstanceRole: a build instance fetches only the recipe's components and writes logs only under
its prefix, through S3 for the key."""

from __future__ import annotations

from gpu_constructs.image.builder_role import BuildAccess, ImageBuilderInstanceRole
from gpu_constructs.image.component import ImageComponent
from tests.gpu_constructs.helpers import ACCOUNT, REGION, bare_stack, managed_policies, template
from tests.policy_eval import Request, role_may

LOG_KEY = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/logs"


def test_build_instance_reaches_its_components_and_log_prefix_only() -> None:
    stack = bare_stack()
    driver = ImageComponent(stack, "Driver", name="gpu-driver", description="d", document="phases: []\n")
    ImageBuilderInstanceRole(stack, "Build", access=BuildAccess(
        components=[driver], log_bucket_arn="arn:aws:s3:::image-logs", log_prefix="image-builder", log_key_arn=LOG_KEY,
        log_group_arn=f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/imagebuilder/gpu-golden:*"))  # fmt: skip
    policies = managed_policies(template(stack))
    component = f"arn:aws:imagebuilder:{REGION}:{ACCOUNT}:component/"
    assert role_may(policies, None, Request("imagebuilder:GetComponent", f"{component}gpu-driver/1.0.5/1"))
    assert not role_may(policies, None, Request("imagebuilder:GetComponent", f"{component}someone-else/1.0.0/1"))
    assert role_may(policies, None, Request("s3:PutObject", "arn:aws:s3:::image-logs/image-builder/build/log"))
    assert not role_may(policies, None, Request("s3:PutObject", "arn:aws:s3:::image-logs/other/log"))
    via_s3 = {"kms:ViaService": f"s3.{REGION}.amazonaws.com"}
    assert role_may(policies, None, Request("kms:GenerateDataKey", LOG_KEY, context=via_s3))
    assert not role_may(policies, None, Request("kms:GenerateDataKey", LOG_KEY))
    assert not role_may(policies, None, Request("ssm:PutInventory", "*"))

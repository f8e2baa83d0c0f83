"""ImageInfrastructure: builders require IMDSv2, are terminated on failure and log to the bucket's prefix."""

from __future__ import annotations

from aws_cdk import aws_iam as iam

from gpu_constructs.image.infrastructure import ImageInfrastructure
from tests.gpu_constructs.helpers import bare_stack, only, template


def test_builders_are_imdsv2_only_terminated_on_failure_and_logged() -> None:
    stack = bare_stack()
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    ImageInfrastructure(stack, "Infra", name="gpu-golden", description="d", instance_types=["g5.12xlarge"],
                        instance_profile=iam.InstanceProfile(stack, "Profile", role=role), subnet_id="subnet-1",
                        security_group_ids=["sg-1"], log_bucket_name="logs", log_prefix="image-builder",
                        resource_tags={"Project": "gpu-platform"})  # fmt: skip
    props = only(template(stack), "AWS::ImageBuilder::InfrastructureConfiguration")[1]["Properties"]
    assert props["InstanceMetadataOptions"] == {"HttpTokens": "required", "HttpPutResponseHopLimit": 1}
    assert props["TerminateInstanceOnFailure"] is True and "KeyPair" not in props
    assert props["Logging"] == {"S3Logs": {"S3BucketName": "logs", "S3KeyPrefix": "image-builder"}}
    assert (props["SubnetId"], props["SecurityGroupIds"], props["InstanceTypes"]) == (
        "subnet-1",
        ["sg-1"],
        ["g5.12xlarge"],
    )

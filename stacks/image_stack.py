"""ImageStack: the golden AMI's parameter (and, as it grows, its build pipeline)."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from config import Environment
from config.naming import ResourceNames
from stacks.base import PlatformStack


class ImageStack(PlatformStack):
    """Attributes: ``ami_parameter`` (``/gpu-platform/<env>/ami/latest``, data type ``aws:ec2:image``)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        env: Environment,
        vpc: ec2.IVpc,
        builder_subnets: ec2.SubnetSelection,
        builder_security_group: ec2.ISecurityGroup,
        logs_key: kms.IKey,
        data_key: kms.IKey,
        access_log_bucket: s3.IBucket,
    ) -> None:
        super().__init__(
            scope, construct_id, env=env, stateful=False, description=f"GPU platform {env.name}: golden AMI"
        )
        names = ResourceNames.of(env)
        # The first deploy needs an AMI before any golden image exists: the parameter starts
        # with the public Deep Learning AMI (resolved by CloudFormation at deploy time);
        # the image pipeline's distribution overwrites it with each new build.
        self.ami_parameter = ssm.StringParameter(
            self,
            "AmiParameter",
            parameter_name=names.ami_parameter,
            string_value=f"{{{{resolve:ssm:{env.image.bootstrap_ami_parameter}}}}}",
            data_type=ssm.ParameterDataType.AWS_EC2_IMAGE,
            description=f"GPU platform {env.name}: AMI id of GPU nodes (golden AMI; bootstrap: Deep Learning AMI)",
        )

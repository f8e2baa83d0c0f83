"""Where Image Builder runs a build: instance type, network, profile, metadata options, logs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import aws_iam as iam
from aws_cdk import aws_imagebuilder as imagebuilder
from constructs import Construct


class ImageInfrastructure(Construct):
    """An ``AWS::ImageBuilder::InfrastructureConfiguration``.

    Build and test instances launch in ``subnet_id`` with ``security_group_ids``, require
    IMDSv2 (one hop: nothing on the builder runs in a container), are terminated when a
    build fails (no GPU instance left running for a post-mortem: the logs are in S3 and
    CloudWatch), carry ``resource_tags`` and have no key pair. AWSTOE uploads its logs to
    ``s3://<log_bucket_name>/<log_prefix>/``.

    Attributes:
        configuration: the L1 resource; arn.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        description: str,
        instance_types: Sequence[str],
        instance_profile: iam.IInstanceProfile,
        subnet_id: str,
        security_group_ids: Sequence[str],
        log_bucket_name: str,
        log_prefix: str,
        resource_tags: Mapping[str, str],
    ) -> None:
        super().__init__(scope, construct_id)
        self.configuration = imagebuilder.CfnInfrastructureConfiguration(
            self,
            "Configuration",
            name=name,
            description=description,
            instance_types=list(instance_types),
            instance_profile_name=instance_profile.instance_profile_name,
            subnet_id=subnet_id,
            security_group_ids=list(security_group_ids),
            terminate_instance_on_failure=True,
            instance_metadata_options=imagebuilder.CfnInfrastructureConfiguration.InstanceMetadataOptionsProperty(
                http_tokens="required", http_put_response_hop_limit=1
            ),
            logging=imagebuilder.CfnInfrastructureConfiguration.LoggingProperty(
                s3_logs=imagebuilder.CfnInfrastructureConfiguration.S3LogsProperty(
                    s3_bucket_name=log_bucket_name, s3_key_prefix=log_prefix
                )
            ),
            resource_tags=dict(resource_tags),
        )
        self.arn = self.configuration.attr_arn

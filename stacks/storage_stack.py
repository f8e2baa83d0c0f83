"""StorageStack: the data bucket and FSx for Lustre linked to it."""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from config import Environment
from config.naming import ResourceNames
from gpu_constructs.network.platform_vpc import GPU_SUBNET_GROUP
from gpu_constructs.storage.hardened_bucket import HardenedBucket
from gpu_constructs.storage.lustre_storage import Link, LustreSettings, LustreStorage
from stacks.base import PlatformStack


class StorageStack(PlatformStack):
    """Attributes: ``data_bucket``, ``lustre`` (file system, security group, associations)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        env: Environment,
        vpc: ec2.IVpc,
        node_security_group: ec2.ISecurityGroup,
        data_key: kms.IKey,
        access_log_bucket: s3.IBucket,
    ) -> None:
        super().__init__(scope, construct_id, env=env, stateful=True, description=f"GPU platform {env.name}: storage")
        names = ResourceNames.of(env)
        self.data_bucket = self._data_bucket(names, data_key, access_log_bucket)
        self.lustre = self._lustre(env, vpc, node_security_group, data_key)
        self._publish_file_system(names, env)
        self._outputs(env)

    def _data_bucket(self, names: ResourceNames, data_key: kms.IKey, access_log_bucket: s3.IBucket) -> s3.Bucket:
        """Datasets and checkpoints: old versions and abandoned uploads expire."""
        # Data is never destroyed with the stack where stateful resources are protected;
        # elsewhere the bucket must be emptied by hand before it can go (no auto-delete).
        return HardenedBucket(
            self,
            "Data",
            bucket_name=names.data_bucket,
            encryption_key=data_key,
            access_log_bucket=access_log_bucket,
            access_log_prefix="data-bucket/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="old-versions-and-uploads",
                    noncurrent_version_expiration=Duration.days(30),
                    abort_incomplete_multipart_upload_after=Duration.days(7),
                )
            ],
            removal_policy=self.removal_policy,
        ).bucket

    def _lustre(
        self, env: Environment, vpc: ec2.IVpc, node_security_group: ec2.ISecurityGroup, data_key: kms.IKey
    ) -> LustreStorage:
        """The configured file system in the GPU subnet of its zone, linked to the data bucket."""
        storage = env.storage
        fs = storage.file_system
        subnet = vpc.select_subnets(
            subnet_group_name=GPU_SUBNET_GROUP, availability_zones=[fs.availability_zone]
        ).subnets[0]
        return LustreStorage(
            self,
            "Lustre",
            vpc=vpc,
            subnet=subnet,
            client_security_group=node_security_group,
            settings=LustreSettings(
                deployment_type=fs.deployment_type.value,
                storage_capacity_gib=fs.storage_capacity_gib,
                per_unit_storage_throughput=fs.per_unit_storage_throughput,
                data_compression=fs.data_compression,
                lustre_version=fs.lustre_version,
                automatic_backup_retention_days=fs.automatic_backup_retention_days,
            ),
            key=data_key,
            bucket=self.data_bucket,
            links=[
                Link(a.file_system_path, a.bucket_prefix, a.import_events, a.export_events)
                for a in storage.associations
            ],
            removal_policy=RemovalPolicy.RETAIN if env.protect_stateful_resources else RemovalPolicy.DESTROY,
        )

    def _publish_file_system(self, names: ResourceNames, env: Environment) -> None:
        """Nodes and operators find the file system by name, without a stack reference."""
        for key, value in {
            "fsx/id": self.lustre.file_system.file_system_id,
            "fsx/dns-name": self.lustre.file_system.dns_name,
            "fsx/mount-name": self.lustre.file_system.mount_name,
        }.items():
            ssm.StringParameter(
                self,
                "Param" + key.replace("/", "-").title().replace("-", ""),
                parameter_name=f"{names.ssm_parameter_prefix}{key}",
                string_value=value,
                description=f"GPU platform {env.name}: FSx for Lustre {key.split('/')[1]}",
            )

    def _outputs(self, env: Environment) -> None:
        """For people (stack outputs in the console, `aws cloudformation describe-stacks`)."""
        for output_id, value, description in (
            ("DataBucketName", self.data_bucket.bucket_name, "datasets and checkpoints bucket"),
            ("LustreDnsName", self.lustre.file_system.dns_name, "FSx for Lustre DNS name"),
            ("LustreMountName", self.lustre.file_system.mount_name, "FSx for Lustre mount name"),
        ):
            CfnOutput(self, output_id, value=value, description=f"GPU platform {env.name}: {description}")

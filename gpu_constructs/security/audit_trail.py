"""CloudTrail: a multi-region, validated, KMS-encrypted trail to S3 and CloudWatch Logs."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_cloudtrail as cloudtrail
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from gpu_constructs.compliance.acknowledge import acknowledge
from gpu_constructs.storage.hardened_bucket import HardenedBucket


class AuditTrail(Construct):
    """The environment's trail, its dedicated bucket and its log group.

    Management events (read and write) of every region; S3 data events for the
    buckets passed to ``log_data_events_of`` (the platform's data bucket).

    Attributes:
        trail, bucket, log_group.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        trail_name: str,
        trail_key: kms.IKey,
        logs_key: kms.IKey,
        access_log_bucket: s3.IBucket,
        lifecycle_rules: list[s3.LifecycleRule],
        object_lock_retention: s3.ObjectLockRetention | None,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        self.bucket = HardenedBucket(
            self,
            "Bucket",
            encryption_key=trail_key,
            access_log_bucket=access_log_bucket,
            access_log_prefix="cloudtrail-bucket/",
            lifecycle_rules=lifecycle_rules,
            object_lock_retention=object_lock_retention,
            removal_policy=removal_policy,
        ).bucket
        self.log_group = logs.LogGroup(
            self, "LogGroup", encryption_key=logs_key, retention=log_retention, removal_policy=removal_policy
        )
        self.trail = cloudtrail.Trail(
            self,
            "Trail",
            trail_name=trail_name,
            bucket=self.bucket,
            encryption_key=trail_key,
            is_multi_region_trail=True,
            include_global_service_events=True,
            enable_file_validation=True,
            management_events=cloudtrail.ReadWriteType.ALL,
            send_to_cloud_watch_logs=True,
            cloud_watch_log_group=self.log_group,
        )
        acknowledge(
            self.trail.node.find_child("LogsRole").node.find_child("DefaultPolicy"),
            "NIST.800.53.R5-IAMNoInlinePolicy",
            "CDK's Trail gives its CloudWatch Logs delivery role one inline statement, CreateLogStream and "
            "PutLogEvents on this trail's log group only; it lives and dies with the role.",
        )

    def log_data_events_of(self, bucket_arn: str) -> None:
        """Record S3 object-level reads and writes of the bucket (by ARN, so no stack depends on another)."""
        self.trail.add_event_selector(
            cloudtrail.DataResourceType.S3_OBJECT,
            [f"{bucket_arn}/"],
            read_write_type=cloudtrail.ReadWriteType.ALL,
            include_management_events=False,  # the trail-wide selector already records them
        )

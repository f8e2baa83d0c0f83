"""S3 buckets hardened the same way everywhere in the platform."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from gpu_constructs.compliance.acknowledge import acknowledge
from gpu_constructs.compliance.cfn_child import cfn_child


def log_lifecycle(*, transition_days: int, expiration_days: int) -> list[s3.LifecycleRule]:
    """Move logs to Glacier Instant Retrieval, then expire them (and their old versions)."""
    return [
        s3.LifecycleRule(
            id="log-retention",
            transitions=[
                s3.Transition(
                    storage_class=s3.StorageClass.GLACIER_INSTANT_RETRIEVAL,
                    transition_after=Duration.days(transition_days),
                )
            ],
            expiration=Duration.days(expiration_days),
            noncurrent_version_expiration=Duration.days(30),
            abort_incomplete_multipart_upload_after=Duration.days(7),
        )
    ]


class AccessLogBucket(Construct):
    """The target of every other bucket's server access logs, and of the load balancers' access logs.

    S3 server access logging delivers only to buckets encrypted with SSE-S3
    (a default SSE-KMS key on the target makes delivery fail), and so do ALB access logs,
    so this is the one bucket without a customer key. Each writer is admitted by its own
    statement, under its own prefix (``ServiceLoadBalancer`` adds the load balancers'). It does not log its own access (a bucket
    logging into itself loops).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        lifecycle_rules: Sequence[s3.LifecycleRule],
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=list(lifecycle_rules),
            removal_policy=removal_policy,
        )
        acknowledge(
            self.bucket,
            "AwsSolutions-S1",
            "This is the server access log bucket itself; logging its own access would log each log delivery again.",
        )
        acknowledge(
            self.bucket,
            "NIST.800.53.R5-S3BucketLoggingEnabled",
            "This is the server access log bucket itself; logging its own access would log each log delivery again.",
        )
        acknowledge(
            self.bucket,
            "NIST.800.53.R5-S3DefaultEncryptionKMS",
            "S3 server access logs can only be delivered to a bucket encrypted with SSE-S3, not SSE-KMS.",
        )
        acknowledge(
            self.bucket,
            "NIST.800.53.R5-S3BucketReplicationEnabled",
            "Access logs are kept versioned in this region for audit; cross-region replication is not required for them.",
        )


class HardenedBucket(Construct):
    """Private, TLS-only, SSE-KMS, versioned bucket that logs its access.

    The access log bucket admits this bucket's log deliveries only (``aws:SourceArn`` and
    ``aws:SourceAccount``, as the S3 user guide recommends). CDK adds those conditions only when
    both buckets are in one stack; for an access log bucket of another stack this construct sets
    the logging configuration itself and grants the delivery by this bucket's name, which must
    therefore be given (its ARN by reference would make the log bucket's stack depend on this one).

    Attributes:
        bucket: the bucket.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        encryption_key: kms.IKey,
        access_log_bucket: s3.IBucket,
        access_log_prefix: str,
        lifecycle_rules: Sequence[s3.LifecycleRule] = (),
        removal_policy: RemovalPolicy,
        bucket_name: str | None = None,
        object_lock_retention: s3.ObjectLockRetention | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        same_stack = Stack.of(access_log_bucket) is stack
        if not same_stack and bucket_name is None:
            raise ValueError(f"{self.node.path}: a bucket logging to another stack's access log bucket needs a name")
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            bucket_name=bucket_name,
            encryption=s3.BucketEncryption.KMS,
            encryption_key=encryption_key,
            bucket_key_enabled=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=access_log_bucket if same_stack else None,
            server_access_logs_prefix=access_log_prefix if same_stack else None,
            lifecycle_rules=list(lifecycle_rules) or None,
            object_lock_enabled=True if object_lock_retention else None,
            object_lock_default_retention=object_lock_retention,
            removal_policy=removal_policy,
        )
        if not same_stack:
            cfn = cfn_child(self.bucket, s3.CfnBucket)
            cfn.logging_configuration = s3.CfnBucket.LoggingConfigurationProperty(
                destination_bucket_name=access_log_bucket.bucket_name, log_file_prefix=access_log_prefix
            )
            access_log_bucket.add_to_resource_policy(
                iam.PolicyStatement(
                    principals=[iam.ServicePrincipal("logging.s3.amazonaws.com")],
                    actions=["s3:PutObject"],
                    resources=[access_log_bucket.arn_for_objects(f"{access_log_prefix}*")],
                    conditions={
                        "ArnLike": {"aws:SourceArn": f"arn:{stack.partition}:s3:::{bucket_name}"},
                        "StringEquals": {"aws:SourceAccount": stack.account},
                    },
                )
            )
        acknowledge(
            self.bucket,
            "NIST.800.53.R5-S3BucketReplicationEnabled",
            "Versioning protects against overwrite and deletion in this region; the platform does not ask for a "
            "second-region copy of this bucket.",
        )

"""The pipeline's artifact bucket, hardened like every other bucket of the platform.

CDK Pipelines creates the bucket and its cross-account KMS key itself
(``cross_account_keys=True``): the key policy is what lets the environments'
deploy roles read the artifacts, so the bucket stays CDK's and this construct
adds what it lacks (versioning, server access logs, no ACLs, TLS 1.2, lifecycle)
through its CloudFormation properties.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from gpu_constructs.compliance.acknowledge import acknowledge
from gpu_constructs.compliance.cfn_child import cfn_child
from gpu_constructs.storage.hardened_bucket import AccessLogBucket, log_lifecycle

#: Server access log prefix of the artifact bucket in the access log bucket.
ARTIFACT_LOG_PREFIX = "pipeline-artifacts/"
#: Artifacts of an execution are needed while it can be retried; older ones are dead weight.
ARTIFACT_EXPIRATION_DAYS = 90
NONCURRENT_EXPIRATION_DAYS = 30


class PipelineArtifacts(Construct):
    """Hardens ``bucket`` (the pipeline's artifact bucket) and gives it an access log bucket.

    Attributes:
        access_log_bucket: the bucket that receives the artifact bucket's server access logs.
    """

    def __init__(self, scope: Construct, construct_id: str, *, bucket: s3.IBucket) -> None:
        super().__init__(scope, construct_id)
        self.access_log_bucket = AccessLogBucket(
            self,
            "AccessLogs",
            lifecycle_rules=log_lifecycle(transition_days=90, expiration_days=365),
            removal_policy=RemovalPolicy.RETAIN,
        ).bucket
        cfn = cfn_child(bucket, s3.CfnBucket)
        cfn.versioning_configuration = s3.CfnBucket.VersioningConfigurationProperty(status="Enabled")
        cfn.ownership_controls = s3.CfnBucket.OwnershipControlsProperty(
            rules=[s3.CfnBucket.OwnershipControlsRuleProperty(object_ownership="BucketOwnerEnforced")]
        )
        cfn.logging_configuration = s3.CfnBucket.LoggingConfigurationProperty(
            destination_bucket_name=self.access_log_bucket.bucket_name, log_file_prefix=ARTIFACT_LOG_PREFIX
        )
        cfn.lifecycle_configuration = s3.CfnBucket.LifecycleConfigurationProperty(
            rules=[
                s3.CfnBucket.RuleProperty(
                    id="artifact-retention",
                    status="Enabled",
                    expiration_in_days=ARTIFACT_EXPIRATION_DAYS,
                    noncurrent_version_expiration=s3.CfnBucket.NoncurrentVersionExpirationProperty(
                        noncurrent_days=NONCURRENT_EXPIRATION_DAYS
                    ),
                    abort_incomplete_multipart_upload=s3.CfnBucket.AbortIncompleteMultipartUploadProperty(
                        days_after_initiation=7
                    ),
                )
            ]
        )
        bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="DenyOutdatedTLS",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["s3:*"],
                resources=[bucket.bucket_arn, bucket.arn_for_objects("*")],
                conditions={"NumericLessThan": {"s3:TlsVersion": 1.2}},
            )
        )
        # What the L2 bucket adds for server_access_logs_bucket, done by hand for the L1 property.
        self.access_log_bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="S3ServerAccessLogsFromArtifactBucket",
                principals=[iam.ServicePrincipal("logging.s3.amazonaws.com")],
                actions=["s3:PutObject"],
                resources=[self.access_log_bucket.arn_for_objects(f"{ARTIFACT_LOG_PREFIX}*")],
                conditions={
                    "ArnLike": {"aws:SourceArn": bucket.bucket_arn},
                    "StringEquals": {"aws:SourceAccount": Stack.of(self).account},
                },
            )
        )
        acknowledge(
            bucket,
            "NIST.800.53.R5-S3BucketReplicationEnabled",
            "Pipeline artifacts are rebuilt from the repository by any new execution; a second-region copy "
            "of them protects nothing that the repository does not already hold.",
        )

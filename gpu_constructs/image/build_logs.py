"""Where the image builds log: a hardened bucket for AWSTOE's logs, and the log groups of the image and the
pipeline (the names Image Builder writes to, created here with the logs key and the retention)."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from gpu_constructs.storage.hardened_bucket import HardenedBucket, log_lifecycle

#: Prefix of AWSTOE's build logs in the bucket.
BUILD_LOG_PREFIX = "image-builder"


def image_log_group_name(image_name: str) -> str:
    """The log group of an image's builds: one stream per image version/build (Image Builder's default name)."""
    return f"/aws/imagebuilder/{image_name}"


def pipeline_log_group_name(image_name: str) -> str:
    """The log group of the pipeline's runs (its pipeline is named like its image)."""
    return f"/aws/imagebuilder/pipeline/{image_name}"


@dataclass(frozen=True)
class BuildLogs:
    """``bucket`` (its ``bucket_arn`` is the concrete name's, for the build role's statement), ``image_logs``
    (``/aws/imagebuilder/<image>``), ``pipeline_logs`` (``/aws/imagebuilder/pipeline/<image>``)."""

    bucket: s3.IBucket
    bucket_arn: str
    image_logs: logs.LogGroup
    pipeline_logs: logs.LogGroup


def build_logs(
    scope: Construct,
    *,
    image_name: str,
    bucket_name: str,
    logs_key: kms.IKey,
    access_log_bucket: s3.IBucket,
    transition_days: int,
    expiration_days: int,
    retention: logs.RetentionDays,
    removal_policy: RemovalPolicy,
) -> BuildLogs:
    """The bucket (``BuildLogs``) and the two log groups (``ImageLogs``, ``PipelineLogs``), created directly in
    ``scope`` so their logical ids are the stack's own. Not the access log bucket: that one is SSE-S3 only
    because S3 server access logging demands it."""
    bucket = HardenedBucket(
        scope,
        "BuildLogs",
        bucket_name=bucket_name,
        encryption_key=logs_key,
        access_log_bucket=access_log_bucket,
        access_log_prefix="image-logs-bucket/",
        lifecycle_rules=log_lifecycle(transition_days=transition_days, expiration_days=expiration_days),
        removal_policy=removal_policy,
    ).bucket
    image_logs, pipeline_logs = (
        logs.LogGroup(
            scope,
            construct,
            log_group_name=log_group_name,
            encryption_key=logs_key,
            retention=retention,
            removal_policy=removal_policy,
        )
        for construct, log_group_name in (
            ("ImageLogs", image_log_group_name(image_name)),
            ("PipelineLogs", pipeline_log_group_name(image_name)),
        )
    )
    return BuildLogs(
        bucket=bucket,
        bucket_arn=f"arn:{Stack.of(scope).partition}:s3:::{bucket_name}",
        image_logs=image_logs,
        pipeline_logs=pipeline_logs,
    )

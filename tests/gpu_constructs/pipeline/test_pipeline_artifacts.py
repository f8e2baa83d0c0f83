"""PipelineArtifacts: the artifact bucket is versioned, access logged, expires old artifacts and refuses
outdated TLS; its access log bucket admits the artifact bucket's deliveries only."""

from __future__ import annotations

from aws_cdk.assertions import Template

from gpu_constructs.pipeline.pipeline_artifacts import ARTIFACT_EXPIRATION_DAYS, ARTIFACT_LOG_PREFIX
from tests.gpu_constructs.helpers import ACCOUNT, document
from tests.policy_eval import Request, service_may


def _buckets(tmpl: Template) -> tuple[str, dict, str, dict]:
    buckets = tmpl.find_resources("AWS::S3::Bucket")
    (artifacts,) = [lid for lid in buckets if "ArtifactsBucket" in lid and "AccessLogs" not in lid]
    (logs,) = [lid for lid in buckets if "AccessLogs" in lid]
    return artifacts, buckets[artifacts]["Properties"], logs, buckets[logs]["Properties"]


def _policy_of(tmpl: Template, bucket_id: str) -> dict:
    (lid,) = [
        lid
        for lid, p in tmpl.find_resources("AWS::S3::BucketPolicy").items()
        if p["Properties"]["Bucket"] == {"Ref": bucket_id}
    ]
    return document(tmpl, lid)


def test_artifact_bucket_is_versioned_logged_and_expires(pipeline_template: Template) -> None:
    artifacts_id, artifacts, logs_id, _ = _buckets(pipeline_template)
    assert artifacts["VersioningConfiguration"] == {"Status": "Enabled"}
    assert artifacts["LoggingConfiguration"] == {
        "DestinationBucketName": {"Ref": logs_id},
        "LogFilePrefix": ARTIFACT_LOG_PREFIX,
    }
    (rule,) = artifacts["LifecycleConfiguration"]["Rules"]
    assert rule["ExpirationInDays"] == ARTIFACT_EXPIRATION_DAYS
    policy = _policy_of(pipeline_template, artifacts_id)
    anyone = {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}
    old = Request("s3:GetObject", f"arn:aws:s3:::{artifacts_id.lower()}/a", anyone,
                  {"s3:TlsVersion": 1.1, "aws:SecureTransport": True})  # fmt: skip
    assert not service_may(policy, old)


def test_access_log_bucket_admits_the_artifact_buckets_logs_only(pipeline_template: Template) -> None:
    artifacts_id, _, logs_id, _ = _buckets(pipeline_template)
    policy = _policy_of(pipeline_template, logs_id)

    def deliver(source: str) -> Request:
        context = {"aws:SourceArn": source, "aws:SourceAccount": ACCOUNT, "aws:SecureTransport": True}
        target = f"arn:aws:s3:::{logs_id.lower()}/{ARTIFACT_LOG_PREFIX}x"
        return Request("s3:PutObject", target, {"Service": "logging.s3.amazonaws.com"}, context)

    assert service_may(policy, deliver(f"arn:aws:s3:::{artifacts_id.lower()}"))
    assert not service_may(policy, deliver("arn:aws:s3:::another-bucket"))

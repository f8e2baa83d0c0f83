"""build_logs: a hardened bucket (SSE-KMS with the logs key, access logged) and the two log groups Image Builder
writes to, encrypted and with the retention."""

from __future__ import annotations

from aws_cdk import aws_s3 as s3

from gpu_constructs.image.build_logs import build_logs
from tests.gpu_constructs.helpers import DESTROY, RETENTION, bare_stack, key, template


def test_build_logs_land_encrypted_where_image_builder_writes() -> None:
    stack = bare_stack()
    logs = build_logs(stack, image_name="gpu-golden", bucket_name="gpu-platform-dev-image-logs", logs_key=key(stack),
                      access_log_bucket=s3.Bucket(stack, "AccessLogs"), transition_days=30, expiration_days=365,
                      retention=RETENTION, removal_policy=DESTROY)  # fmt: skip
    assert logs.bucket_arn == "arn:aws:s3:::gpu-platform-dev-image-logs"
    tmpl = template(stack)
    groups = {
        g["Properties"]["LogGroupName"]: g["Properties"] for g in tmpl.find_resources("AWS::Logs::LogGroup").values()
    }
    assert set(groups) == {"/aws/imagebuilder/gpu-golden", "/aws/imagebuilder/pipeline/gpu-golden"}
    assert all(g["KmsKeyId"]["Fn::GetAtt"][0].startswith("Key") and g["RetentionInDays"] == 30 for g in groups.values())
    (bucket,) = [
        b.get("Properties")
        for b in tmpl.find_resources("AWS::S3::Bucket").values()
        if b.get("Properties", {}).get("BucketName")
    ]
    (rule,) = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    assert bucket["LoggingConfiguration"]["LogFilePrefix"] == "image-logs-bucket/"
    assert bucket["LifecycleConfiguration"]["Rules"][0]["ExpirationInDays"] == 365

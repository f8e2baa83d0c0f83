"""AuditTrail: a multi-region, validated, encrypted trail into a hardened bucket and a log group; data events
of a bucket by ARN."""

from __future__ import annotations

import pytest
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Match, Template

from gpu_constructs.security.audit_trail import AuditTrail
from tests.gpu_constructs.helpers import DESTROY, RETENTION, bare_stack, key, only, template

DATA_BUCKET = "arn:aws:s3:::gpu-platform-dev-data"


@pytest.fixture(scope="module")
def tmpl() -> Template:
    stack = bare_stack()
    access_logs = s3.Bucket(stack, "AccessLogs")
    trail = AuditTrail(
        stack,
        "Audit",
        trail_name="gpu-platform-dev-trail",
        trail_key=key(stack, "TrailKey"),
        logs_key=key(stack, "LogsKey"),
        access_log_bucket=access_logs,
        lifecycle_rules=[],
        object_lock_retention=None,
        log_retention=RETENTION,
        removal_policy=DESTROY,
    )
    trail.log_data_events_of(DATA_BUCKET)
    return template(stack)


def test_trail_records_every_region_validated_and_encrypted(tmpl: Template) -> None:
    _, trail = only(tmpl, "AWS::CloudTrail::Trail")
    props = trail["Properties"]
    assert props["IsMultiRegionTrail"] and props["IncludeGlobalServiceEvents"] and props["EnableLogFileValidation"]
    assert props["KMSKeyId"]["Fn::GetAtt"][0].startswith("TrailKey")
    assert props["CloudWatchLogsLogGroupArn"]["Fn::GetAtt"][0].startswith("AuditLogGroup")
    selectors = props["EventSelectors"]
    assert {"DataResources": [{"Type": "AWS::S3::Object", "Values": [f"{DATA_BUCKET}/"]}],
            "IncludeManagementEvents": False, "ReadWriteType": "All"} in selectors  # fmt: skip


def test_trail_bucket_is_hardened_and_logs_its_access(tmpl: Template) -> None:
    tmpl.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "LoggingConfiguration": {"LogFilePrefix": "cloudtrail-bucket/", "DestinationBucketName": Match.any_value()},
            "VersioningConfiguration": {"Status": "Enabled"},
            "BucketEncryption": Match.object_like({}),
        },
    )
    tmpl.has_resource_properties(
        "AWS::Logs::LogGroup",
        {"RetentionInDays": 30, "KmsKeyId": {"Fn::GetAtt": [Match.string_like_regexp("LogsKey"), "Arn"]}},
    )

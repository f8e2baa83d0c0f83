"""HardenedBucket and AccessLogBucket: no plain-HTTP request is allowed, data is encrypted with the given key,
and the access log bucket admits log deliveries from the hardened bucket only."""

from __future__ import annotations

import pytest
from aws_cdk import Stack
from aws_cdk.assertions import Match, Template

from gpu_constructs.storage.hardened_bucket import AccessLogBucket, HardenedBucket, log_lifecycle
from tests.gpu_constructs.helpers import ACCOUNT, DESTROY, ENV, bare_stack, document, key, template
from tests.policy_eval import Request, service_may

NAME = "gpu-platform-dev-data"


def _policies(tmpl: Template) -> dict[str, dict]:
    return {
        p["Properties"]["Bucket"]["Ref"]: document(tmpl, lid)
        for lid, p in tmpl.find_resources("AWS::S3::BucketPolicy").items()
    }


@pytest.fixture(scope="module")
def same_stack() -> Template:
    stack = bare_stack()
    logs = AccessLogBucket(stack, "Logs", lifecycle_rules=log_lifecycle(transition_days=30, expiration_days=365),
                           removal_policy=DESTROY).bucket  # fmt: skip
    HardenedBucket(stack, "Data", encryption_key=key(stack), access_log_bucket=logs, access_log_prefix="data/",
                   removal_policy=DESTROY)  # fmt: skip
    return template(stack)


def _bucket_id(tmpl: Template, prefix: str) -> str:
    (found,) = [lid for lid in tmpl.find_resources("AWS::S3::Bucket") if lid.startswith(prefix)]
    return found


def test_every_bucket_denies_plain_http_and_old_tls(same_stack: Template) -> None:
    for bucket_id, policy in _policies(same_stack).items():
        arn = f"arn:aws:s3:::{bucket_id.lower()}/x"
        anyone = {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}
        insecure = Request("s3:GetObject", arn, anyone, {"aws:SecureTransport": False, "s3:TlsVersion": 1.3})
        old_tls = Request("s3:GetObject", arn, anyone, {"aws:SecureTransport": True, "s3:TlsVersion": 1.1})
        assert not service_may(policy, insecure), bucket_id
        assert not service_may(policy, old_tls), bucket_id


def test_data_is_encrypted_with_the_key_and_versioned(same_stack: Template) -> None:
    data = same_stack.find_resources("AWS::S3::Bucket")[_bucket_id(same_stack, "Data")]["Properties"]
    (rule,) = data["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    assert rule["ServerSideEncryptionByDefault"]["KMSMasterKeyID"]["Fn::GetAtt"][0].startswith("Key")
    assert data["VersioningConfiguration"] == {"Status": "Enabled"}
    assert all(data["PublicAccessBlockConfiguration"].values())
    assert data["OwnershipControls"]["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    # The log bucket is SSE-S3: access logs cannot be delivered to an SSE-KMS bucket.
    logs = same_stack.find_resources("AWS::S3::Bucket")[_bucket_id(same_stack, "Logs")]["Properties"]
    (log_rule,) = logs["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert log_rule["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}


def test_cross_stack_log_bucket_admits_deliveries_of_this_bucket_only() -> None:
    stack = bare_stack()
    log_stack = Stack(stack.node.scope, "LogStack", env=ENV)
    logs = AccessLogBucket(log_stack, "Logs", lifecycle_rules=[], removal_policy=DESTROY).bucket
    HardenedBucket(stack, "Data", encryption_key=key(stack), access_log_bucket=logs, access_log_prefix="data/",
                   removal_policy=DESTROY, bucket_name=NAME)  # fmt: skip
    template(stack).has_resource_properties(
        "AWS::S3::Bucket", {"BucketName": NAME, "LoggingConfiguration": Match.object_like({"LogFilePrefix": "data/"})}
    )
    log_tmpl = template(log_stack)
    (policy,) = _policies(log_tmpl).values()
    log_arn = f"arn:aws:s3:::{_bucket_id(log_tmpl, 'Logs').lower()}/data/2026-01-01"

    def deliver(source: str, account: str = ACCOUNT) -> Request:
        context = {"aws:SourceArn": source, "aws:SourceAccount": account, "aws:SecureTransport": True}
        return Request("s3:PutObject", log_arn, {"Service": "logging.s3.amazonaws.com"}, context)

    assert service_may(policy, deliver(f"arn:aws:s3:::{NAME}"))
    assert not service_may(policy, deliver("arn:aws:s3:::someone-else"))
    assert not service_may(policy, deliver(f"arn:aws:s3:::{NAME}", "222222222222"))


def test_cross_stack_without_a_name_is_refused() -> None:
    stack = bare_stack()
    logs = AccessLogBucket(
        Stack(stack.node.scope, "Other", env=ENV), "Logs", lifecycle_rules=[], removal_policy=DESTROY
    )
    with pytest.raises(ValueError, match="needs a name"):
        HardenedBucket(stack, "Data", encryption_key=key(stack), access_log_bucket=logs.bucket,
                       access_log_prefix="data/", removal_policy=DESTROY)  # fmt: skip

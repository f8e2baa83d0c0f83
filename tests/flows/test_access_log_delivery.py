"""Server access logs: each bucket's log deliveries reach the access log bucket, and only they do.

source bucket -> its ``LoggingConfiguration`` (in whichever stack) -> the access log bucket (Security)
-> that bucket's policy -> ``logging.s3.amazonaws.com`` with ``aws:SourceArn`` (the source bucket)
and ``aws:SourceAccount`` (its account), as the S3 user guide's recommended policy holds them.
"""

from __future__ import annotations

import pytest

from tests.flows.assembly import Environment
from tests.policy_eval import Request, explain, service_may
from tests.synth import Synth

ENVS = ["dev", "staging", "prod"]
LOGGING = {"Service": "logging.s3.amazonaws.com"}


def _delivery(target_arn: str, prefix: str, source_arn: str, account: str) -> Request:
    context = {
        "aws:SourceArn": source_arn,
        "aws:SourceAccount": account,
        "aws:SecureTransport": True,
        "s3:TlsVersion": 1.2,
    }
    return Request("s3:PutObject", f"{target_arn}/{prefix}2026-01-01-00-00-00-0123456789ABCDEF", LOGGING, context)


@pytest.mark.parametrize("env", ENVS)
def test_each_buckets_log_delivery_is_admitted_and_no_one_elses(synth: Synth, env: str) -> None:
    environment = Environment(synth, env)
    followed = 0
    for ref, bucket in environment.resources("AWS::S3::Bucket"):
        logging = bucket["Properties"].get("LoggingConfiguration")
        if logging is None:
            continue
        target = environment.target(ref.stack, logging["DestinationBucketName"])
        assert target is not None and target.stack == f"{env}-Security", (ref, logging)
        policy = environment.policy_of("AWS::S3::BucketPolicy", "Bucket", target)
        target_arn = environment.resolver(target.stack)._arn(target.logical_id)
        source_arn = environment.resolver(ref.stack)._arn(ref.logical_id)
        prefix = logging["LogFilePrefix"]
        own = _delivery(target_arn, prefix, source_arn, environment.account)
        assert service_may(policy, own), explain([policy], own, resource_policy=True)
        for stranger in (
            _delivery(target_arn, prefix, source_arn.replace(environment.account, "999999999999"), "999999999999"),
            _delivery(target_arn, prefix, "arn:aws:s3:::someone-elses-bucket", environment.account),
            _delivery(target_arn, prefix, source_arn, "999999999999"),
        ):
            assert not service_may(policy, stranger), explain([policy], stranger, resource_policy=True)
        followed += 1
    assert followed >= 2, "the trail bucket and the data bucket log their access"

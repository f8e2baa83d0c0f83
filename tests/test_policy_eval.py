"""The evaluator the flow tests rely on, checked against cases whose answer AWS documents."""

from __future__ import annotations

from tests.policy_eval import (
    ALLOW,
    EXPLICIT_DENY,
    IMPLICIT_DENY,
    Request,
    decide,
    key_policy_may,
    role_may,
    same_account_may,
    service_may,
)

ACCOUNT = "111111111111"
TOPIC = f"arn:aws:sns:us-east-1:{ACCOUNT}:alerts"


def _allow(**statement):
    return {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", **statement}]}


def test_action_and_resource_wildcards_are_case_rules_of_iam():
    doc = _allow(Action="s3:Get*", Resource="arn:aws:s3:::bucket/data/*")
    assert decide([doc], Request("S3:GetObject", "arn:aws:s3:::bucket/data/x")) == ALLOW
    assert decide([doc], Request("s3:GetObject", "arn:aws:s3:::bucket/Data/x")) == IMPLICIT_DENY
    assert decide([doc], Request("s3:PutObject", "arn:aws:s3:::bucket/data/x")) == IMPLICIT_DENY


def test_an_explicit_deny_wins_over_an_allow():
    doc = {
        "Statement": [
            {"Effect": "Allow", "Action": "*", "Resource": "*"},
            {
                "Effect": "Deny",
                "Action": "s3:*",
                "Resource": "*",
                "Condition": {"Bool": {"aws:SecureTransport": False}},
            },
        ]
    }
    assert decide([doc], Request("s3:GetObject", "arn:aws:s3:::b/k", context={"aws:SecureTransport": False})) == (
        EXPLICIT_DENY
    )
    assert decide([doc], Request("s3:GetObject", "arn:aws:s3:::b/k", context={"aws:SecureTransport": True})) == ALLOW


def test_resource_policy_needs_the_principal():
    doc = _allow(
        Principal={"Service": "events.amazonaws.com"},
        Action="sns:Publish",
        Resource=TOPIC,
        Condition={"StringEquals": {"aws:SourceAccount": ACCOUNT}},
    )
    events = Request("sns:Publish", TOPIC, {"Service": "events.amazonaws.com"}, {"aws:SourceAccount": ACCOUNT})
    alarms = Request("sns:Publish", TOPIC, {"Service": "cloudwatch.amazonaws.com"}, {"aws:SourceAccount": ACCOUNT})
    assert service_may(doc, events)
    assert not service_may(doc, alarms)
    other_account = Request("sns:Publish", TOPIC, {"Service": "events.amazonaws.com"}, {"aws:SourceAccount": "2" * 12})
    assert not service_may(doc, other_account)


def test_account_root_principal_covers_the_accounts_roles():
    doc = _allow(Principal={"AWS": f"arn:aws:iam::{ACCOUNT}:root"}, Action="kms:*", Resource="*")
    assert service_may(doc, Request("kms:Decrypt", "k", {"AWS": f"arn:aws:iam::{ACCOUNT}:role/x"}))
    assert not service_may(doc, Request("kms:Decrypt", "k", {"AWS": "arn:aws:iam::222222222222:role/x"}))


def test_missing_condition_keys_fail_positive_operators_and_pass_if_exists_and_negated_ones():
    request = Request("ec2:RunInstances", "*")
    assert decide(
        [_allow(Action="*", Resource="*", Condition={"StringEquals": {"aws:ResourceTag/env": "dev"}})], request
    ) == (IMPLICIT_DENY)
    assert (
        decide(
            [_allow(Action="*", Resource="*", Condition={"StringEqualsIfExists": {"aws:ResourceTag/env": "dev"}})],
            request,
        )
        == ALLOW
    )
    assert (
        decide(
            [_allow(Action="*", Resource="*", Condition={"StringNotEquals": {"aws:ResourceTag/env": "dev"}})], request
        )
        == ALLOW
    )


def test_arn_like_and_set_operators():
    doc = _allow(
        Action="kms:Decrypt",
        Resource="*",
        Condition={
            "ArnLike": {"aws:PrincipalArn": f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/*"},
            "ForAnyValue:StringEquals": {"kms:EncryptionContextKeys": ["a", "b"]},
        },
    )
    ok = Request(
        "kms:Decrypt",
        "k",
        context={
            "aws:PrincipalArn": f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/autoscaling.amazonaws.com/x",
            "kms:EncryptionContextKeys": ["b", "c"],
        },
    )
    assert decide([doc], ok) == ALLOW
    wrong = Request("kms:Decrypt", "k", context={"aws:PrincipalArn": f"arn:aws:iam::{ACCOUNT}:role/app"})
    assert decide([doc], wrong) == IMPLICIT_DENY


def test_a_boundary_limits_what_the_identity_policy_allows():
    identity = [_allow(Action="ec2:*", Resource="*")]
    boundary = _allow(Action=["ec2:Revoke*", "ec2:Describe*"], Resource="*")
    assert role_may(identity, boundary, Request("ec2:RevokeSecurityGroupIngress", "sg"))
    assert not role_may(identity, boundary, Request("ec2:AuthorizeSecurityGroupIngress", "sg"))
    assert not role_may([], boundary, Request("ec2:DescribeVpcs", "*"))


def test_numeric_less_than_is_strict():
    deny_old_tls = {
        "Statement": [
            {"Effect": "Allow", "Principal": "*", "Action": "s3:PutObject", "Resource": "*"},
            {
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": "*",
                "Condition": {"NumericLessThan": {"s3:TlsVersion": 1.2}},
            },
        ]
    }
    put = lambda tls: Request("s3:PutObject", "arn:aws:s3:::b/k", {"Service": "x"}, {"s3:TlsVersion": tls})  # noqa: E731
    assert service_may(deny_old_tls, put(1.2))
    assert not service_may(deny_old_tls, put(1.1))


ROLE = f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling"
KEY_POLICY = {
    "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}, "Action": "kms:*", "Resource": "*"},
        {
            "Effect": "Allow",
            "Principal": {"AWS": "*"},
            "Action": "kms:Decrypt",
            "Resource": "*",
            "Condition": {"ArnEquals": {"aws:PrincipalArn": ROLE}, "StringEquals": {"kms:CallerAccount": ACCOUNT}},
        },
    ]
}


def test_a_key_policys_account_statement_only_delegates_to_iam():
    """KMS key policy semantics: the account's root principal lets IAM policies decide; it allows nothing alone."""
    other = f"arn:aws:iam::{ACCOUNT}:role/app"
    generate = Request("kms:GenerateDataKey", "*", {"AWS": other}, {"aws:PrincipalArn": other})
    assert not key_policy_may(KEY_POLICY, generate)
    assert key_policy_may(KEY_POLICY, generate, identity=[_allow(Action="kms:GenerateDataKey", Resource="*")])
    context = {"aws:PrincipalArn": ROLE, "kms:CallerAccount": ACCOUNT}
    assert key_policy_may(KEY_POLICY, Request("kms:Decrypt", "*", {"AWS": ROLE}, context))
    assert not key_policy_may(KEY_POLICY, Request("kms:Encrypt", "*", {"AWS": ROLE}, context))
    foreign = {"aws:PrincipalArn": ROLE.replace(ACCOUNT, "2" * 12), "kms:CallerAccount": "2" * 12}
    assert not key_policy_may(KEY_POLICY, Request("kms:Decrypt", "*", {"AWS": foreign["aws:PrincipalArn"]}, foreign))


def test_same_account_callers_need_the_identity_or_the_resource_policy_and_no_deny():
    topic_policy = {
        "Statement": [
            {
                "Effect": "Deny",
                "Principal": "*",
                "Action": "sns:Publish",
                "Resource": TOPIC,
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            }
        ]
    }
    identity = [_allow(Action="sns:Publish", Resource="*")]
    tls = Request("sns:Publish", TOPIC, {"AWS": ROLE}, {"aws:SecureTransport": True})
    assert same_account_may(topic_policy, identity, tls)
    assert not same_account_may(topic_policy, [], tls)
    plain = Request("sns:Publish", TOPIC, {"AWS": ROLE}, {"aws:SecureTransport": False})
    assert not same_account_may(topic_policy, identity, plain)

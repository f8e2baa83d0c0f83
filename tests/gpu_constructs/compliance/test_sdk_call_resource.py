"""sdk_call_resource: the provider logs to an encrypted group with the retention, its role may make only the
given calls, a wildcard needs its reason, and two calls of a stack share one provider."""

from __future__ import annotations

import pytest
from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import custom_resources as cr
from aws_cdk.assertions import Template

from gpu_constructs.compliance.sdk_call_resource import sdk_call_resource
from tests.gpu_constructs.helpers import RETENTION, bare_stack, key, template


def _call(stack: Stack, construct_id: str, *, resource: str, wildcard_reason: str = "") -> cr.AwsCustomResource:
    call = cr.AwsSdkCall(service="SSM", action="GetParameter", parameters={"Name": "/p"},
                         physical_resource_id=cr.PhysicalResourceId.of(construct_id))  # fmt: skip
    return sdk_call_resource(
        stack,
        construct_id,
        purpose="read one parameter",
        on_create=call,
        statements=[iam.PolicyStatement(actions=["ssm:GetParameter"], resources=[resource])],
        logs_key=stack.node.try_find_child("Key") or key(stack),
        log_retention=RETENTION,
        wildcard_reason=wildcard_reason,
    )


@pytest.fixture(scope="module")
def tmpl() -> Template:
    stack = bare_stack()
    _call(stack, "First", resource="arn:aws:ssm:us-east-1:111111111111:parameter/p")
    _call(stack, "Second", resource="*", wildcard_reason="GetParameter of a name only known at deploy time.")
    return template(stack)


def test_two_calls_share_one_provider_with_encrypted_retained_logs(tmpl: Template) -> None:
    tmpl.resource_count_is("AWS::Lambda::Function", 1)
    tmpl.resource_count_is("Custom::AWS", 2)
    groups = tmpl.find_resources("AWS::Logs::LogGroup")
    assert len(groups) == 2
    for group in groups.values():
        assert group["Properties"]["RetentionInDays"] == 30
        assert group["Properties"]["KmsKeyId"]["Fn::GetAtt"][0].startswith("Key")


def test_each_call_grants_only_its_own_statements(tmpl: Template) -> None:
    granted = sorted(
        (s["Action"], s["Resource"])
        for p in tmpl.find_resources("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    )
    assert granted == [
        ("ssm:GetParameter", "*"),
        ("ssm:GetParameter", "arn:aws:ssm:us-east-1:111111111111:parameter/p"),
    ]


def test_a_wildcard_without_its_reason_is_refused() -> None:
    with pytest.raises(ValueError, match="needs a real reason"):
        _call(bare_stack(), "Loose", resource="*")

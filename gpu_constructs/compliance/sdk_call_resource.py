"""An AWS SDK call CloudFormation makes through CDK's AwsCustomResource, held to the platform's rules.

The provider's log group is encrypted with the logs key and keeps the environment's retention;
its role carries the permissions boundary (applied stage-wide) and only ``statements``; the
rule-pack findings on CDK's provider are acknowledged here, once, with what the call does.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from gpu_constructs.compliance.acknowledge import acknowledge

#: Construct id of AwsCustomResource's singleton provider function in its stack.
PROVIDER_ID = "AWS679f53fac002430cb0da5b7982bd2287"
#: Marks a provider whose findings are acknowledged (it is shared by the stack's calls).
_ACKNOWLEDGED = "PlatformAcknowledged"


def sdk_call_resource(
    scope: Construct,
    construct_id: str,
    *,
    purpose: str,
    on_create: cr.AwsSdkCall,
    on_update: cr.AwsSdkCall | None = None,
    statements: Sequence[iam.PolicyStatement],
    logs_key: kms.IKey,
    log_retention: logs.RetentionDays,
    log_removal_policy: RemovalPolicy = RemovalPolicy.DESTROY,
    wildcard_reason: str = "",
) -> cr.AwsCustomResource:
    """``purpose`` says what the call is for (it goes into the acknowledgments); ``wildcard_reason``
    is required where a statement names ``*`` (an action without resource types)."""
    resource = cr.AwsCustomResource(
        scope,
        construct_id,
        on_create=on_create,
        on_update=on_update,
        policy=cr.AwsCustomResourcePolicy.from_statements(list(statements)),
        install_latest_aws_sdk=False,  # the Lambda runtime's SDK has the call; no download at deploy
        log_group=logs.LogGroup(
            scope,
            f"{construct_id}Logs",
            encryption_key=logs_key,
            retention=log_retention,
            removal_policy=log_removal_policy,
        ),
    )
    _acknowledge_call_policy(resource, statements, purpose=purpose, wildcard_reason=wildcard_reason)
    _acknowledge_provider(Stack.of(scope))
    return resource


def _acknowledge_call_policy(
    resource: cr.AwsCustomResource,
    statements: Sequence[iam.PolicyStatement],
    *,
    purpose: str,
    wildcard_reason: str,
) -> None:
    """The findings on the call's own policy: a ``*`` resource (with ``wildcard_reason``), an inline policy."""
    policy = resource.node.find_child("CustomResourcePolicy")
    if any("*" in s.resources for s in statements):
        acknowledge(policy, "AwsSolutions-IAM5[Resource::*]", wildcard_reason)
    acknowledge(
        policy,
        "NIST.800.53.R5-IAMNoInlinePolicy",
        f"AwsCustomResource attaches its call's permissions to its provider's role as this policy: {purpose}.",
    )


def _acknowledge_provider(stack: Stack) -> None:
    """The findings on the stack's provider function and its role, once: the stack's calls share them."""
    provider = stack.node.find_child(PROVIDER_ID)
    if not isinstance(provider, Construct):
        raise TypeError(f"{provider.node.path}: AwsCustomResource's provider is expected to be a construct")
    if provider.node.try_find_child(_ACKNOWLEDGED):  # a second call of the stack shares the provider
        return
    Construct(provider, _ACKNOWLEDGED)
    acknowledge(
        provider.node.find_child("ServiceRole"),
        "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
        "The provider writes its own log lines only; the platform's permissions boundary caps the role, "
        "and its log groups are encrypted with the logs key.",
    )
    for rule, reason in (
        ("NIST.800.53.R5-LambdaConcurrency", "CloudFormation alone invokes the provider, once per resource event."),
        (
            "NIST.800.53.R5-LambdaDLQ",
            "CloudFormation invokes the provider synchronously and reports a failed call as a failed "
            "stack operation; there is no asynchronous event to keep.",
        ),
        (
            "NIST.800.53.R5-LambdaInsideVPC",
            "The provider only calls AWS APIs (SSM, EC2) and touches nothing inside the VPC, whose isolated "
            "subnets would give it no route to them.",
        ),
    ):
        acknowledge(provider, rule, reason)

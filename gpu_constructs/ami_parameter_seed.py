"""The AMI parameter fleets launch from: created once with a bootstrap AMI, never owned by CloudFormation.

Image Builder's distribution writes the parameter after every build; a CloudFormation-owned
``AWS::SSM::Parameter`` would be reset to its template value by any update of that resource,
and the AMI rollout (started by the parameter's change) would then roll the fleets back. So the
parameter is put by a custom resource, once, with ``Overwrite: false``: on create only, and an
existing parameter (a value Image Builder already wrote) is left as it is.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_ssm as ssm
from aws_cdk import custom_resources as cr
from constructs import Construct

from gpu_constructs.acknowledge import acknowledge

#: What PutParameter answers when the name exists and Overwrite is false (SSM API reference).
ALREADY_EXISTS = "ParameterAlreadyExists"
#: Construct id of AwsCustomResource's singleton provider function in its stack.
PROVIDER_ID = "AWS679f53fac002430cb0da5b7982bd2287"


class AmiParameterSeed(Construct):
    """Creates ``parameter_name`` (``aws:ec2:image``) with the AMI of ``bootstrap_parameter`` if absent.

    - create: ``ssm:PutParameter`` with ``Overwrite: false``; ``ParameterAlreadyExists`` is not an error;
    - update: no call (the resource's properties change when the public bootstrap AMI does);
    - delete: no call. The value belongs to Image Builder, like the AMIs it names, which outlive
      the stack too; a rolled-back first create must not delete a value another account's
      distribution wrote. ``README.md`` (Tearing down) says how to delete it by hand.

    The provider's role may put that one parameter only (and ``ec2:DescribeImages``, which Parameter
    Store requires of whoever creates an ``aws:ec2:image`` parameter).

    Attributes:
        resource: the AwsCustomResource; parameter_arn.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        parameter_name: str,
        bootstrap_parameter: str,
        description: str,
        logs_key: kms.IKey,
        log_retention: logs.RetentionDays,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.parameter_arn = stack.format_arn(service="ssm", resource="parameter", resource_name=parameter_name[1:])
        # A CloudFormation parameter of the public AMI parameter's value, resolved at every deploy.
        bootstrap_ami = ssm.StringParameter.value_for_typed_string_parameter_v2(
            self, bootstrap_parameter, ssm.ParameterValueType.AWS_EC2_IMAGE_ID
        )
        put_if_absent = cr.AwsSdkCall(
            service="SSM",
            action="PutParameter",
            parameters={
                "Name": parameter_name,
                "Value": bootstrap_ami,
                "Type": "String",
                "DataType": "aws:ec2:image",
                "Description": description,
                "Overwrite": False,
            },
            physical_resource_id=cr.PhysicalResourceId.of(parameter_name),
            ignore_error_codes_matching=ALREADY_EXISTS,
        )
        self.resource = cr.AwsCustomResource(
            self,
            "PutIfAbsent",
            on_create=put_if_absent,
            policy=cr.AwsCustomResourcePolicy.from_statements(
                [
                    iam.PolicyStatement(
                        sid="PutTheAmiParameterOnly", actions=["ssm:PutParameter"], resources=[self.parameter_arn]
                    ),
                    iam.PolicyStatement(
                        sid="ValidateTheAmiId",
                        actions=["ec2:DescribeImages"],  # Parameter Store's aws:ec2:image check; no resource types
                        resources=["*"],
                    ),
                ]
            ),
            install_latest_aws_sdk=False,  # the Lambda runtime's SDK has PutParameter; no download at deploy
            log_group=logs.LogGroup(
                self,
                "ProviderLogs",
                encryption_key=logs_key,
                retention=log_retention,
                removal_policy=RemovalPolicy.DESTROY,
            ),
        )
        self._acknowledge(stack)

    def _acknowledge(self, stack: Stack) -> None:
        policy = self.resource.node.find_child("CustomResourcePolicy")
        acknowledge(
            policy,
            "AwsSolutions-IAM5[Resource::*]",
            "ec2:DescribeImages has no resource types; Parameter Store requires it of whoever creates an "
            "aws:ec2:image parameter, and it only reads.",
        )
        acknowledge(
            policy,
            "NIST.800.53.R5-IAMNoInlinePolicy",
            "AwsCustomResource attaches its call's permissions to its provider's role as this policy: "
            "PutParameter on the one AMI parameter and DescribeImages, nothing else.",
        )
        provider = stack.node.find_child(PROVIDER_ID)
        acknowledge(
            provider.node.find_child("ServiceRole"),
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            "The provider writes its own log lines only; the platform's permissions boundary caps the role, "
            "and its log group is encrypted with the logs key.",
        )
        for rule, reason in (
            (
                "NIST.800.53.R5-LambdaConcurrency",
                "The provider runs once per create of the AMI parameter seed, invoked by CloudFormation only.",
            ),
            (
                "NIST.800.53.R5-LambdaDLQ",
                "CloudFormation invokes the provider synchronously and reports a failed call as a failed "
                "stack operation; there is no asynchronous event to keep.",
            ),
            (
                "NIST.800.53.R5-LambdaInsideVPC",
                "The provider only calls the SSM and EC2 APIs; in isolated environments the VPC has no route "
                "to Lambda's own dependencies, and it touches nothing inside the VPC.",
            ),
        ):
            acknowledge(provider, rule, reason)

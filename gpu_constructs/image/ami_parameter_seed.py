"""The AMI parameter fleets launch from: created once with a bootstrap AMI, never owned by CloudFormation.

Image Builder's distribution writes the parameter after every build; a CloudFormation-owned
``AWS::SSM::Parameter`` would be reset to its template value by any update of that resource,
and the AMI rollout (started by the parameter's change) would then roll the fleets back. So the
parameter is put by a custom resource, once, with ``Overwrite: false``: on create only, and an
existing parameter (a value Image Builder already wrote) is left as it is.

The parameter is the seed's alone, also on an environment's first deploy. Releases before the seed held it
as the ``AWS::SSM::Parameter`` ``AmiParameter3D3A0D31``, which releases 42266c5 to d8fda28 kept, unchanged and
``Retain``, so that the update that first added the seed could not delete it. That resource is gone from the
template now: on a stack that deployed it with ``Retain``, CloudFormation removes it from the stack and leaves
the parameter (the DeletionPolicy attribute "also applies to stack update operations that lead to resources
being deleted from stacks", CloudFormation template reference). Kept, it did harm: on a fresh stack it created
the parameter before the seed, with the Ubuntu 22.04 Deep Learning AMI of the release that wrote it, and any
update of it (a tag) wrote that public AMI's id over the golden AMI. A stack that still holds it without
``Retain`` (a release before 42266c5) must deploy d8fda28 first: ``gpu-platform preflight`` refuses the upgrade
otherwise (``docs/operations.md``, Upgrading a deployed environment).
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_ssm as ssm
from aws_cdk import custom_resources as cr
from constructs import Construct

from gpu_constructs.compliance.sdk_call_resource import sdk_call_resource

#: What PutParameter answers when the name exists and Overwrite is false (SSM API reference).
ALREADY_EXISTS = "ParameterAlreadyExists"


class AmiParameterSeed(Construct):
    """Creates ``parameter_name`` (``aws:ec2:image``) with the AMI of ``bootstrap_parameter`` if absent.

    - create: ``ssm:PutParameter`` with ``Overwrite: false``; ``ParameterAlreadyExists`` is not an error;
    - update: no call (the resource's properties change when the public bootstrap AMI does);
    - delete: no call. The value belongs to Image Builder, like the AMIs it names, which outlive
      the stack too; a rolled-back first create must not delete a value another account's
      distribution wrote. ``docs/operations.md`` (Tearing down) says how to delete it by hand.

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
        self.resource = sdk_call_resource(
            self,
            "PutIfAbsent",
            purpose="PutParameter on the one AMI parameter and DescribeImages, nothing else",
            on_create=put_if_absent,
            statements=[
                iam.PolicyStatement(
                    sid="PutTheAmiParameterOnly", actions=["ssm:PutParameter"], resources=[self.parameter_arn]
                ),
                iam.PolicyStatement(
                    sid="ValidateTheAmiId",
                    actions=["ec2:DescribeImages"],  # Parameter Store's aws:ec2:image check; no resource types
                    resources=["*"],
                ),
            ],
            logs_key=logs_key,
            log_retention=log_retention,
            wildcard_reason="ec2:DescribeImages has no resource types; Parameter Store requires it of whoever "
            "creates an aws:ec2:image parameter, and it only reads.",
        )

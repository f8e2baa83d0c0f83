"""The role the pipeline's AMI gate assumes in an environment: read the AMI parameter, name its image.

Before the pipeline deploys an environment that ``ami_gate`` of ``config/pipeline/pipeline.yaml`` lists, its
AmiGate step (``scripts/ci/ami_gate.py``) reads the environment's AMI parameter and asks EC2 for that AMI's
name, to compare it with the AMI an earlier environment's fabric check ran on. This role may do exactly that,
and only the AmiGate step of the pipeline (one named role of the tooling account) may assume it. The platform's
permissions boundary applies to it as to every role of the environment (``PlatformStage``).
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from gpu_constructs.compliance.acknowledge import acknowledge
from gpu_constructs.security.fabric_check_role import pipeline_step_role


class AmiGateRole(Construct):
    """Attributes: ``role``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        role_name: str,
        trusted_account: str,
        trusted_role_name: str,
        parameter_name: str,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        arn = f"arn:{stack.partition}"
        self.role = pipeline_step_role(
            self,
            role_name=role_name,
            description="GPU platform: the pipeline's AMI gate (reads the AMI parameter and the AMI's name)",
            trusted_account=trusted_account,
            trusted_role_name=trusted_role_name,
        )
        policy = iam.ManagedPolicy(
            self,
            "Policy",
            roles=[self.role],
            statements=[
                iam.PolicyStatement(
                    sid="TheAmiParameterOnly",
                    actions=["ssm:GetParameter"],
                    resources=[f"{arn}:ssm:{stack.region}:{stack.account}:parameter/{parameter_name.lstrip('/')}"],
                ),
                # ec2:DescribeImages supports no resource-level permissions (no resource type, no condition key
                # that names an image): "*" is the only resource it can be granted on. It only reads.
                iam.PolicyStatement(sid="NameTheAmi", actions=["ec2:DescribeImages"], resources=["*"]),
            ],
        )
        acknowledge(
            policy,
            "AwsSolutions-IAM5[Resource::*]",
            "ec2:DescribeImages has no resource type: it cannot be scoped to an image; it only reads the name of "
            "the AMI the parameter holds.",
        )

"""The role the pipeline's fabric check assumes in an environment: run the benchmark as a job, read, publish.

``gpu-platform job fabric-test`` (``ops/fabric``) lists the training group's nodes and names the AMI they were
booted from, sends the environment's job document to them (Action start, status, stop), waits on each
invocation, reads the job log streams and publishes ``FabricBusBandwidth``. This role may do exactly that, and
only the FabricCheck step of the pipeline (one named role of the tooling account) may assume it. The platform's
permissions boundary applies to it as to every role of the environment (``PlatformStage``).
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from gpu_constructs.compliance.acknowledge import acknowledge

#: The Auto Scaling tag every instance of a group carries: the instances SendCommand may reach.
GROUP_TAG_KEY = "ssm:resourceTag/aws:autoscaling:groupName"
#: What ops/fabric calls that has no resource type (reads only); ec2:DescribeImages names the AMI the nodes were
#: booted from, which the pipeline's AMI gate compares with a later environment's AMI.
READ_ONLY_UNSCOPED = [
    "autoscaling:DescribeAutoScalingGroups",
    "ec2:DescribeImages",
    "ec2:DescribeInstances",
    "ssm:GetCommandInvocation",
]


def pipeline_step_role(
    scope: Construct, *, role_name: str, description: str, trusted_account: str, trusted_role_name: str
) -> iam.Role:
    """A role of this environment that only one role of the tooling account (a pipeline step's) may assume. The
    account as principal, the one role by condition: a role ARN as principal would have to exist when this role is
    created (the pipeline stack may be deployed after a laptop deploy of this one)."""
    partition = Stack.of(scope).partition
    trusted = f"arn:{partition}:iam::{trusted_account}:role/{trusted_role_name}"
    return iam.Role(
        scope,
        "Role",
        role_name=role_name,
        description=description,
        assumed_by=iam.AccountPrincipal(trusted_account).with_conditions({"ArnEquals": {"aws:PrincipalArn": trusted}}),
    )


class FabricCheckRole(Construct):
    """Attributes: ``role``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        role_name: str,
        trusted_account: str,
        trusted_role_name: str,
        job_document_name: str,
        group_names: Sequence[str],
        job_log_group_name: str,
        metrics_namespace: str,
    ) -> None:
        super().__init__(scope, construct_id)
        if not group_names:
            raise ValueError(f"{self.node.path}: the fabric check needs at least one training group")
        stack = Stack.of(self)
        self.role = pipeline_step_role(
            self,
            role_name=role_name,
            description="GPU platform: the pipeline's fabric check (all-reduce bus bandwidth of the training fleets)",
            trusted_account=trusted_account,
            trusted_role_name=trusted_role_name,
        )
        policy = iam.ManagedPolicy(
            self,
            "Policy",
            roles=[self.role],
            statements=_statements(
                stack,
                job_document_name=job_document_name,
                group_names=group_names,
                job_log_group_name=job_log_group_name,
                metrics_namespace=metrics_namespace,
            ),
        )
        _acknowledge_scopes(policy, stack, job_log_group_name=job_log_group_name)


def _instances(stack: Stack) -> str:
    """Every instance of this account and region: SendCommand's targets, held to the groups by tag."""
    return f"arn:{stack.partition}:ec2:{stack.region}:{stack.account}:instance/*"


def _job_log_streams(stack: Stack, job_log_group_name: str) -> str:
    """The streams of the job log group (the group's ARN with ``:*``)."""
    return f"arn:{stack.partition}:logs:{stack.region}:{stack.account}:log-group:{job_log_group_name}:*"


def _statements(
    stack: Stack,
    *,
    job_document_name: str,
    group_names: Sequence[str],
    job_log_group_name: str,
    metrics_namespace: str,
) -> list[iam.PolicyStatement]:
    """Send the job document to the training nodes, follow them and the commands, read the logs, publish."""
    here = f"{stack.region}:{stack.account}"
    return [
        iam.PolicyStatement(
            sid="TheJobDocument",
            actions=["ssm:SendCommand"],
            resources=[f"arn:{stack.partition}:ssm:{here}:document/{job_document_name}"],
        ),
        iam.PolicyStatement(
            sid="OnTheTrainingNodes",
            actions=["ssm:SendCommand"],
            resources=[_instances(stack)],
            conditions={"StringEquals": {GROUP_TAG_KEY: sorted(group_names)}},
        ),
        iam.PolicyStatement(sid="FollowTheNodesAndCommands", actions=READ_ONLY_UNSCOPED, resources=["*"]),
        iam.PolicyStatement(
            sid="ReadTheJobLogs",
            actions=["logs:FilterLogEvents"],
            resources=[_job_log_streams(stack, job_log_group_name)],
        ),
        iam.PolicyStatement(
            sid="PublishTheBandwidth",
            actions=["cloudwatch:PutMetricData"],
            resources=["*"],
            conditions={"StringEquals": {"cloudwatch:namespace": metrics_namespace}},
        ),
    ]


def _acknowledge_scopes(policy: iam.ManagedPolicy, stack: Stack, *, job_log_group_name: str) -> None:
    """The wildcards of the policy, each with what holds it in."""
    acknowledge(
        policy,
        f"AwsSolutions-IAM5[Resource::{_instances(stack)}]",
        "SendCommand reaches only instances tagged with a training group of this environment "
        f"({GROUP_TAG_KEY}); instance ids are not known at deploy time.",
    )
    acknowledge(
        policy,
        f"AwsSolutions-IAM5[Resource::{_job_log_streams(stack, job_log_group_name)}]",
        "The streams of the one job log group; each job writes <job>/<instance-id> streams at run time.",
    )
    acknowledge(
        policy,
        "AwsSolutions-IAM5[Resource::*]",
        "DescribeAutoScalingGroups, DescribeInstances, DescribeImages and GetCommandInvocation have no resource "
        "type (reads); "
        "PutMetricData has none either and is held to the environment's namespace (cloudwatch:namespace).",
    )

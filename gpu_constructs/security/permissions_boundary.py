"""The permissions boundary every role of the platform carries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Stack, Stage
from aws_cdk import aws_iam as iam
from constructs import Construct

from config.naming import ResourceNames
from gpu_constructs.compliance.acknowledge import acknowledge
from gpu_constructs.scheduler.pcs_iam import pcs_cluster_arns, pcs_registration_statement
from gpu_constructs.security.render.iam_actions import SSM_AGENT_CHANNELS

#: The most any role of the platform may ever do, by service. A role's own
#: policies grant a subset of this; the boundary stops a widened role policy or a
#: misused role from reaching IAM, Organizations, CloudTrail configuration, key
#: policies, bucket policies or security group ingress. Its only IAM action,
#: iam:PassRole, is in statements of its own: named roles, each to one service.
#: These actions are allowed on any resource: they have no resource types, only read,
#: or write only the caller's own logs, metrics, instance registration and hooks.
UNSCOPED_ACTIONS = [
    # Session Manager and node registration
    "ssm:UpdateInstanceInformation",
    "ssm:GetParameter",
    "ssm:GetParameters",
    "ssm:GetParametersByPath",
    *SSM_AGENT_CHANNELS,
    # logs and metrics
    "logs:CreateLogGroup",
    "logs:CreateLogStream",
    "logs:PutLogEvents",
    "logs:DescribeLogGroups",
    "logs:DescribeLogStreams",
    "cloudwatch:PutMetricData",
    # fleets: lifecycle hooks and health
    "autoscaling:CompleteLifecycleAction",
    "autoscaling:RecordLifecycleActionHeartbeat",
    "autoscaling:SetInstanceHealth",
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeAutoScalingGroups",
    # read-only describes
    "ec2:DescribeInstances",
    "ec2:DescribeTags",
    "ec2:DescribeVolumes",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeImages",
    "ec2:DescribePrefixLists",
    "fsx:DescribeFileSystems",
    # the golden AMI's build instance fetches its components
    "imagebuilder:GetComponent",
    # container fleets log in to ECR (a registry token: no resource type; pulls are scoped below)
    "ecr:GetAuthorizationToken",
    # AMI rollout: EventBridge starts the runbook; the runbook versions the fleets' launch templates
    # and starts their instance refreshes (launching and passing roles: the statements below)
    "ssm:StartAutomationExecution",
    "ec2:DescribeLaunchTemplateVersions",
    "ec2:CreateLaunchTemplateVersion",
    "autoscaling:StartInstanceRefresh",
    # the pipeline's fabric check follows the commands it sent (no resource type; reads)
    "ssm:GetCommandInvocation",
]

#: Actions allowed only on the environment's own resources (statement id -> actions; the
#: resources are built from the naming convention of config/naming.py in the construct).
SCOPED_ACTIONS = {
    # objects of the environment's buckets (gpu-platform-<env>-*)
    "ObjectsOfThisEnvironment": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
    "BucketsOfThisEnvironment": ["s3:ListBucket", "s3:GetBucketLocation"],
    # what deployments publish: CDK's asset bucket of this account and region (node scripts, image
    # components) and Image Builder's own agent downloads
    "ReadDeploymentAssets": ["s3:GetObject"],
    # keys of this account and region (data, logs, alerts, AMI keys)
    "KeysOfThisAccount": [
        "kms:Decrypt",
        "kms:Encrypt",
        "kms:ReEncryptFrom",
        "kms:ReEncryptTo",
        "kms:GenerateDataKey",
        "kms:GenerateDataKeyWithoutPlaintext",
        "kms:DescribeKey",
    ],
    # a receiving environment's EC2ImageBuilderDistributionCrossAccountRole copies the building
    # account's AMI: EC2 uses the source snapshots' key (another account's) on its behalf
    "SnapshotKeysThroughEc2Only": [
        "kms:Decrypt",
        "kms:ReEncryptFrom",
        "kms:ReEncryptTo",
        "kms:GenerateDataKey",
        "kms:GenerateDataKeyWithoutPlaintext",
        "kms:DescribeKey",
        "kms:CreateGrant",
    ],
    # ... tags the copy and writes its id into this environment's AMI parameter
    "AmiCopiesInThisRegion": ["ec2:CopyImage", "ec2:CreateTags", "ec2:ModifyImageAttribute"],
    "TheAmiParameterOnly": ["ssm:PutParameter"],
    # container fleets pull images from this account's repositories in this region
    "ImagePullsFromThisAccount": ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
    # CDK's custom resource that strips the VPC's default security group, and restores its
    # default rules when the stack is deleted (the handler authorizes them back on Delete):
    # that provider's role only (aws:PrincipalArn), no other role may open a group
    # the pipeline's fabric check runs the environment's job document on its training nodes ...
    "TheJobDocumentOnThisAccountsInstances": ["ssm:SendCommand"],
    # ... and reads their output from the job log group
    "TheJobLogGroup": ["logs:FilterLogEvents"],
    "SecurityGroupRulesOfThisAccount": [
        "ec2:AuthorizeSecurityGroupIngress",
        "ec2:AuthorizeSecurityGroupEgress",
        "ec2:RevokeSecurityGroupIngress",
        "ec2:RevokeSecurityGroupEgress",
    ],
}

#: Every action the boundary allows anywhere (a role's grant of anything else is void).
BOUNDARY_ACTIONS = sorted(
    {*UNSCOPED_ACTIONS, *(a for actions in SCOPED_ACTIONS.values() for a in actions), "ec2:RunInstances"}
)


@dataclass(frozen=True)
class PassRoleGrant:
    """The only roles a platform role may pass, each to one service only."""

    sid: str
    role_arns: Sequence[str]
    service: str
    #: Why an ARN with a wildcard names only the intended role (required where one has a ``*``).
    wildcard_reason: str = ""


class PlatformPermissionsBoundary(Construct):
    """A named customer-managed policy used as permissions boundary.

    Attributes:
        policy: the managed policy; ``iam.PermissionsBoundary.of(scope).apply(policy)``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        policy_name: str,
        security_group_rule_roles: Sequence[str],
        pass_roles: Sequence[PassRoleGrant] = (),
        pcs_nodes: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        stage = Stage.of(self)
        if stage is None:
            raise TypeError(f"{self.node.path}: the boundary names the environment after its stage; none above it")
        names = ResourceNames(env=stage.stage_name, account=stack.account, region=stack.region)
        launched = f"arn:{stack.partition}:ec2:{stack.region}:{stack.account}:*/*"
        scoped = _scoped_statements(stack, names, security_group_rule_roles)
        self.policy = iam.ManagedPolicy(
            self,
            "Policy",
            managed_policy_name=policy_name,
            description="Permissions boundary of every GPU platform role: the most any of them may do",
            statements=[
                iam.PolicyStatement(sid="PlatformCeiling", actions=sorted(UNSCOPED_ACTIONS), resources=["*"]),
                *scoped,
                *_launch_statements(stack, launched),
                *(_pass_role_statement(grant) for grant in pass_roles),
                # Slurm fleets' nodes (and login nodes) register with the environment's PCS cluster.
                *([pcs_registration_statement(stack)] if pcs_nodes else []),
            ],
        )
        if pcs_nodes:
            acknowledge(
                self.policy,
                f"AwsSolutions-IAM5[Resource::{pcs_cluster_arns(stack)}]",
                "Boundary only: PCS clusters of this account and region, whose ids PCS generates.",
            )
        self._acknowledge_scopes(pass_roles, scoped, launched)

    def _acknowledge_scopes(
        self, pass_roles: Sequence[PassRoleGrant], scoped: Sequence[iam.PolicyStatement], launched: str
    ) -> None:
        """Why each wildcard resource of the boundary is no wider than the platform: passed roles' patterns,
        the scoped statements' resources, what RunInstances creates, and the ceiling itself."""
        for grant in pass_roles:
            for role_arn in grant.role_arns:
                if "*" in role_arn:
                    acknowledge(self.policy, f"AwsSolutions-IAM5[Resource::{role_arn}]", grant.wildcard_reason)
        reasons = {**_SCOPE_REASONS, "TagOnlyOnLaunch": "Only what RunInstances creates, as it creates it."}
        scoped_resources = [(sid, st.resources) for sid, st in zip(SCOPED_ACTIONS, scoped, strict=True)]
        for sid, resources in [*scoped_resources, ("TagOnlyOnLaunch", [launched])]:
            for resource in resources:
                acknowledge(self.policy, f"AwsSolutions-IAM5[Resource::{resource}]", f"Boundary only: {reasons[sid]}")
        acknowledge(
            self.policy,
            "AwsSolutions-IAM5[Resource::*]",
            "This policy is only a permissions boundary: it grants nothing, it caps each role, whose own "
            "policies scope the resources.",
        )


def _launch_statements(stack: Stack, launched: str) -> list[iam.PolicyStatement]:
    """Launches through the account's launch templates only, and tags only on what a launch creates."""
    templates = f"arn:{stack.partition}:ec2:{stack.region}:{stack.account}:launch-template/*"
    return [
        # Auto Scaling lets a caller point a group at a launch template only if the caller could
        # launch from it; no role may launch any other way, or tag anything but a launch.
        iam.PolicyStatement(
            sid="LaunchOnlyThroughLaunchTemplates",
            actions=["ec2:RunInstances"],
            resources=["*"],
            conditions={
                "ArnLike": {"ec2:LaunchTemplate": templates},
                "Bool": {"ec2:IsLaunchTemplateResource": "true"},
            },
        ),
        iam.PolicyStatement(
            sid="TagOnlyOnLaunch",
            actions=["ec2:CreateTags"],
            resources=[launched],
            conditions={"StringEquals": {"ec2:CreateAction": "RunInstances"}},
        ),
    ]


def _pass_role_statement(grant: PassRoleGrant) -> iam.PolicyStatement:
    """``iam:PassRole`` on the grant's roles, to its one service."""
    return iam.PolicyStatement(
        sid=grant.sid,
        actions=["iam:PassRole"],
        resources=list(grant.role_arns),
        conditions={"StringEquals": {"iam:PassedToService": grant.service}},
    )


_SCOPE_REASONS = {
    "ObjectsOfThisEnvironment": "objects of this environment's buckets, which share its name prefix.",
    "BucketsOfThisEnvironment": "this environment's buckets, which share its name prefix.",
    "ReadDeploymentAssets": "reads of CDK's asset bucket of this account and region and of Image Builder's agent.",
    "KeysOfThisAccount": "keys of this account and region; each role names its keys.",
    "SnapshotKeysThroughEc2Only": "another account's snapshot key, only as EC2 uses it to copy an AMI.",
    "AmiCopiesInThisRegion": "AMIs and snapshots have no account in their ARN; this region's only.",
    "TheAmiParameterOnly": "the one AMI parameter of this environment.",
    "ImagePullsFromThisAccount": "container images of this account's repositories in this region, read only.",
    "TheJobDocumentOnThisAccountsInstances": "the environment's one job document, on this account's instances of "
    "this region; the role that sends it names the training groups' instances by tag.",
    "TheJobLogGroup": "the streams of the environment's one job log group, read.",
    "SecurityGroupRulesOfThisAccount": "security groups of this account and region, for the default-security-group "
    "provider's role only (aws:PrincipalArn); the role names its group.",
}


def _scoped_statements(
    stack: Stack, names: ResourceNames, security_group_rule_roles: Sequence[str]
) -> list[iam.PolicyStatement]:
    """SCOPED_ACTIONS, each on the environment's resources (and with the conditions that hold it there)."""
    arn, region, account = f"arn:{stack.partition}", stack.region, stack.account
    resources: dict[str, list[str]] = {
        "ObjectsOfThisEnvironment": [f"{arn}:s3:::{names.prefix}-*/*"],
        "BucketsOfThisEnvironment": [f"{arn}:s3:::{names.prefix}-*"],
        "ReadDeploymentAssets": [f"{arn}:s3:::cdk-*-assets-{account}-{region}/*", f"{arn}:s3:::ec2imagebuilder*/*"],
        "KeysOfThisAccount": [f"{arn}:kms:{region}:{account}:key/*"],
        "SnapshotKeysThroughEc2Only": [f"{arn}:kms:{region}:*:key/*"],
        "AmiCopiesInThisRegion": [f"{arn}:ec2:{region}::image/*", f"{arn}:ec2:{region}::snapshot/*"],
        "TheAmiParameterOnly": [f"{arn}:ssm:{region}:{account}:parameter{names.ami_parameter}"],
        "ImagePullsFromThisAccount": [f"{arn}:ecr:{region}:{account}:repository/*"],
        "TheJobDocumentOnThisAccountsInstances": [
            f"{arn}:ssm:{region}:{account}:document/{names.job_document}",
            f"{arn}:ec2:{region}:{account}:instance/*",
        ],
        "TheJobLogGroup": [f"{arn}:logs:{region}:{account}:log-group:{names.job_log_group}:*"],
        "SecurityGroupRulesOfThisAccount": [f"{arn}:ec2:{region}:{account}:security-group/*"],
    }
    # S3 ARNs carry no account and bucket names are global: the environment's buckets are also
    # required to be this account's (a same-named bucket elsewhere is refused).
    own_account = {"StringEquals": {"aws:ResourceAccount": account}}
    conditions: dict[str, dict] = {
        "ObjectsOfThisEnvironment": own_account,
        "BucketsOfThisEnvironment": own_account,
        "SnapshotKeysThroughEc2Only": {"StringEquals": {"kms:ViaService": f"ec2.{region}.amazonaws.com"}},
        "SecurityGroupRulesOfThisAccount": {"ArnLike": {"aws:PrincipalArn": list(security_group_rule_roles)}},
    }
    return [
        iam.PolicyStatement(sid=sid, actions=sorted(actions), resources=resources[sid], conditions=conditions.get(sid))
        for sid, actions in SCOPED_ACTIONS.items()
    ]

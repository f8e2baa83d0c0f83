"""The IAM role and instance profile of Image Builder's build and test instances: only what a build does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from gpu_constructs.compliance.acknowledge import acknowledge
from gpu_constructs.image.component import ImageComponent
from gpu_constructs.security.render.iam_actions import ssm_agent_statements


@dataclass(frozen=True)
class BuildAccess:
    """What a build instance reads and writes, by name or ARN.

    - ``components``: the recipe's components (``imagebuilder:GetComponent``);
    - ``log_bucket_arn``, ``log_prefix`` and ``log_key_arn``: where AWSTOE uploads the build logs
      (by name: the ARN must be a literal for the acknowledgment to name it) and their SSE-KMS key;
    - ``log_group_arn``: the image's CloudWatch log group.
    """

    components: Sequence[ImageComponent]
    log_bucket_arn: str
    log_prefix: str
    log_key_arn: str
    log_group_arn: str


class ImageBuilderInstanceRole(Construct):
    """Role for Image Builder instances, one customer-managed policy per concern, no AWS managed policy.

    It replaces ``EC2InstanceProfileForImageBuilder`` and ``AmazonSSMManagedInstanceCore``,
    which grant every component, every ``ec2imagebuilder*`` bucket, every log group under
    ``/aws/imagebuilder/`` and Systems Manager inventory, patching and associations:

    - agent: the SSM agent registers and receives Image Builder's commands (Run Command
      channels held to the region);
    - build: ``imagebuilder:GetComponent`` on the recipe's components only, the AWSTOE
      download from Image Builder's own buckets, the listed objects, the build logs under
      one prefix of the log bucket (and its key, through S3) and the image's log group.

    The parent image's SSM parameter is resolved by Image Builder itself, not by the
    instance, so the role reads no parameter. The components carry no customer key; the one
    key the role uses is the log bucket's, through S3 only.

    Attributes:
        role, instance_profile.
    """

    def __init__(self, scope: Construct, construct_id: str, *, access: BuildAccess) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description="GPU platform image builds: SSM agent, the recipe's components, build logs",
        )
        self.instance_profile = iam.InstanceProfile(self, "InstanceProfile", role=self.role)
        self._agent_policy(stack)
        self._build_policy(stack, access)

    def _agent_policy(self, stack: Stack) -> iam.ManagedPolicy:
        """The SSM agent: registration and Image Builder's commands (Run Command channels held to the region)."""
        agent = self._policy(
            "Agent",
            *ssm_agent_statements(stack, channels_sid="CommandChannels"),
        )
        acknowledge(
            agent,
            "AwsSolutions-IAM5[Resource::*]",
            "ssmmessages and ec2messages channel calls have no resource types (Service Authorization Reference); "
            "Image Builder drives the build through them, and the statement is held to this region.",
        )
        acknowledge(
            agent,
            f"AwsSolutions-IAM5[Resource::arn:{stack.partition}:ec2:{stack.region}:{stack.account}:instance/*]",
            "The build instance registers itself with Systems Manager; its id is not known when the role is created.",
        )
        return agent

    def _build_policy(self, stack: Stack, access: BuildAccess) -> iam.ManagedPolicy:
        """The recipe's components, AWSTOE's download, the build logs (and their key, through S3), the log group."""
        toe_buckets = f"arn:{stack.partition}:s3:::ec2imagebuilder*/*"
        log_objects = f"{access.log_bucket_arn}/{access.log_prefix}/*"
        component_arns = [component.arn_pattern() for component in access.components]
        build = self._policy(
            "Build",
            iam.PolicyStatement(
                sid="RecipeComponents", actions=["imagebuilder:GetComponent"], resources=component_arns
            ),
            iam.PolicyStatement(sid="ImageBuilderAgent", actions=["s3:GetObject"], resources=[toe_buckets]),
            iam.PolicyStatement(sid="BuildLogs", actions=["s3:PutObject"], resources=[log_objects]),
            iam.PolicyStatement(
                sid="BuildLogsKeyThroughS3",
                actions=["kms:GenerateDataKey", "kms:Decrypt"],
                resources=[access.log_key_arn],
                conditions={"StringEquals": {"kms:ViaService": f"s3.{stack.region}.amazonaws.com"}},
            ),
            iam.PolicyStatement(
                sid="ImageLogGroup",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[access.log_group_arn],
            ),
        )
        _acknowledge_build_scopes(build, access, component_arns, toe_buckets=toe_buckets, log_objects=log_objects)
        return build

    def _policy(self, construct_id: str, *statements: iam.PolicyStatement) -> iam.ManagedPolicy:
        return iam.ManagedPolicy(self, construct_id, roles=[self.role], statements=list(statements))


def _acknowledge_build_scopes(
    build: iam.ManagedPolicy, access: BuildAccess, component_arns: list[str], *, toe_buckets: str, log_objects: str
) -> None:
    """The wildcards of the build policy, each with why it cannot be narrower."""
    for component, pattern in zip(access.components, component_arns, strict=True):
        acknowledge(
            build,
            f"AwsSolutions-IAM5[Resource::{pattern}]",
            f"Every version of the platform's own {component.name} component: its version and build number "
            "change with its content, and the instance fetches the one the recipe names.",
        )
    acknowledge(
        build,
        f"AwsSolutions-IAM5[Resource::{toe_buckets}]",
        "AWSTOE, Image Builder's component runner, is downloaded onto the build instance from Image Builder's "
        "own regional ec2imagebuilder* buckets, whose exact names AWS does not publish.",
    )
    acknowledge(
        build,
        f"AwsSolutions-IAM5[Resource::{log_objects}]",
        f"AWSTOE writes the build logs under {access.log_prefix}/ of the image log bucket; each build and step "
        "writes objects whose names carry the build's version and time.",
    )

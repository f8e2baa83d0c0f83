"""The IAM role and instance profile of GPU nodes: only what a node does."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from gpu_constructs.compliance.acknowledge import acknowledge
from gpu_constructs.scheduler.pcs_iam import PCS_ROLE_PATH, pcs_cluster_arns, pcs_registration_statement
from gpu_constructs.security.render.iam_actions import acknowledge_session_manager, session_manager_statements

DATASETS_PREFIX = "datasets/"
CHECKPOINTS_PREFIX = "checkpoints/"


@dataclass(frozen=True)
class NodeAccess:
    """The names a node's permissions are scoped to."""

    data_bucket_name: str
    metrics_namespace: str
    node_log_group_prefix: str
    session_log_group_arn: str
    job_log_group_arn: str  # the group's ARN as its Arn attribute gives it (``log-group:<name>:*``)
    asg_name_prefix: str
    ssm_parameter_prefix: str


class GpuNodeRole(Construct):
    """Role for GPU instances, with one customer-managed policy per concern.

    - Session Manager: the channel APIs, registration, and the session log group;
    - CloudWatch agent: ``PutMetricData`` in the platform namespace only, and the
      node's own log groups;
    - data: read ``datasets/``, read and write ``checkpoints/`` of the data bucket;
    - fleet: complete lifecycle hooks and report health on the platform's own
      Auto Scaling groups only (by name prefix);
    - read-only describes and the environment's SSM parameters;
    - training jobs: the job runner writes the job's output to its own streams of the job log group;
    - containers: an ECR registry token and image pulls from this account's repositories in this region.

    With ``pcs`` the role and its instance profile are those of a Slurm fleet's nodes (AWS PCS launches them):
    path ``/aws-pcs/``, as PCS requires, and the same policies plus the node's registration with its cluster.

    Attributes:
        role, instance_profile.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        access: NodeAccess,
        data_key: kms.IKey,
        logs_key: kms.IKey,
        pcs: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        self._stack = Stack.of(self)
        self._access = access
        self._arn = f"arn:{self._stack.partition}"
        self._region_account = f"{self._stack.region}:{self._stack.account}"
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description="GPU platform node: Session Manager, CloudWatch agent, data bucket, lifecycle hooks",
            path=PCS_ROLE_PATH if pcs else None,
        )
        self.instance_profile = iam.InstanceProfile(
            self, "InstanceProfile", role=self.role, path=PCS_ROLE_PATH if pcs else None
        )
        if pcs:
            self._pcs_registration()
        self._session_manager(logs_key)
        self._cloudwatch_agent(logs_key)
        self._data_bucket(data_key)
        self._fleet_lifecycle()
        self._training_jobs()
        self._container_images()

    def _pcs_registration(self) -> None:
        """A Slurm node's registration with its PCS cluster."""
        registration = self._policy("PcsRegistration", pcs_registration_statement(self._stack))
        acknowledge(
            registration,
            f"AwsSolutions-IAM5[Resource::{pcs_cluster_arns(self._stack)}]",
            "PCS generates its clusters' ids; a node registers with the cluster of its node group, which this "
            "stack (outliving the fleets) cannot name.",
        )

    def _session_manager(self, logs_key: kms.IKey) -> None:
        """Session Manager's channel APIs, registration, and the session log group."""
        session = self._policy(
            "SessionManager",
            *session_manager_statements(
                self._stack, session_log_group_arn=self._access.session_log_group_arn, logs_key_arn=logs_key.key_arn
            ),
        )
        acknowledge_session_manager(session, self._stack)

    def _cloudwatch_agent(self, logs_key: kms.IKey) -> None:
        """``PutMetricData`` in the platform namespace only, and the node's own log groups."""
        arn, region_account, access = self._arn, self._region_account, self._access
        agent = self._policy(
            "CloudWatchAgent",
            iam.PolicyStatement(
                sid="PlatformMetricsOnly",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": access.metrics_namespace}},
            ),
            iam.PolicyStatement(
                sid="NodeLogGroups",
                actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                resources=[f"{arn}:logs:{region_account}:log-group:{access.node_log_group_prefix}*"],
            ),
            iam.PolicyStatement(
                sid="NodeLogsKey",
                actions=["kms:Encrypt", "kms:GenerateDataKey"],
                resources=[logs_key.key_arn],
                conditions={"StringEquals": {"kms:ViaService": f"logs.{self._stack.region}.amazonaws.com"}},
            ),
        )
        acknowledge(
            agent,
            "AwsSolutions-IAM5[Resource::*]",
            "PutMetricData has no resource type; the statement is limited to the platform's namespace by the "
            "cloudwatch:namespace condition.",
        )
        acknowledge(
            agent,
            f"AwsSolutions-IAM5[Resource::{arn}:logs:{region_account}:log-group:{access.node_log_group_prefix}*]",
            "The node's log groups share this prefix; log streams are named by instance id at run time.",
        )

    def _data_bucket(self, data_key: kms.IKey) -> None:
        """Read ``datasets/``, read and write ``checkpoints/`` of the data bucket."""
        bucket = f"{self._arn}:s3:::{self._access.data_bucket_name}"
        data = self._policy(
            "DataBucket",
            iam.PolicyStatement(
                sid="ReadDatasetsAndCheckpoints",
                actions=["s3:GetObject"],
                resources=[f"{bucket}/{DATASETS_PREFIX}*", f"{bucket}/{CHECKPOINTS_PREFIX}*"],
            ),
            iam.PolicyStatement(
                sid="WriteCheckpoints",
                actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                resources=[f"{bucket}/{CHECKPOINTS_PREFIX}*"],
            ),
            iam.PolicyStatement(
                sid="ListOwnPrefixes",
                actions=["s3:ListBucket"],
                resources=[bucket],
                conditions={"StringLike": {"s3:prefix": [f"{DATASETS_PREFIX}*", f"{CHECKPOINTS_PREFIX}*"]}},
            ),
            iam.PolicyStatement(
                sid="DataKeyThroughS3",
                actions=["kms:Decrypt", "kms:GenerateDataKey"],
                resources=[data_key.key_arn],
                conditions={"StringEquals": {"kms:ViaService": f"s3.{self._stack.region}.amazonaws.com"}},
            ),
        )
        for prefix in (DATASETS_PREFIX, CHECKPOINTS_PREFIX):
            acknowledge(
                data,
                f"AwsSolutions-IAM5[Resource::{bucket}/{prefix}*]",
                f"Objects under the data bucket's {prefix} prefix are the data a training node reads and writes.",
            )

    def _fleet_lifecycle(self) -> None:
        """Lifecycle hooks and health on the platform's own groups, read-only describes, the SSM parameters."""
        arn, region_account, access = self._arn, self._region_account, self._access
        asg_arn = (
            f"{arn}:autoscaling:{region_account}:autoScalingGroup:*:autoScalingGroupName/{access.asg_name_prefix}*"
        )
        parameters = f"{arn}:ssm:{region_account}:parameter{access.ssm_parameter_prefix}*"
        fleet = self._policy(
            "FleetLifecycle",
            iam.PolicyStatement(
                sid="OwnGroupsOnly",
                actions=[
                    "autoscaling:CompleteLifecycleAction",
                    "autoscaling:RecordLifecycleActionHeartbeat",
                    "autoscaling:SetInstanceHealth",
                ],
                resources=[asg_arn],
            ),
            iam.PolicyStatement(
                sid="ReadOnlyDescribe",
                actions=[
                    "autoscaling:DescribeAutoScalingInstances",
                    "ec2:DescribeInstances",
                    "ec2:DescribeTags",
                    "ec2:DescribeVolumes",
                    "fsx:DescribeFileSystems",
                ],
                resources=["*"],
            ),
            iam.PolicyStatement(
                sid="EnvironmentParameters",
                actions=["ssm:GetParameter", "ssm:GetParameters"],
                resources=[parameters],
            ),
        )
        acknowledge(
            fleet,
            f"AwsSolutions-IAM5[Resource::{asg_arn}]",
            "The platform's Auto Scaling groups share this name prefix; their generated ids are not known here.",
        )
        acknowledge(
            fleet,
            "AwsSolutions-IAM5[Resource::*]",
            "Describe calls of EC2, Auto Scaling and FSx support no resource-level scoping; they are read-only.",
        )
        acknowledge(
            fleet,
            f"AwsSolutions-IAM5[Resource::{parameters}]",
            "The environment's parameters (AMI id, file system) share this path.",
        )

    def _training_jobs(self) -> None:
        """The job runner writes the job's output to its own streams of the job log group."""
        self._policy(
            "TrainingJobs",
            iam.PolicyStatement(
                # scripts/node/jobs/runner.py: CreateLogStream <job>/<instance id>, then PutLogEvents into it.
                sid="JobLogStreams",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self._access.job_log_group_arn],
            ),
        )

    def _container_images(self) -> None:
        """An ECR registry token and image pulls from this account's repositories in this region."""
        images = f"{self._arn}:ecr:{self._region_account}:repository/*"
        containers = self._policy(
            "ContainerImages",
            iam.PolicyStatement(sid="RegistryLogin", actions=["ecr:GetAuthorizationToken"], resources=["*"]),
            iam.PolicyStatement(
                sid="PullFromThisAccount",
                actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
                resources=[images],
            ),
        )
        acknowledge(
            containers,
            "AwsSolutions-IAM5[Resource::*]",
            "ecr:GetAuthorizationToken has no resource type (Service Authorization Reference); it returns a "
            "registry token, and the pulls it enables are scoped to this account's repositories.",
        )
        acknowledge(
            containers,
            f"AwsSolutions-IAM5[Resource::{images}]",
            "Container fleets pull the images of this account's repositories in this region (read only); the "
            "repositories are the workloads', named by their owners.",
        )

    def _policy(self, construct_id: str, *statements: iam.PolicyStatement) -> iam.ManagedPolicy:
        return iam.ManagedPolicy(self, construct_id, roles=[self.role], statements=list(statements))

"""Names of platform resources that more than one stack must agree on.

Where a stack needs another stack's resource only by name (a bucket in an IAM
statement, a log group prefix in a policy), both sides take it from here rather
than from a cross-stack reference, so the long-lived stacks never depend on the
short-lived ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from config.schema import Environment


def launch_hook_name(group_name: str) -> str:
    """The launch lifecycle hook of a group, held in its ``LifecycleHookSpecificationList``.

    ``-hold`` because the names ``<group>-launch`` / ``<group>-terminate`` belonged to the separate
    ``AWS::AutoScaling::LifecycleHook`` resources of earlier releases: CloudFormation deletes a removed
    resource in the update's cleanup phase, after the group's list has put a hook of the same name, and
    that delete would remove the hook the group declares. New names are never touched by that cleanup.
    """
    return f"{group_name}-launch-hold"


def terminate_hook_name(group_name: str) -> str:
    """The terminate lifecycle hook of a group (see ``launch_hook_name`` for the suffix)."""
    return f"{group_name}-terminate-hold"


@dataclass(frozen=True)
class ResourceNames:
    env: str
    account: str
    region: str

    @classmethod
    def of(cls, env: Environment) -> ResourceNames:
        return cls(env=env.name, account=env.account, region=env.region)

    @property
    def prefix(self) -> str:
        """Prefix of every named resource of this environment."""
        return f"gpu-platform-{self.env}"

    @property
    def data_bucket(self) -> str:
        """The datasets and checkpoints bucket (created by the storage stack)."""
        return f"{self.prefix}-data-{self.account}-{self.region}"

    @property
    def trail_name(self) -> str:
        return f"{self.prefix}-trail"

    @property
    def permissions_boundary(self) -> str:
        """Managed policy applied as permissions boundary to every role of the app."""
        return f"{self.prefix}-boundary"

    @property
    def node_log_group_prefix(self) -> str:
        """Log groups a GPU node writes to (bootstrap, GPU health, Spot watcher)."""
        return f"/gpu-platform/{self.env}/node/"

    @property
    def metrics_namespace(self) -> str:
        """CloudWatch namespace of the node agent's metrics."""
        return f"GpuPlatform/{self.env}"

    @property
    def asg_name_prefix(self) -> str:
        """Every Auto Scaling group of the platform is named with this prefix."""
        return f"{self.prefix}-"

    @property
    def ssm_parameter_prefix(self) -> str:
        """SSM parameters of the environment (file system ids, ...); the AMI id is under ``/imagebuilder/``."""
        return f"/gpu-platform/{self.env}/"

    @property
    def ami_parameter(self) -> str:
        """The AMI id fleets launch from: written by Image Builder's distribution, read at deploy time.

        It lives under ``/imagebuilder/`` because that is the one path Image Builder's
        service-linked role may write (``AWSServiceRoleForImageBuilder`` v27 allows
        ``ssm:PutParameter`` on ``parameter/imagebuilder/*`` only); a parameter elsewhere
        would need a pipeline execution role that re-grants everything the service role does.
        """
        return f"/imagebuilder/gpu-platform/{self.env}/ami/latest"

    @property
    def image_pipeline(self) -> str:
        """The Image Builder pipeline (and recipe, distribution, AMI name prefix) of a building environment."""
        return f"{self.prefix}-gpu-node"

    def image_pipeline_arn(self) -> str:
        return f"arn:aws:imagebuilder:{self.region}:{self.account}:image-pipeline/{self.image_pipeline}"

    def asg_name(self, fleet: str) -> str:
        return f"{self.asg_name_prefix}{fleet}"

    def node_log_group(self, log: str) -> str:
        return f"{self.node_log_group_prefix}{log}"

    def fleet_alarm(self, fleet: str, alarm: str) -> str:
        """A fleet's CloudWatch alarm (``gpu_constructs/observability/fleet_alarms.py``), e.g. ``health-check-failed``."""
        return f"{self.prefix}-{fleet}-{alarm}"

    @property
    def ami_rollout_document(self) -> str:
        """SSM Automation runbook that refreshes the fleets onto the AMI in ``ami_parameter``."""
        return f"{self.prefix}-ami-rollout"

    @property
    def ami_rollout_role(self) -> str:
        """Role the AMI rollout runbook runs as (named, so the boundary can let EventBridge pass it)."""
        return f"{self.prefix}-ami-rollout"

    @property
    def ami_rollout_rule(self) -> str:
        """EventBridge rule that starts the AMI rollout runbook when ``ami_parameter`` changes."""
        return f"{self.prefix}-ami-rollout"

    @property
    def image_build_failed_rule(self) -> str:
        """EventBridge rule that sends a failed or cancelled build of this environment's image to the alerts topic
        (``gpu-platform-<env>-*``: the name the alerts topic's policy admits)."""
        return f"{self.prefix}-image-build-failed"

    def stack_name(self, kind: str) -> str:
        """A stack of the environment, e.g. ``dev-Network``."""
        return f"{self.env}-{kind}"

    @property
    def default_sg_provider_role_pattern(self) -> str:
        """Names CloudFormation can give the role of CDK's default-security-group provider (logical id
        ``CustomVpcRestrictDefaultSGCustomResourceProviderRole...`` in the network stack, no explicit
        name): ``<stack>-<logical id, cut to fit 64 characters>-<suffix>``; the 26 characters kept here
        survive the cut for stack names up to 24 characters."""
        return f"{self.stack_name('Network')}-CustomVpcRestrictDefaultSG*"

    def node_role_name_pattern(self, security_stack_name: str) -> str:
        """Names CloudFormation can give the GPU node role (``GpuNodeRole`` in the security stack, no
        explicit name): ``<stack>-<logical id>-<suffix>``. The boundary names the role this way because it
        cannot reference the role's ARN: the role itself carries the boundary (a cycle)."""
        return f"{security_stack_name}-GpuNodeRole*"

    @property
    def budget_name(self) -> str:
        """The environment's AWS Budgets cost budget (config/budget.py)."""
        return f"{self.prefix}-monthly-cost"

    @property
    def dashboard_name(self) -> str:
        """The environment's CloudWatch dashboard (monitoring stack)."""
        return self.prefix

    @property
    def dashboard_url(self) -> str:
        """The dashboard in the CloudWatch console of the environment's region."""
        return (
            f"https://{self.region}.console.aws.amazon.com/cloudwatch/home?region={self.region}"
            f"#dashboards/dashboard/{self.dashboard_name}"
        )

    @property
    def alerts_topic(self) -> str:
        """The SNS topic every alarm, Spot notice and fleet notification goes to."""
        return f"{self.prefix}-alerts"

    @property
    def job_document(self) -> str:
        """SSM Command document that starts, inspects and stops a training job on a node (Fleets stack)."""
        return f"{self.prefix}-job"

    @property
    def job_log_group(self) -> str:
        """Log group of the training jobs' output, one stream per job and node (``job_log_stream``)."""
        return f"/gpu-platform/{self.env}/jobs"

    @staticmethod
    def job_log_stream(job: str, instance_id: str) -> str:
        """A job's output on one node: written by the node's job runner, read by ``gpu-platform job logs``."""
        return f"{job}/{instance_id}"

    @property
    def session_log_group(self) -> str:
        """Log group of Session Manager shell sessions."""
        return f"/gpu-platform/{self.env}/ssm-sessions"

    @property
    def session_document(self) -> str:
        """Session Manager preferences document operators start sessions with."""
        return f"{self.prefix}-session"

"""SecurityStack: keys, audit trail, hardened log buckets, the node role, the permissions boundary, and the
alerting that must outlive the fleets: the alerts topic with its subscriptions and the node log groups."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import CfnOutput, Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from constructs import Construct

from config import Environment
from config.naming import ResourceNames
from config.schema import ObjectLockMode
from gpu_constructs.observability.alerts_topic import AlertsTopic
from gpu_constructs.platform_fleet.site import NodeSecurity
from gpu_constructs.scheduler.login_role import SlurmLoginRole
from gpu_constructs.scheduler.slurm_scheduler import SlurmProfiles
from gpu_constructs.security.audit_trail import AuditTrail
from gpu_constructs.security.node_role import GpuNodeRole, NodeAccess
from gpu_constructs.security.permissions_boundary import PassRoleGrant, PlatformPermissionsBoundary
from gpu_constructs.security.platform_keys import PlatformKeys
from gpu_constructs.security.session_manager import SessionManagerLogging
from gpu_constructs.storage.hardened_bucket import AccessLogBucket, log_lifecycle
from stacks.base import PlatformStack, log_retention


class SecurityStack(PlatformStack):
    """Long-lived security resources of one environment.

    Attributes:
        logs_key, data_key, trail_key: customer-managed keys.
        boundary: the permissions boundary applied to every role of the environment.
        access_log_bucket: target of every bucket's server access logs.
        audit: the trail, its bucket and log group.
        node_role: role and instance profile of GPU nodes.
        slurm_profiles: with a ``slurm`` section, the instance profiles AWS PCS launches the Slurm fleets' nodes
            (the node role's policies, path ``/aws-pcs/``) and the login nodes with; else None.
        sessions: Session Manager preferences document and its log group.
        alerts_topic: the topic every alarm, Spot notice and fleet notification goes to (e-mail subscribers).
        node_log_groups: name -> the log group ``/gpu-platform/<env>/node/<name>`` the nodes' agent ships to.
        job_log_group: ``/gpu-platform/<env>/jobs``, the training jobs' output (one stream per job and node).

    The topic and the node and job log groups live here, in a stateful stack, not with the fleets: the
    fleet stack is the one replaced most often, and a replacement would fail on the groups' fixed
    names ("already exists") and make every subscriber confirm again.
    """

    def __init__(self, scope: Construct, construct_id: str, *, env: Environment, node_logs: Sequence[str]) -> None:
        super().__init__(
            scope, construct_id, env=env, stateful=True, description=f"GPU platform {env.name}: keys and audit"
        )
        names = ResourceNames.of(env)
        self._env, self._names = env, names
        keys = PlatformKeys(
            self,
            "Keys",
            env_name=env.name,
            alarm_prefix=f"{names.prefix}-",
            alerts_topic_name=names.alerts_topic,
            removal_policy=self.removal_policy,
            budgets=env.budget is not None,
        )
        self.logs_key, self.data_key, self.trail_key, self.alerts_key = keys.logs, keys.data, keys.trail, keys.alerts
        self.boundary = self._permissions_boundary()
        audit = env.audit
        lifecycle = log_lifecycle(transition_days=audit.log_transition_days, expiration_days=audit.log_expiration_days)
        self.access_log_bucket = AccessLogBucket(
            self, "AccessLogs", lifecycle_rules=lifecycle, removal_policy=self.removal_policy
        ).bucket
        self.audit = self._audit_trail(lifecycle)
        self.sessions = SessionManagerLogging(
            self,
            "Sessions",
            document_name=names.session_document,
            log_group_name=names.session_log_group,
            key=self.logs_key,
            log_retention=self.log_retention,
            removal_policy=self.removal_policy,
            run_as=env.slurm is not None,  # people reach the Slurm login nodes as themselves
        )
        # In every environment, trained on or not: a retained group with a fixed name must not come and
        # go with the fleets (a second create of the name fails).
        self.job_log_group = logs.LogGroup(
            self,
            "JobLog",
            log_group_name=names.job_log_group,
            encryption_key=self.logs_key,
            retention=log_retention(env.jobs.log_retention_days or env.logging.retention_days),
            removal_policy=self.removal_policy,
        )
        self.node_role = self._node_role("GpuNode")
        self.slurm_profiles = self._slurm_profiles() if env.slurm is not None else None
        self.alerts_topic = self._alerts_topic()
        self.node_log_groups = {name: self._node_log_group(name) for name in node_logs}

    def _permissions_boundary(self) -> iam.ManagedPolicy:
        """The boundary of every role of the environment, with the roles it may pass and to which service."""
        names = self._names
        role_arn = f"arn:{self.partition}:iam::{self._env.account}:role/"
        return PlatformPermissionsBoundary(
            self,
            "Boundary",
            policy_name=names.permissions_boundary,
            security_group_rule_roles=[role_arn + names.default_sg_provider_role_pattern],
            pass_roles=[
                # EventBridge starts the AMI rollout runbook as the runbook's role (fleet stack).
                PassRoleGrant("PassAmiRolloutRoleToSsm", [role_arn + names.ami_rollout_role], "ssm.amazonaws.com"),
                # The runbook's instance refreshes launch GPU nodes with the node role (below).
                PassRoleGrant(
                    "PassNodeRoleToEc2",
                    [role_arn + names.node_role_name_pattern(self.stack_name)],
                    "ec2.amazonaws.com",
                    wildcard_reason="The node role has no explicit name; CloudFormation names it <stack>-<logical id "
                    "GpuNodeRole...>-<suffix>, which only this stack's node role matches. The boundary cannot name "
                    "it by ARN: the role carries this boundary (a reference cycle).",
                ),
            ],
            pcs_nodes=self._env.slurm is not None,
        ).policy

    def _audit_trail(self, lifecycle: list[s3.LifecycleRule]) -> AuditTrail:
        """The trail, its bucket (object lock where configured) and log group, with the data bucket's events."""
        lock = self._env.audit.trail_object_lock
        retention = None
        if lock:
            days = Duration.days(lock.retention_days)
            retention = (
                s3.ObjectLockRetention.compliance(days)
                if lock.mode is ObjectLockMode.COMPLIANCE
                else s3.ObjectLockRetention.governance(days)
            )
        audit = AuditTrail(
            self,
            "Audit",
            trail_name=self._names.trail_name,
            trail_key=self.trail_key,
            logs_key=self.logs_key,
            access_log_bucket=self.access_log_bucket,
            lifecycle_rules=lifecycle,
            object_lock_retention=retention,
            log_retention=self.log_retention,
            removal_policy=self.removal_policy,
        )
        # The storage stack creates the data bucket under this name.
        audit.log_data_events_of(f"arn:{self.partition}:s3:::{self._names.data_bucket}")
        return audit

    def _node_role(self, construct_id: str, *, pcs: bool = False) -> GpuNodeRole:
        """The GPU nodes' role and instance profile (``pcs``: those AWS PCS launches a Slurm fleet's nodes with)."""
        names = self._names
        access = NodeAccess(
            data_bucket_name=names.data_bucket,
            metrics_namespace=names.metrics_namespace,
            node_log_group_prefix=names.node_log_group_prefix,
            session_log_group_arn=self.sessions.log_group.log_group_arn,
            job_log_group_arn=self.job_log_group.log_group_arn,
            asg_name_prefix=names.asg_name_prefix,
            ssm_parameter_prefix=names.ssm_parameter_prefix,
        )
        return GpuNodeRole(self, construct_id, access=access, data_key=self.data_key, logs_key=self.logs_key, pcs=pcs)

    def _slurm_profiles(self) -> SlurmProfiles:
        """The instance profiles AWS PCS launches the Slurm fleets' nodes and the login nodes with."""
        pcs_nodes = self._node_role("PcsNode", pcs=True)
        login = SlurmLoginRole(
            self, "SlurmLogin", session_log_group_arn=self.sessions.log_group.log_group_arn, logs_key=self.logs_key
        )
        return SlurmProfiles(compute=pcs_nodes.instance_profile, login=login.instance_profile)

    def _alerts_topic(self) -> sns.ITopic:
        """The topic every alarm, Spot notice and fleet notification goes to, and its ARN's output."""
        names = self._names
        topic = AlertsTopic(
            self,
            "Alerts",
            topic_name=names.alerts_topic,
            name_prefix=f"{names.prefix}-",
            key=self.alerts_key,
            emails=self._env.notifications.emails,
            removal_policy=self.removal_policy,
            budgets=self._env.budget is not None,
        ).topic
        CfnOutput(
            self,
            "AlertsTopicArn",
            value=topic.topic_arn,
            description=f"GPU platform {self._env.name}: SNS topic of every alarm, Spot notice and fleet notification",
        )
        return topic

    def _node_log_group(self, name: str) -> logs.LogGroup:
        """The log group ``/gpu-platform/<env>/node/<name>`` the nodes' agent ships the ``name`` log to."""
        return logs.LogGroup(
            self,
            f"NodeLog{name.title().replace('-', '')}",
            log_group_name=self._names.node_log_group(name),
            encryption_key=self.logs_key,
            retention=self.log_retention,
            removal_policy=self.removal_policy,
        )

    @property
    def node_security(self) -> NodeSecurity:
        """What the fleet stack's nodes take from this stack."""
        return NodeSecurity(
            node_role=self.node_role.role,
            instance_profile=self.node_role.instance_profile,
            volume_key=self.data_key,
            alerts_topic=self.alerts_topic,
            node_log_groups=self.node_log_groups,
            access_log_bucket=self.access_log_bucket,
            slurm_profiles=self.slurm_profiles,
        )

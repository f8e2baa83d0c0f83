"""Customer-managed KMS keys of one environment, each granted only to what uses it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

#: What a service needs to encrypt and decrypt with a key it was granted.
_USE = ["kms:Encrypt", "kms:Decrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:DescribeKey"]


def alarm_arns(stack: Stack, alarm_prefix: str) -> str:
    """Every CloudWatch alarm of this account and region whose name starts with ``alarm_prefix``."""
    return f"arn:{stack.partition}:cloudwatch:{stack.region}:{stack.account}:alarm:{alarm_prefix}*"


@dataclass(frozen=True)
class ServiceLinkedRole:
    """A service-linked role granted by ARN in a condition, so the policy is valid before the role exists."""

    arn: str
    account: str

    def statement(
        self, sid: str, actions: Sequence[str], conditions: Mapping[str, Mapping[str, str]] | None = None
    ) -> iam.PolicyStatement:
        merged: dict[str, dict[str, str]] = {
            "ArnEquals": {"aws:PrincipalArn": self.arn},
            "StringEquals": {"kms:CallerAccount": self.account},
        }
        for operator, keys in (conditions or {}).items():
            merged[operator] = {**merged.get(operator, {}), **keys}
        return iam.PolicyStatement(
            sid=sid,
            principals=[iam.AnyPrincipal()],
            actions=list(actions),
            resources=["*"],  # in a key policy, "*" is this key
            conditions=merged,
        )


def service_linked_role(stack: Stack, service: str, role_name: str) -> ServiceLinkedRole:
    """This account's service-linked role of ``service``, e.g. ``AWSServiceRoleForAutoScaling``."""
    arn = f"arn:{stack.partition}:iam::{stack.account}:role/aws-service-role/{service}/{role_name}"
    return ServiceLinkedRole(arn=arn, account=stack.account)


class PlatformKeys(Construct):
    """Four keys, rotation on, 30-day deletion window.

    The key policies keep CDK's default account statement (IAM policies of this
    account decide who else may use a key) and add only the service principals
    that must use each key without an IAM role of ours:

    - ``logs``: CloudWatch Logs of this account and region, for every log group.
    - ``data``: the Auto Scaling service-linked role, which encrypts the GPU
      nodes' EBS volumes with this key when it launches them (without the grant
      the launch fails), and FSx for Lustre's per-file-system S3 roles, which
      import from and export to the data bucket through S3.
    - ``trail``: CloudTrail, for this account's trails only.
    - ``alerts``: the alarms of this environment (``alarm_prefix``), EventBridge and
      Auto Scaling, which publish to the encrypted alerts topic.

    Service-linked roles are granted through ``aws:PrincipalArn`` with principal
    ``*`` held to this account (``kms:CallerAccount``), never named as principals:
    a key policy that names a role which does not exist yet is refused
    (``MalformedPolicyDocumentException``), and ``AWSServiceRoleForAutoScaling``
    exists only after the account's first Auto Scaling group.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        env_name: str,
        alarm_prefix: str,
        alerts_topic_name: str,
        removal_policy: RemovalPolicy,
        budgets: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.logs = self._key("Logs", env_name, "CloudWatch Logs", removal_policy)
        self.data = self._key("Data", env_name, "data bucket, FSx for Lustre, EBS volumes", removal_policy)
        self.trail = self._key("Trail", env_name, "CloudTrail", removal_policy)
        self.alerts = self._key("Alerts", env_name, "the alerts topic", removal_policy)
        autoscaling = service_linked_role(stack, "autoscaling.amazonaws.com", "AWSServiceRoleForAutoScaling")
        _grant_logs(self.logs, stack)
        _grant_data(self.data, stack, autoscaling)
        _grant_trail(self.trail, stack)
        _grant_alerts(self.alerts, stack, autoscaling, alarm_prefix=alarm_prefix, alerts_topic_name=alerts_topic_name)
        if budgets:
            _grant_budgets(self.alerts, stack, alerts_topic_name)

    def _key(self, construct_id: str, env_name: str, purpose: str, removal_policy: RemovalPolicy) -> kms.Key:
        return kms.Key(
            self,
            construct_id,
            alias=f"alias/gpu-platform/{env_name}/{construct_id.lower()}",
            description=f"GPU platform {env_name}: {purpose}",
            enable_key_rotation=True,
            pending_window=Duration.days(30),
            removal_policy=removal_policy,
        )


def _grant_logs(key: kms.Key, stack: Stack) -> None:
    """CloudWatch Logs of this account and region, for every log group."""
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="CloudWatchLogsOfThisAccount",
            principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
            actions=[a for a in _USE if a != "kms:DescribeKey"],
            resources=["*"],  # in a key policy, "*" is this key
            conditions={
                "ArnLike": {
                    "kms:EncryptionContext:aws:logs:arn": f"arn:{stack.partition}:logs:{stack.region}:{stack.account}:log-group:*"
                }
            },
        )
    )
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="CloudWatchLogsDescribesKey",  # DescribeKey carries no encryption context
            principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
            actions=["kms:DescribeKey"],
            resources=["*"],
        )
    )


def _grant_data(key: kms.Key, stack: Stack, autoscaling: ServiceLinkedRole) -> None:
    """Auto Scaling, for the nodes' EBS volumes, and FSx for Lustre's S3 roles, for the data bucket."""
    key.add_to_resource_policy(
        autoscaling.statement("AutoScalingEncryptsNodeVolumes", _USE)  # Auto Scaling user guide's two statements
    )
    key.add_to_resource_policy(
        autoscaling.statement(
            "AutoScalingGrantsForAttachedVolumes",
            ["kms:CreateGrant"],
            {"Bool": {"kms:GrantIsForAWSResource": "true"}},
        )
    )
    # FSx for Lustre reads and writes the SSE-KMS data bucket through a service-linked
    # role made per file system (AWSServiceRoleForFSxS3Access_fs-...), unknown until
    # the file system exists: match it by ARN pattern, through S3, from this account.
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="FsxLinkedRolesUseDataBucket",
            principals=[iam.AnyPrincipal()],
            actions=["kms:Decrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
            resources=["*"],
            conditions={
                "ArnLike": {
                    "aws:PrincipalArn": f"arn:{stack.partition}:iam::{stack.account}:role/aws-service-role/"
                    "s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_*"
                },
                "StringEquals": {
                    "kms:CallerAccount": stack.account,
                    "kms:ViaService": f"s3.{stack.region}.amazonaws.com",
                },
            },
        )
    )


def _grant_trail(key: kms.Key, stack: Stack) -> None:
    """CloudTrail, for this account's trails only."""
    trail_arns = f"arn:{stack.partition}:cloudtrail:*:{stack.account}:trail/*"
    cloudtrail = iam.ServicePrincipal("cloudtrail.amazonaws.com")
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="CloudTrailEncryptsThisAccountsTrails",
            principals=[cloudtrail],
            actions=["kms:GenerateDataKey*"],
            resources=["*"],
            conditions={
                "StringLike": {"kms:EncryptionContext:aws:cloudtrail:arn": trail_arns},
                "StringEquals": {"aws:SourceAccount": stack.account},
            },
        )
    )
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="CloudTrailDescribesKey",
            principals=[cloudtrail],
            actions=["kms:DescribeKey"],
            resources=["*"],
            conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
        )
    )


def _grant_alerts(
    key: kms.Key, stack: Stack, autoscaling: ServiceLinkedRole, *, alarm_prefix: str, alerts_topic_name: str
) -> None:
    """The publishers of the encrypted alerts topic: this environment's alarms, EventBridge, Auto Scaling.

    They need the key (SNS user guide, "Enable compatibility between event sources from AWS services
    and encrypted topics").
    """
    publish = ["kms:Decrypt", "kms:GenerateDataKey*"]
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="AlarmsOfThisEnvironmentPublishToAlerts",
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=publish,
            resources=["*"],
            conditions={
                "ArnLike": {"aws:SourceArn": alarm_arns(stack, alarm_prefix)},
                "StringEquals": {"aws:SourceAccount": stack.account},
            },
        )
    )
    # No source condition here: SNS documents aws:SourceAccount/SourceArn as unsupported in a key
    # policy for EventBridge-to-encrypted-topic delivery (the topic policy holds the rule to this account).
    # SNS encrypts with the topic's ARN as encryption context: the key serves EventBridge for that topic only.
    topic_arn = f"arn:{stack.partition}:sns:{stack.region}:{stack.account}:{alerts_topic_name}"
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="EventBridgePublishesToAlerts",
            principals=[iam.ServicePrincipal("events.amazonaws.com")],
            actions=publish,
            resources=["*"],
            conditions={"StringEquals": {"kms:EncryptionContext:aws:sns:topicArn": topic_arn}},
        )
    )
    # Auto Scaling notifications publish as the service-linked role (its managed policy allows
    # sns:Publish, not KMS): SNS requires the role, not a service principal, in the key policy.
    key.add_to_resource_policy(autoscaling.statement("AutoScalingPublishesToAlerts", publish))


def _grant_budgets(key: kms.Key, stack: Stack, alerts_topic_name: str) -> None:
    """AWS Budgets publishes its notifications to the encrypted alerts topic: SNS asks the key for it, with the
    topic's ARN as encryption context, which holds the grant to this topic (the topic policy holds the budget to
    this account)."""
    topic_arn = f"arn:{stack.partition}:sns:{stack.region}:{stack.account}:{alerts_topic_name}"
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="BudgetsPublishToAlerts",
            principals=[iam.ServicePrincipal("budgets.amazonaws.com")],
            actions=["kms:Decrypt", "kms:GenerateDataKey*"],
            resources=["*"],
            conditions={"StringEquals": {"kms:EncryptionContext:aws:sns:topicArn": topic_arn}},
        )
    )

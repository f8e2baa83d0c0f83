"""What every platform stack shares: its environment, its name, its zones."""

from __future__ import annotations

from aws_cdk import Environment as AwsEnvironment
from aws_cdk import RemovalPolicy, Stack, Tags
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_logs as logs
from constructs import Construct

from config import Environment
from config.naming import ResourceNames
from config.schema import LOG_RETENTION_DAYS

# RetentionDays lists its members in the same order as CloudWatch's allowed values.
#: Resource types whose Tags are create-only (CloudFormation registry schema): a tag edit would replace them.
CREATE_ONLY_TAGS = ("AWS::EC2::PlacementGroup",)

_RETENTION: dict[int, logs.RetentionDays] = dict(zip(LOG_RETENTION_DAYS, list(logs.RetentionDays), strict=False))


def log_retention(days: int) -> logs.RetentionDays:
    """CDK's retention for ``days``, one of CloudWatch Logs' periods (the config checks it)."""
    return _RETENTION[days]


class PlatformStack(Stack):
    """A stack named ``<env>-<Name>`` in the environment's account and region.

    Availability zones come from the config, so synth needs no context lookup.
    ``stateful`` stacks get termination protection where the environment protects
    stateful resources, and their resources take ``self.removal_policy``. The environment's
    cost-allocation tags are applied here, and only here: to the stack and to its resources.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, env: Environment, stateful: bool, description: str
    ) -> None:
        protect = stateful and env.protect_stateful_resources
        super().__init__(
            scope,
            construct_id,
            stack_name=ResourceNames.of(env).stack_name(construct_id),
            env=AwsEnvironment(account=env.account, region=env.region),
            termination_protection=protect,
            description=description,
            # The stack's own tags (manifest): CloudFormation propagates them to every resource at deploy, and
            # they cannot exclude a type. Placement groups are among them and their Tags are create-only, so the
            # stack carries the pinned set; the environment's editable tags reach resources through the template.
            tags=env.pinned_placement_group_tags,
        )
        # ... and in the template, on every taggable resource of the stack (CDK's tag aspect), except where
        # Tags is create-only: a placement group carries its own pinned set (Environment.placement_group_tags).
        for key, value in env.tags.items():
            Tags.of(self).add(key, value, exclude_resource_types=list(CREATE_ONLY_TAGS))
        self.config = env
        self.removal_policy = RemovalPolicy.RETAIN if protect else RemovalPolicy.DESTROY
        self.log_retention = log_retention(env.logging.retention_days)

    @property
    def availability_zones(self) -> list[str]:
        return list(self.config.availability_zones)


def stamp_readers(scope: Construct, what: str, identity: str) -> None:
    """Every alarm under ``scope`` reads ``what`` through another stack's output: its description carries that
    resource's identity (config/identity.py), so that a replacement of it updates the alarm in the same deploy."""
    for child in scope.node.find_all():
        if isinstance(child, cloudwatch.CfnAlarm):
            child.alarm_description = f"{child.alarm_description or ''} (reads {what} {identity})".strip()

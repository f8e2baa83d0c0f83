"""What every platform stack shares: its environment, its name, its zones."""

from __future__ import annotations

from aws_cdk import Environment as AwsEnvironment
from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_logs as logs
from constructs import Construct

from config import Environment
from config.schema import LOG_RETENTION_DAYS

# RetentionDays lists its members in the same order as CloudWatch's allowed values.
_RETENTION = dict(zip(LOG_RETENTION_DAYS, list(logs.RetentionDays), strict=False))


class PlatformStack(Stack):
    """A stack named ``<env>-<Name>`` in the environment's account and region.

    Availability zones come from the config, so synth needs no context lookup.
    ``stateful`` stacks get termination protection where the environment protects
    stateful resources, and their resources take ``self.removal_policy``.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, env: Environment, stateful: bool, description: str
    ) -> None:
        protect = stateful and env.protect_stateful_resources
        super().__init__(
            scope,
            construct_id,
            stack_name=f"{env.name}-{construct_id}",
            env=AwsEnvironment(account=env.account, region=env.region),
            termination_protection=protect,
            description=description,
            tags=dict(env.tags),  # stack tags: CloudFormation propagates them to every resource
        )
        self.config = env
        self.removal_policy = RemovalPolicy.RETAIN if protect else RemovalPolicy.DESTROY
        self.log_retention = _RETENTION[env.logging.retention_days]

    @property
    def availability_zones(self) -> list[str]:
        return list(self.config.availability_zones)

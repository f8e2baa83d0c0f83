"""A customer-managed KMS key for the platform's CloudWatch Logs log groups."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct


class LogsKey(Construct):
    """KMS key (rotation on) usable by CloudWatch Logs of this account and region only.

    Attributes:
        key: the key; pass it to log groups as ``encryption_key``.
    """

    def __init__(self, scope: Construct, construct_id: str, *, env_name: str, removal_policy: RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.key = kms.Key(
            self,
            "Key",
            alias=f"alias/gpu-platform/{env_name}/logs",
            description=f"GPU platform {env_name}: CloudWatch Logs encryption",
            enable_key_rotation=True,
            pending_window=Duration.days(30),
            removal_policy=removal_policy,
        )
        logs_principal = iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchLogsOfThisAccount",
                principals=[logs_principal],
                actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
                resources=["*"],  # in a key policy, "*" means this key
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": f"arn:{stack.partition}:logs:{stack.region}:{stack.account}:log-group:*"
                    }
                },
            )
        )

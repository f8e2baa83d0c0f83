"""The environment's alerts topic: KMS-encrypted, TLS-only, email subscriptions."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct


class AlertsTopic(Construct):
    """Attributes: topic."""

    def __init__(
        self, scope: Construct, construct_id: str, *, topic_name: str, key: kms.IKey, emails: Sequence[str]
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(self, "Topic", topic_name=topic_name, master_key=key, enforce_ssl=True)
        # EventBridge rules of this account (Spot notices) publish here; the key policy lets them encrypt.
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="EventBridgeOfThisAccountPublishes",
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={"StringEquals": {"aws:SourceAccount": Stack.of(self).account}},
            )
        )
        for address in emails:
            self.topic.add_subscription(subscriptions.EmailSubscription(address))

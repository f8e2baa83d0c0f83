"""The environment's alerts topic: KMS-encrypted, TLS-only, email subscriptions."""

from __future__ import annotations

from collections.abc import Sequence

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
        for address in emails:
            self.topic.add_subscription(subscriptions.EmailSubscription(address))

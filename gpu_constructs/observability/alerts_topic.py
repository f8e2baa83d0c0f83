"""The environment's alerts topic: KMS-encrypted, TLS-only, email subscriptions, open to its publishers."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from gpu_constructs.security.platform_keys import alarm_arns


class AlertsTopic(Construct):
    """A topic policy replaces SNS's default one, so every publisher is named here:

    - CloudWatch alarms of this account whose names start with ``name_prefix`` (alarm actions);
    - EventBridge rules of this account whose names start with ``name_prefix`` (Spot notices);
    - AWS Budgets notifications of this account, where the environment has a ``budget:``;
    - Auto Scaling notifications need no statement: they publish as the account's Auto Scaling
      service-linked role, whose managed policy allows ``sns:Publish``.

    Each publisher also needs the topic's key; ``PlatformKeys`` grants it on the alerts key.

    ``removal_policy`` applies to the topic and its subscriptions alike (a retained topic whose
    subscriptions were deleted would reach no one).

    Attributes: topic.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        topic_name: str,
        name_prefix: str,
        key: kms.IKey,
        emails: Sequence[str],
        removal_policy: RemovalPolicy,
        budgets: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.topic = sns.Topic(self, "Topic", topic_name=topic_name, master_key=key, enforce_ssl=True)
        self.topic.apply_removal_policy(removal_policy)
        this_account = {"aws:SourceAccount": stack.account}
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AlarmsOfThisEnvironmentPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={
                    "ArnLike": {"aws:SourceArn": alarm_arns(stack, name_prefix)},
                    "StringEquals": this_account,
                },
            )
        )
        rules = f"arn:{stack.partition}:events:{stack.region}:{stack.account}:rule/{name_prefix}*"
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="EventBridgeRulesOfThisEnvironmentPublish",
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={"ArnLike": {"aws:SourceArn": rules}, "StringEquals": this_account},
            )
        )
        if budgets:
            # AWS Cost Management user guide, "Creating an Amazon SNS topic for budget notifications": the account's
            # budgets publish as budgets.amazonaws.com with aws:SourceAccount and aws:SourceArn arn:aws:budgets::<account>:*.
            self.topic.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="BudgetsOfThisAccountPublish",
                    principals=[iam.ServicePrincipal("budgets.amazonaws.com")],
                    actions=["sns:Publish"],
                    resources=[self.topic.topic_arn],
                    conditions={
                        "ArnLike": {"aws:SourceArn": f"arn:{stack.partition}:budgets::{stack.account}:*"},
                        "StringEquals": this_account,
                    },
                )
            )
        for address in emails:
            subscription = self.topic.add_subscription(subscriptions.EmailSubscription(address))
            subscription.apply_removal_policy(removal_policy)

"""The environment's AWS Budgets cost budget: a monthly amount for the account and its notifications, each to the
alerts topic (the topic policy and its key admit budgets.amazonaws.com where the environment has a budget)."""

from __future__ import annotations

import hashlib
import json

from aws_cdk import aws_budgets as budgets
from aws_cdk import aws_sns as sns
from constructs import Construct

from config.budget import Budget


class CostBudget(Construct):
    """Attributes: budget (the L1: AWS Budgets has no higher-level construct), name.

    NotificationsWithSubscribers and BudgetName are create-only (CloudFormation registry schema): a change of the
    notifications replaces the budget, which a fixed name would make fail. The name therefore ends with a digest
    of the notifications, so a new set of percentages is a new budget beside the old one until the old is
    deleted; the amount changes in place."""

    def __init__(self, scope: Construct, construct_id: str, *, name: str, config: Budget, topic: sns.ITopic) -> None:
        super().__init__(scope, construct_id)
        self.name = f"{name}-{_digest(config)}"
        notifications = [
            *(_notification("ACTUAL", p, topic) for p in config.actual_percent),
            *(_notification("FORECASTED", p, topic) for p in config.forecast_percent),
        ]
        self.budget = budgets.CfnBudget(
            self,
            "Budget",
            budget=budgets.CfnBudget.BudgetDataProperty(
                budget_name=self.name,
                budget_type="COST",
                time_unit="MONTHLY",
                budget_limit=budgets.CfnBudget.SpendProperty(amount=config.monthly_usd, unit="USD"),
            ),
            notifications_with_subscribers=notifications,
        )


def _digest(config: Budget) -> str:
    text = json.dumps([config.actual_percent, config.forecast_percent])
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _notification(kind: str, percent: int, topic: sns.ITopic) -> budgets.CfnBudget.NotificationWithSubscribersProperty:
    return budgets.CfnBudget.NotificationWithSubscribersProperty(
        notification=budgets.CfnBudget.NotificationProperty(
            notification_type=kind, comparison_operator="GREATER_THAN", threshold=percent, threshold_type="PERCENTAGE"
        ),
        subscribers=[budgets.CfnBudget.SubscriberProperty(subscription_type="SNS", address=topic.topic_arn)],
    )

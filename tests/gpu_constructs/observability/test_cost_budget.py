"""CostBudget: a monthly COST budget of the configured amount, one notification per percentage (actual, then
forecast), each to the topic given."""

from __future__ import annotations

from aws_cdk import aws_sns as sns

from config.budget import Budget
from gpu_constructs.observability.cost_budget import CostBudget
from tests.gpu_constructs.helpers import bare_stack, template


def test_the_budget_notifies_the_topic_at_each_percentage() -> None:
    stack = bare_stack()
    topic = sns.Topic(stack, "Topic")
    made = CostBudget(stack, "Budget", name="gpu-platform-dev-monthly-cost",
               config=Budget(monthly_usd=1200, actual_percent=[50, 90], forecast_percent=[100]), topic=topic)  # fmt: skip
    ((props,),) = [[r["Properties"] for r in template(stack).find_resources("AWS::Budgets::Budget").values()]]
    assert props["Budget"] == {
        "BudgetName": made.name,
        "BudgetType": "COST",
        "TimeUnit": "MONTHLY",
        "BudgetLimit": {"Amount": 1200, "Unit": "USD"},
    }
    notifications = [
        (n["Notification"]["NotificationType"], n["Notification"]["Threshold"], n["Notification"]["ComparisonOperator"])
        for n in props["NotificationsWithSubscribers"]
    ]
    assert notifications == [
        ("ACTUAL", 50, "GREATER_THAN"),
        ("ACTUAL", 90, "GREATER_THAN"),
        ("FORECASTED", 100, "GREATER_THAN"),
    ]
    topic_ref = stack.resolve(topic.topic_arn)
    for n in props["NotificationsWithSubscribers"]:
        assert n["Notification"]["ThresholdType"] == "PERCENTAGE"
        assert n["Subscribers"] == [{"SubscriptionType": "SNS", "Address": topic_ref}]


def test_a_new_set_of_percentages_is_a_new_name_the_amount_is_not() -> None:
    """NotificationsWithSubscribers is create-only: its replacement must not collide with the budget it replaces."""

    def name(**fields: object) -> str:
        stack = bare_stack()
        budget = Budget.model_validate({"monthly_usd": 100, **fields})
        return CostBudget(stack, "B", name="b", config=budget, topic=sns.Topic(stack, "T")).name

    assert name() == name(monthly_usd=900) != name(actual_percent=[90])
    assert name().startswith("b-")

"""Every alarm, Spot notice and fleet notification reaches a person, through every resource on its way.

alarm action / rule target / group notification -> the topic (in whichever stack) -> the topic policy
(the publisher with the request context its service sends) -> the topic's KMS key -> the key policy
(``kms:GenerateDataKey*`` and ``kms:Decrypt`` for that publisher) -> an e-mail subscription from config.

What each publisher sends, per AWS documentation: CloudWatch alarms publish as
``cloudwatch.amazonaws.com`` with ``aws:SourceArn`` (the alarm) and ``aws:SourceAccount``, and may be
held to both in the topic and the key policy; EventBridge publishes as ``events.amazonaws.com`` with
both keys at the topic, but its KMS requests carry neither (SNS: not supported for EventBridge to
encrypted topics); Auto Scaling publishes as its service-linked role, whose managed policy allows
``sns:Publish`` and nothing on KMS.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.flows.alert_path import reaches_a_person as _reaches_a_person
from tests.flows.assembly import AUTOSCALING_ROLE_PUBLISHES, Environment, Ref, autoscaling_role
from tests.policy_eval import Request, key_policy_may, service_may
from tests.synth import Synth

ENVS = ["dev", "staging", "prod"]
ALARMS = ("AWS::CloudWatch::Alarm", "AWS::CloudWatch::CompositeAlarm")
ACTIONS = ("AlarmActions", "OKActions", "InsufficientDataActions")


def _topic_of(env: Environment, stack: str, reference: Any) -> Ref | None:
    ref = env.target(stack, reference)
    return ref if ref is not None and env.resource(ref)["Type"] == "AWS::SNS::Topic" else None


def _key_of(environment: Environment, topic: Ref) -> Any:
    return environment.resource(topic)["Properties"]["KmsMasterKeyId"]


@pytest.mark.parametrize("env", ENVS)
def test_every_alarm_action_reaches_a_person(synth: Synth, env: str) -> None:
    environment = Environment(synth, env)
    followed = 0
    for type_ in ALARMS:
        for ref, alarm in environment.resources(type_):
            props = alarm["Properties"]
            topics = {
                topic
                for action in ACTIONS
                for reference in props.get(action, [])
                if (topic := _topic_of(environment, ref.stack, reference)) is not None
            }
            if not topics:
                continue
            name = props["AlarmName"]
            assert isinstance(name, str), f"{ref}: the alarm's ARN must be known to hold it in the topic policy"
            source = {
                "aws:SourceArn": f"arn:aws:cloudwatch:{environment.region}:{environment.account}:alarm:{name}",
                "aws:SourceAccount": environment.account,
            }
            publish = Request("sns:Publish", "", {"Service": "cloudwatch.amazonaws.com"}, source)
            for topic in topics:
                _reaches_a_person(environment, topic, publish, source)
                followed += 1
    assert followed >= 10, "the walk found the alarms"


@pytest.mark.parametrize("env", ENVS)
def test_an_alarm_of_another_account_or_environment_cannot_publish(synth: Synth, env: str) -> None:
    environment = Environment(synth, env)
    ((topic, _),) = environment.resources("AWS::SNS::Topic")
    policy = environment.policy_of("AWS::SNS::TopicPolicy", "Topics", topic)
    arn = environment.resolver(topic.stack)._arn(topic.logical_id)
    cloudwatch = {"Service": "cloudwatch.amazonaws.com"}
    for account, alarm in (("999999999999", f"gpu-platform-{env}-x"), (environment.account, "someone-elses-alarm")):
        source = {
            "aws:SourceArn": f"arn:aws:cloudwatch:{environment.region}:{account}:alarm:{alarm}",
            "aws:SourceAccount": account,
            "aws:SecureTransport": True,
        }
        assert not service_may(policy, Request("sns:Publish", arn, cloudwatch, source))


@pytest.mark.parametrize("env", ENVS)
def test_every_rule_targeting_a_topic_reaches_a_person(synth: Synth, env: str) -> None:
    environment = Environment(synth, env)
    followed = 0
    for ref, rule in environment.resources("AWS::Events::Rule"):
        for target in rule["Properties"].get("Targets", []):
            topic = _topic_of(environment, ref.stack, target["Arn"])
            if topic is None:
                continue
            assert "RoleArn" not in target, "SNS targets use the topic policy (EventBridge user guide)"
            name = rule["Properties"]["Name"]
            source = {
                "aws:SourceArn": f"arn:aws:events:{environment.region}:{environment.account}:rule/{name}",
                "aws:SourceAccount": environment.account,
            }
            publish = Request("sns:Publish", "", {"Service": "events.amazonaws.com"}, source)
            _reaches_a_person(environment, topic, publish, kms_context={})  # no source keys reach KMS
            # The key serves EventBridge for this topic only: another topic's context is refused.
            key_policy = environment.key_policy(environment.target(topic.stack, _key_of(environment, topic)))
            other = {
                "kms:EncryptionContext:aws:sns:topicArn": f"arn:aws:sns:{environment.region}:{environment.account}:x"
            }
            call = Request("kms:GenerateDataKey", "*", {"Service": "events.amazonaws.com"}, other)
            assert not key_policy_may(key_policy, call)
            followed += 1
    assert followed >= 1, "the Spot notices rule targets the alerts topic"


@pytest.mark.parametrize("env", ENVS)
def test_every_group_notification_reaches_a_person(synth: Synth, env: str) -> None:
    environment = Environment(synth, env)
    role = autoscaling_role(environment.account)
    followed = 0
    for ref, group in environment.resources("AWS::AutoScaling::AutoScalingGroup"):
        for notification in group["Properties"].get("NotificationConfigurations", []):
            topic = _topic_of(environment, ref.stack, notification["TopicARN"])
            assert topic is not None, f"{ref} notifies something that is not a topic of this environment"
            publish = Request("sns:Publish", "", {"AWS": role}, {"aws:PrincipalArn": role})
            kms_context = {"aws:PrincipalArn": role, "kms:CallerAccount": environment.account}
            _reaches_a_person(environment, topic, publish, kms_context, identity=[AUTOSCALING_ROLE_PUBLISHES])
            followed += 1
    assert followed == len(environment.config.fleets)


@pytest.mark.parametrize("env", ENVS)
def test_every_budget_notification_reaches_a_person(synth: Synth, env: str) -> None:
    """AWS Budgets publishes as budgets.amazonaws.com with the budget's ARN and account (AWS Cost Management user
    guide, budget notifications to SNS); SNS asks the topic's key for it with the topic as encryption context."""
    environment = Environment(synth, env)
    budgets = environment.resources("AWS::Budgets::Budget")
    if environment.config.budget is None:
        assert budgets == []
        return
    ((ref, budget),) = budgets
    props = budget["Properties"]
    name = props["Budget"]["BudgetName"]
    assert props["Budget"]["BudgetLimit"] == {"Amount": environment.config.budget.monthly_usd, "Unit": "USD"}
    source = {
        "aws:SourceArn": f"arn:aws:budgets::{environment.account}:budget/{name}",
        "aws:SourceAccount": environment.account,
    }
    publish = Request("sns:Publish", "", {"Service": "budgets.amazonaws.com"}, source)
    expected = [("ACTUAL", p) for p in environment.config.budget.actual_percent]
    expected += [("FORECASTED", p) for p in environment.config.budget.forecast_percent]
    seen = []
    for entry in props["NotificationsWithSubscribers"]:
        seen.append((entry["Notification"]["NotificationType"], entry["Notification"]["Threshold"]))
        (subscriber,) = entry["Subscribers"]
        assert subscriber["SubscriptionType"] == "SNS"
        topic = _topic_of(environment, ref.stack, subscriber["Address"])
        assert topic is not None, f"{ref}: a budget notification goes to a topic of this environment"
        _reaches_a_person(environment, topic, publish, {})
    assert seen == expected


@pytest.mark.parametrize("env", ENVS)
def test_a_budget_of_another_account_cannot_publish(synth: Synth, env: str) -> None:
    environment = Environment(synth, env)
    ((topic, _),) = environment.resources("AWS::SNS::Topic")
    policy = environment.policy_of("AWS::SNS::TopicPolicy", "Topics", topic)
    arn = environment.resolver(topic.stack)._arn(topic.logical_id)
    source = {
        "aws:SourceArn": "arn:aws:budgets::999999999999:budget/x",
        "aws:SourceAccount": "999999999999",
        "aws:SecureTransport": True,
    }
    assert not service_may(policy, Request("sns:Publish", arn, {"Service": "budgets.amazonaws.com"}, source))

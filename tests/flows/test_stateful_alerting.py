"""The alerts topic, its subscriptions and the node log groups outlive a replaced fleet stack.

Recreating ``<env>-Fleets`` must not fail on a fixed name that already exists (a retained log
group) nor make the subscribers confirm again: these resources live in the stateful security
stack, which deploys before the fleets and the monitoring, and is protected where configured.
"""

from __future__ import annotations

import pytest

from config.naming import ResourceNames
from gpu_constructs.fleet.render.node_logs import NODE_LOGS
from tests.flows.assembly import Environment
from tests.synth import Synth

ENVS = ["dev", "staging", "prod"]
ALERTING = ("AWS::SNS::Topic", "AWS::SNS::TopicPolicy", "AWS::SNS::Subscription")


@pytest.mark.parametrize("env", ENVS)
def test_the_fleet_stack_holds_no_topic_subscription_or_named_log_group(synth: Synth, env: str) -> None:
    fleets = synth.stack(env, "Fleets")
    for type_ in ALERTING:
        assert fleets.resources(type_) == {}, type_
    named = [k for k, v in fleets.resources("AWS::Logs::LogGroup").items() if "LogGroupName" in v["Properties"]]
    assert named == []


@pytest.mark.parametrize("env", ENVS)
def test_the_security_stack_holds_them_protected_where_configured(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    names = ResourceNames.of(cfg)
    security = synth.stack(env, "Security")
    assert security.manifest["properties"].get("terminationProtection", False) is cfg.protect_stateful_resources
    deletion = "Retain" if cfg.protect_stateful_resources else "Delete"

    (topic,) = security.resources("AWS::SNS::Topic").values()
    assert topic["Properties"]["TopicName"] == f"{names.prefix}-alerts"
    subscriptions = security.resources("AWS::SNS::Subscription").values()
    assert sorted(s["Properties"]["Endpoint"] for s in subscriptions) == sorted(cfg.notifications.emails)
    for resource in (topic, *subscriptions):
        assert resource.get("DeletionPolicy", "Delete") == deletion

    groups = {
        v["Properties"]["LogGroupName"]: v
        for v in security.resources("AWS::Logs::LogGroup").values()
        if str(v["Properties"].get("LogGroupName", "")).startswith(names.node_log_group_prefix)
    }
    assert sorted(groups) == sorted(names.node_log_group(name) for name in NODE_LOGS)
    for group in groups.values():
        assert group["DeletionPolicy"] == deletion
        assert group["Properties"]["RetentionInDays"] == cfg.logging.retention_days
        assert "KeysLogs" in group["Properties"]["KmsKeyId"]["Fn::GetAtt"][0]


@pytest.mark.parametrize("env", ENVS)
def test_they_deploy_before_the_fleets_and_the_monitoring_that_use_them(synth: Synth, env: str) -> None:
    environment = Environment(synth, env)
    order = environment.deploy_order
    security = f"{env}-Security"
    for user in (f"{env}-Fleets", f"{env}-Monitoring"):
        assert order.index(security) < order.index(user)
        # The user reads the topic from the security stack, not from a stack replaced with it.
        producers = set()
        for type_ in ("AWS::AutoScaling::AutoScalingGroup", "AWS::CloudWatch::Alarm"):
            for ref, res in environment.resources(type_):
                props = res["Properties"]
                references = [n["TopicARN"] for n in props.get("NotificationConfigurations", [])]
                for reference in [*references, *props.get("AlarmActions", [])] if ref.stack == user else []:
                    target = environment.target(user, reference)
                    if target is not None and environment.resource(target)["Type"] == "AWS::SNS::Topic":
                        producers.add(target.stack)
        assert producers == {security}, (user, producers)

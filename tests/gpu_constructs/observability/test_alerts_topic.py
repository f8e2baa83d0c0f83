"""AlertsTopic with PlatformKeys and AlarmFactory: an alarm of this environment reaches the topic (its action,
the topic policy, the topic's key); an alarm of another prefix or account is refused at the topic; the topic
takes TLS only and e-mails its subscribers."""

from __future__ import annotations

import pytest
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk.assertions import Template

from gpu_constructs.observability.alarm_factory import ABOVE, AlarmFactory
from gpu_constructs.observability.alerts_topic import AlertsTopic
from gpu_constructs.security.platform_keys import PlatformKeys
from tests.gpu_constructs.helpers import ACCOUNT, ALARMS, DESTROY, REGION, bare_stack, document, only, template
from tests.policy_eval import Request, key_policy_may, service_may

PREFIX = "gpu-platform-dev"


@pytest.fixture(scope="module")
def tmpl() -> Template:
    stack = bare_stack()
    keys = PlatformKeys(
        stack, "Keys", env_name="dev", alarm_prefix=PREFIX, alerts_topic_name=f"{PREFIX}-alerts", removal_policy=DESTROY
    )
    alerts = AlertsTopic(stack, "Alerts", topic_name=f"{PREFIX}-alerts", name_prefix=PREFIX, key=keys.alerts,
                         emails=["oncall@example.com"], removal_policy=DESTROY)  # fmt: skip
    factory = AlarmFactory(prefix=PREFIX, topic=alerts.topic)
    metric = cloudwatch.Metric(namespace="GpuPlatform/dev", metric_name="Probe")
    factory.metric_alarm(stack, "Probe", name="probe", description="d", metric=metric,
                         threshold=ALARMS.gpu_utilization_high, comparison=ABOVE)  # fmt: skip
    return template(stack)


def _publish(tmpl: Template, alarm_arn: str, account: str = ACCOUNT, secure: bool = True) -> tuple[Request, Request]:
    topic_arn = f"arn:aws:sns:{REGION}:{ACCOUNT}:{PREFIX}-alerts"
    context = {"aws:SourceArn": alarm_arn, "aws:SourceAccount": account, "aws:SecureTransport": secure}
    principal = {"Service": "cloudwatch.amazonaws.com"}
    return Request("sns:Publish", topic_arn, principal, context), Request(
        "kms:GenerateDataKey", "*", principal, context
    )


def test_an_alarm_of_this_environment_reaches_the_topic_through_policy_and_key(tmpl: Template) -> None:
    _, alarm = only(tmpl, "AWS::CloudWatch::Alarm")
    topic_id, _ = only(tmpl, "AWS::SNS::Topic")
    name = alarm["Properties"]["AlarmName"]
    assert name == f"{PREFIX}-probe"
    assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic_id}] == alarm["Properties"]["OKActions"]
    (policy_id,) = tmpl.find_resources("AWS::SNS::TopicPolicy")
    topic_policy = document(tmpl, policy_id)
    (key_id,) = [k for k in tmpl.find_resources("AWS::KMS::Key") if k.startswith("KeysAlerts")]
    key_policy = document(tmpl, key_id, "KeyPolicy")
    assert only(tmpl, "AWS::SNS::Topic")[1]["Properties"]["KmsMasterKeyId"]["Fn::GetAtt"][0] == key_id

    publish, use_key = _publish(tmpl, f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:{name}")
    assert service_may(topic_policy, publish) and key_policy_may(key_policy, use_key)
    other_env, _ = _publish(tmpl, f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:gpu-platform-prod-probe")
    assert not service_may(topic_policy, other_env)
    other_account, _ = _publish(tmpl, f"arn:aws:cloudwatch:{REGION}:222222222222:alarm:{name}", "222222222222")
    assert not service_may(topic_policy, other_account)
    plain_http, _ = _publish(tmpl, f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:{name}", secure=False)
    assert not service_may(topic_policy, plain_http)


def test_eventbridge_rules_of_this_environment_publish(tmpl: Template) -> None:
    (policy_id,) = tmpl.find_resources("AWS::SNS::TopicPolicy")
    topic_policy = document(tmpl, policy_id)
    topic_arn = f"arn:aws:sns:{REGION}:{ACCOUNT}:{PREFIX}-alerts"

    def rule(name: str) -> Request:
        context = {"aws:SourceArn": f"arn:aws:events:{REGION}:{ACCOUNT}:rule/{name}", "aws:SourceAccount": ACCOUNT,
                   "aws:SecureTransport": True}  # fmt: skip
        return Request("sns:Publish", topic_arn, {"Service": "events.amazonaws.com"}, context)

    assert service_may(topic_policy, rule(f"{PREFIX}-spot-notices"))
    assert not service_may(topic_policy, rule("someone-elses-rule"))


def test_subscribers_get_email(tmpl: Template) -> None:
    tmpl.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "oncall@example.com"})

"""The last hops of an alert: a publisher's request through the topic policy and the topic's key policy to an
e-mail subscriber (tests/flows/test_alerts_reach_a_person.py, tests/flows/test_image_build_alerts.py)."""

from __future__ import annotations

from typing import Any

from tests.flows.assembly import Environment, Ref
from tests.policy_eval import Request, explain, key_policy_may, same_account_may, service_may

#: What SNS asks KMS for on the publisher's behalf.
KMS_CALLS = ("kms:GenerateDataKey", "kms:Decrypt")


def reaches_a_person(
    env: Environment,
    topic: Ref,
    publish: Request,
    kms_context: dict[str, Any],
    *,
    identity: list[dict[str, Any]] | None = None,
) -> None:
    """The topic admits ``publish``, its key admits the publisher's KMS calls, and someone is subscribed."""
    topic_arn = env.resolver(topic.stack)._arn(topic.logical_id)
    request = Request("sns:Publish", topic_arn, publish.principal, {"aws:SecureTransport": True, **publish.context})
    topic_policy = env.policy_of("AWS::SNS::TopicPolicy", "Topics", topic)
    if identity is None:
        assert service_may(topic_policy, request), explain([topic_policy], request, resource_policy=True)
    else:
        assert same_account_may(topic_policy, identity, request), explain([topic_policy], request, resource_policy=True)
    key = env.target(topic.stack, env.resource(topic)["Properties"]["KmsMasterKeyId"])
    assert key is not None, f"{topic} is not encrypted with a key of this environment"
    key_policy = env.key_policy(key)
    # SNS calls KMS for the publisher with the topic's ARN as encryption context (SNS developer guide, SSE).
    context = {"kms:EncryptionContext:aws:sns:topicArn": topic_arn, **kms_context}
    for action in KMS_CALLS:
        call = Request(action, "*", publish.principal, context)
        assert key_policy_may(key_policy, call), explain([key_policy], call, resource_policy=True)
    emails = [
        res["Properties"]["Endpoint"]
        for ref, res in env.resources("AWS::SNS::Subscription")
        if env.target(ref.stack, res["Properties"]["TopicArn"]) == topic and res["Properties"]["Protocol"] == "email"
    ]
    assert emails and sorted(emails) == sorted(env.config.notifications.emails), (topic, emails)

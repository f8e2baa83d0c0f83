"""BuildFailureAlerts: one rule on this image's failed or stopped builds, to the topic by ARN (no looser grant of a
CDK target), with a message that names the image and its logs."""

from __future__ import annotations

import json

from aws_cdk import aws_sns as sns

from gpu_constructs.image.build_alerts import (
    ALERT_STATUSES,
    DETAIL_TYPE,
    BuildFailureAlerts,
    BuildLogPlaces,
    message,
)
from tests.gpu_constructs.helpers import ACCOUNT, REGION, bare_stack, only, resolved, template

LOGS = BuildLogPlaces("/aws/imagebuilder/img", "/aws/imagebuilder/pipeline/img", "bucket", "image-builder")


def test_failed_or_stopped_builds_of_this_image_go_to_the_topic_with_a_message() -> None:
    stack = bare_stack()
    topic = sns.Topic(stack, "Topic")
    BuildFailureAlerts(
        stack, "Alerts", rule_name="gpu-platform-dev-image-build-failed", image_name="img", topic=topic, logs=LOGS
    )
    tmpl = template(stack)
    topic_id, _ = only(tmpl, "AWS::SNS::Topic")
    _, rule = only(tmpl, "AWS::Events::Rule")
    props = rule["Properties"]
    assert props["Name"] == "gpu-platform-dev-image-build-failed" and props["State"] == "ENABLED"
    pattern = resolved(tmpl, props["EventPattern"])
    assert pattern == {
        "source": ["aws.imagebuilder"],
        "detail-type": [DETAIL_TYPE],
        "resources": [{"prefix": f"arn:aws:imagebuilder:{REGION}:{ACCOUNT}:image/img/"}],
        "detail": {"state": {"status": list(ALERT_STATUSES)}},
    }
    (target,) = props["Targets"]
    assert target["Arn"] == {"Ref": topic_id} and "RoleArn" not in target
    transformer = target["InputTransformer"]
    assert transformer["InputPathsMap"] == {
        "image": "$.resources[0]",
        "status": "$.detail.state.status",
        "reason": "$.detail.state.reason",
        "stage": "$.detail.previous-state.status",
        "time": "$.time",
    }
    assert transformer["InputTemplate"] == message("img", LOGS)
    tmpl.resource_count_is("AWS::SNS::TopicPolicy", 0)


def test_the_message_is_one_json_string_naming_the_logs() -> None:
    text = json.loads(message("img", LOGS))
    assert isinstance(text, str) and "\n" not in text
    for needed in (
        "<image>",
        "<status>",
        "<reason>",
        "<stage>",
        "/aws/imagebuilder/img",
        "s3://bucket/image-builder/",
        "/aws/imagebuilder/pipeline/img",
    ):
        assert needed in text


def test_the_message_says_a_build_ended_while_distributing_may_have_reached_some_targets() -> None:
    """A FAILED during distribution comes after the AMI was made: some targets may have its copy already."""
    text = json.loads(message("img", LOGS))
    assert "while <stage>: <reason>." in text
    assert "Ended while DISTRIBUTING: the AMI passed its tests and may have been distributed to some targets" in text
    assert "no new AMI was distributed" not in text

"""A failed or stopped golden-AMI build reaches a person, in every environment that builds.

event -> the Image stack's rule (its pattern, evaluated by moto's EventBridge pattern matcher, takes a FAILED or
CANCELLED state change of this environment's image and nothing else) -> its input transformer (the message: which
image, its status, where its logs are, each a resource of the stack) -> the alerts topic (Security stack) -> the
topic policy, the key policy and the e-mail subscription (tests/flows/test_alerts_reach_a_person.py).

The event has the shape of the EC2 Image Builder user guide's example ("Event messages that Image Builder sends",
EC2 Image Builder Image State Change): source aws.imagebuilder, the image's ARN in ``resources``,
``detail.state.status``.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from moto.events.models import EventPattern

from config.naming import ResourceNames
from tests.flows.alert_path import reaches_a_person as _reaches_a_person
from tests.flows.assembly import Environment, Ref
from tests.policy_eval import Request
from tests.synth import Synth

ENVS = ["dev", "staging", "prod"]


REASON = "Workflow Step Failed: BuildImage step execution failed: component gpu-platform-dev-efa failed"


def _event(environment: Environment, image: str, status: str, stage: str = "TESTING") -> dict[str, Any]:
    arn = f"arn:aws:imagebuilder:{environment.region}:{environment.account}:image/{image}/1.0.123456/1"
    return {
        "version": "0",
        "id": "a1b2c3d4-5678-90ab-cdef-EXAMPLE11111",
        "detail-type": "EC2 Image Builder Image State Change",
        "source": "aws.imagebuilder",
        "account": environment.account,
        "time": "2026-11-22T03:41:07Z",
        "region": environment.region,
        "resources": [arn],
        "detail": {"previous-state": {"status": stage}, "state": {"status": status, "reason": REASON}},
    }


def _path(event: dict[str, Any], path: str) -> Any:
    """The value of an InputPathsMap path such as ``$.detail.state.status`` or ``$.resources[0]``."""
    value: Any = event
    for name, index in re.findall(r"\.([\w-]+)(?:\[(\d+)\])?", path):
        value = value[name] if not index else value[name][int(index)]
    return value


def render(transformer: dict[str, Any], event: dict[str, Any]) -> str:
    """What SNS receives: the input template with each <name> replaced, as the JSON string it is."""
    text = transformer["InputTemplate"]
    for name, path in transformer["InputPathsMap"].items():
        text = text.replace(f"<{name}>", str(_path(event, path)))
    assert not re.search(r"<[a-z]+>", text), f"a placeholder is left: {text}"
    return json.loads(text)


def _rule(environment: Environment, name: str) -> tuple[Ref, dict[str, Any]] | None:
    found = [(ref, r) for ref, r in environment.resources("AWS::Events::Rule") if r["Properties"].get("Name") == name]
    assert len(found) <= 1
    return found[0] if found else None


def _declared(environment: Environment, stack: str, type_: str, key: str) -> set[str]:
    return {r["Properties"].get(key) for r in environment.stacks[stack].resources(type_).values()}


@pytest.mark.parametrize("env", ENVS)
def test_a_failed_or_stopped_build_reaches_a_person_with_where_to_look(synth: Synth, env: str) -> None:
    environment = Environment(synth, env)
    names = ResourceNames.of(environment.config)
    found = _rule(environment, names.image_build_failed_rule)
    if not environment.config.image.build:
        assert found is None, "an environment that does not build has no build to watch"
        return
    assert found is not None
    ref, rule = found
    image = f"{names.prefix}-gpu-node"
    assert image in _declared(environment, ref.stack, "AWS::ImageBuilder::ImageRecipe", "Name")
    pattern = EventPattern.load(json.dumps(environment.resolve(ref, rule["Properties"]["EventPattern"])))
    for status in ("FAILED", "CANCELLED"):
        assert pattern.matches_event(_event(environment, image, status)), status
    for status in ("AVAILABLE", "BUILDING", "TESTING"):
        assert not pattern.matches_event(_event(environment, image, status)), status
    assert not pattern.matches_event(_event(environment, "someone-elses-image", "FAILED"))
    other_source = {**_event(environment, image, "FAILED"), "source": "aws.ec2"}
    assert not pattern.matches_event(other_source)

    (target,) = rule["Properties"]["Targets"]
    failed = _event(environment, image, "FAILED")
    message = render(environment.resolve(ref, target["InputTransformer"]), copy.deepcopy(failed))
    log_group, pipeline_group = f"/aws/imagebuilder/{image}", f"/aws/imagebuilder/pipeline/{image}"
    bucket = f"{names.prefix}-image-logs-{environment.account}-{environment.region}"
    for needed in (failed["resources"][0], "FAILED", log_group, pipeline_group, f"s3://{bucket}/image-builder/"):
        assert needed in message, (needed, message)
    assert f"ended FAILED at {failed['time']} while TESTING: {REASON}." in message
    distributing = render(
        environment.resolve(ref, target["InputTransformer"]), _event(environment, image, "FAILED", "DISTRIBUTING")
    )
    assert "while DISTRIBUTING" in distributing and "may have been distributed to some targets" in distributing
    assert {log_group, pipeline_group} <= _declared(environment, ref.stack, "AWS::Logs::LogGroup", "LogGroupName")
    assert bucket in _declared(environment, ref.stack, "AWS::S3::Bucket", "BucketName")

    topic = environment.target(ref.stack, target["Arn"])
    assert topic is not None and environment.resource(topic)["Type"] == "AWS::SNS::Topic"
    assert topic.stack == names.stack_name("Security")
    source = {
        "aws:SourceArn": f"arn:aws:events:{environment.region}:{environment.account}:rule/{names.image_build_failed_rule}",
        "aws:SourceAccount": environment.account,
    }
    _reaches_a_person(environment, topic, Request("sns:Publish", "", {"Service": "events.amazonaws.com"}, source), {})

"""cfn_child: the L1 resource under an L2 construct, or an error naming the construct."""

from __future__ import annotations

import pytest
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Template
from constructs import Construct

from gpu_constructs.compliance.cfn_child import cfn_child
from tests.gpu_constructs.helpers import bare_stack


def test_returns_the_generated_resource_that_the_template_shows() -> None:
    stack = bare_stack()
    queue = sqs.Queue(stack, "Queue")
    cfn_child(queue, sqs.CfnQueue).add_property_override("DelaySeconds", 7)
    Template.from_stack(stack).has_resource_properties("AWS::SQS::Queue", {"DelaySeconds": 7})


def test_another_class_is_refused_with_the_path() -> None:
    stack = bare_stack()
    queue = sqs.Queue(stack, "Queue")
    with pytest.raises(TypeError, match=r"/Queue: expected a CfnQueuePolicy as default child, found CfnQueue"):
        cfn_child(queue, sqs.CfnQueuePolicy)


def test_a_plain_construct_has_no_default_child() -> None:
    plain = Construct(bare_stack(), "Plain")
    with pytest.raises(TypeError, match=r"/Plain: expected a CfnQueue as default child, found no default child"):
        cfn_child(plain, sqs.CfnQueue)

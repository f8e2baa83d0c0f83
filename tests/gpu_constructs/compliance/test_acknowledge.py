"""acknowledge: a finding is accepted on one construct only, and only with a real reason."""

from __future__ import annotations

import pytest
from aws_cdk import Annotations as CdkAnnotations
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Annotations

from gpu_constructs.compliance.acknowledge import acknowledge
from tests.gpu_constructs.helpers import bare_stack


def test_blanket_reason_is_refused() -> None:
    stack = bare_stack()
    with pytest.raises(ValueError, match=r"AwsSolutions-SQS3 on .*needs a real reason"):
        acknowledge(sqs.Queue(stack, "Q"), "AwsSolutions-SQS3", "n/a")


def test_acknowledged_warning_is_silenced_on_that_construct_only() -> None:
    stack = bare_stack()
    quiet, loud = sqs.Queue(stack, "Quiet"), sqs.Queue(stack, "Loud")
    for queue in (quiet, loud):
        CdkAnnotations.of(queue).add_warning_v2("platform:probe", "a finding")
    acknowledge(quiet, "platform:probe", "This queue is a probe of the acknowledgment, nothing reads it.")
    warnings = Annotations.from_stack(stack).find_warning("*", "a finding [ack: platform:probe]")
    assert [w.id for w in warnings] == [f"/{stack.stack_name}/Loud"]

"""Acknowledge a compliance finding on one construct, with the reason it does not apply."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct


def acknowledge(construct: IConstruct, rule_id: str, reason: str) -> None:
    """Record that ``rule_id`` (e.g. ``AwsSolutions-IAM5``) is accepted on ``construct`` for ``reason``.

    The reason must speak of this resource; a blanket reason is a defect.
    """
    if len(reason) < 20:
        raise ValueError(f"acknowledgment of {rule_id} on {construct.node.path} needs a real reason")
    Validations.of(construct).acknowledge(Acknowledgment(id=rule_id, reason=reason))

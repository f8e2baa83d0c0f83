"""The CloudFormation resource (L1) that an aws-cdk-lib construct (L2) wraps, with its type checked.

``node.default_child`` is typed ``IConstruct | None``; a construct that overrides a property of the
generated resource or acknowledges a finding on it asks for it here, naming the class it expects, and
gets that class or an error naming the construct's path.
"""

from __future__ import annotations

from typing import TypeVar

from aws_cdk import CfnResource
from constructs import IConstruct

R = TypeVar("R", bound=CfnResource)


def cfn_child(construct: IConstruct, kind: type[R]) -> R:
    """The default child of ``construct``; a ``TypeError`` if it is missing or not a ``kind``."""
    child = construct.node.default_child
    if not isinstance(child, kind):
        found = "no default child" if child is None else type(child).__name__
        raise TypeError(f"{construct.node.path}: expected a {kind.__name__} as default child, found {found}")
    return child

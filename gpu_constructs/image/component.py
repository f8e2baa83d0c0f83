"""One EC2 Image Builder component from a YAML document, versioned by its content."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_imagebuilder as imagebuilder
from constructs import Construct

from config.loader import safe_load

#: CloudFormation's limit on inline component data (AWS::ImageBuilder::Component Data).
MAX_INLINE_DATA = 16_000


def content_version(*parts: Any) -> str:
    """A semantic version that changes whenever ``parts`` change: ``1.0.<28 bits of their SHA-256>``.

    Image Builder components and recipes are immutable and unique by name and version,
    and CloudFormation replaces them on any change: the replacement must carry a new
    version, or its creation collides with the resource it replaces. Deriving the patch
    number from the content gives each content its own version (Image Builder allows up
    to 2^30 - 1 per node) without a counter to maintain.
    """
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()
    return f"1.0.{int(digest[:7], 16)}"


def strip_leading_comments(document: str) -> str:
    """``document`` without the comment block that opens it (the repository's notes for people).

    YAML comments mean nothing to Image Builder, and CloudFormation holds inline data to
    16,000 characters.
    """
    lines = document.splitlines(keepends=True)
    start = 0
    while start < len(lines) and (lines[start].lstrip().startswith("#") or not lines[start].strip()):
        start += 1
    return "".join(lines[start:])


@dataclass(frozen=True)
class ComponentDocument:
    """What an ``ImageComponent`` is built from: the document's ``description`` and the document itself
    without its opening comment block."""

    description: str
    document: str

    @classmethod
    def parse(cls, text: str) -> ComponentDocument:
        return cls(description=safe_load(text)["description"], document=strip_leading_comments(text))


class ImageComponent(Construct):
    """An ``AWS::ImageBuilder::Component`` (Linux) holding ``document`` inline.

    Attributes:
        component: the L1 resource.
        name, version: its Image Builder name and content-derived version.
        arn: the component's build version ARN.
    """

    def __init__(self, scope: Construct, construct_id: str, *, name: str, description: str, document: str) -> None:
        super().__init__(scope, construct_id)
        if len(document) > MAX_INLINE_DATA:
            raise ValueError(
                f"image component {name}: its document has {len(document)} characters, more than the "
                f"{MAX_INLINE_DATA} CloudFormation accepts inline; fix: shorten the document or split the component"
            )
        self.name = name
        self.version = content_version(name, description, document)
        self.component = imagebuilder.CfnComponent(
            self,
            "Component",
            name=name,
            version=self.version,
            platform="Linux",
            description=description,
            data=document,
        )
        self.arn = self.component.attr_arn

    def arn_pattern(self) -> str:
        """Every version and build of this component, for IAM statements (``component/<name>/*``)."""
        stack = Stack.of(self)
        return f"arn:{stack.partition}:imagebuilder:{stack.region}:{stack.account}:component/{self.name}/*"

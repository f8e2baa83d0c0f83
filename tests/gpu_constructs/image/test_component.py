"""ImageComponent: a new version whenever its content changes, the document inline (within CloudFormation's
limit, or a one-line error), and an ARN pattern for IAM that covers its versions only."""

from __future__ import annotations

import pytest

from gpu_constructs.image.component import MAX_INLINE_DATA, ComponentDocument, ImageComponent, content_version
from tests.gpu_constructs.helpers import ACCOUNT, REGION, bare_stack, only, template

DOC = "# notes for people\n\nname: gpu-driver\ndescription: NVIDIA driver\nschemaVersion: 1.0\nphases: []\n"


def test_component_carries_the_document_without_its_notes_and_a_content_version() -> None:
    stack = bare_stack()
    parsed = ComponentDocument.parse(DOC)
    component = ImageComponent(
        stack, "Driver", name="gpu-driver", description=parsed.description, document=parsed.document
    )
    props = only(template(stack), "AWS::ImageBuilder::Component")[1]["Properties"]
    assert props["Data"].startswith("name: gpu-driver") and "notes for people" not in props["Data"]
    assert (props["Platform"], props["Version"], props["Description"]) == ("Linux", component.version, "NVIDIA driver")
    assert component.arn_pattern() == f"arn:aws:imagebuilder:{REGION}:{ACCOUNT}:component/gpu-driver/*"


def test_version_changes_with_the_content_only() -> None:
    assert content_version("a", "doc") == content_version("a", "doc")
    assert content_version("a", "doc") != content_version("a", "doc ")
    major, minor, patch = content_version("a").split(".")
    assert (major, minor) == ("1", "0") and int(patch) < 2**30


def test_a_document_over_the_inline_limit_is_refused_with_its_fix() -> None:
    with pytest.raises(ValueError, match=r"image component big: .*fix: shorten the document or split"):
        ImageComponent(bare_stack(), "Big", name="big", description="d", document="x" * (MAX_INLINE_DATA + 1))

"""Whether the fleets' AMI parameter holds a golden AMI yet, and how to get the first one.

Until the first build, ``/imagebuilder/gpu-platform/<env>/ami/latest`` holds the public AMI of
``image.bootstrap_ami_parameter`` (the Image stack seeds it so): the fleets run, from the Deep Learning
AMI's own PyTorch environment (layout.WORKLOAD_PATH), without the golden AMI's pins, tests or hardening.
A golden AMI is one this account owns (Image Builder's, or its copy in a receiving account); the public
Deep Learning AMI is owned by AWS. ``status`` and ``preflight`` both say so, with the command that builds one.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from config.naming import ResourceNames
from config.schema import Environment
from ops.findings import Finding, Level


def describe_ami(ec2: Any, ami_id: str) -> dict[str, Any] | None:
    """DescribeImages of one AMI; None when it is not visible (deregistered, or not shared with the account)."""
    try:
        images = ec2.describe_images(ImageIds=[ami_id]).get("Images", [])
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("InvalidAMIID.NotFound", "InvalidAMIID.Unavailable"):
            return None
        raise
    return images[0] if images else None


def how_to_build(env: Environment) -> str:
    """The command that gives this environment its first golden AMI."""
    if env.image.build:
        arn = ResourceNames.of(env).image_pipeline_arn()
        return f"build one (about an hour): aws imagebuilder start-image-pipeline-execution --image-pipeline-arn {arn}"
    return (
        "it arrives when the environment that lists "
        f"{env.name} in image.share_with builds one: run aws imagebuilder start-image-pipeline-execution there"
    )


def bootstrap_ami_finding(env: Environment, ami_id: str, image: dict[str, Any] | None, check: str) -> Finding | None:
    """A WARNING when the AMI parameter still holds an AMI this account does not own (the bootstrap AMI)."""
    names = ResourceNames.of(env)
    if image is None:
        return Finding(
            check,
            Level.WARNING,
            f"{names.ami_parameter} holds {ami_id}, which this account cannot describe (deregistered or not shared)",
            "put a golden AMI there: " + how_to_build(env),
        )
    owner = image.get("OwnerId", "")
    if owner == env.account:
        return None
    name = image.get("Name", "?")
    return Finding(
        check,
        Level.WARNING,
        f"no golden AMI yet: {names.ami_parameter} holds {ami_id} ({name}, owner {owner}), the public bootstrap AMI; "
        "the fleets run its own PyTorch environment without the golden AMI's pinned versions and image tests",
        how_to_build(env),
    )

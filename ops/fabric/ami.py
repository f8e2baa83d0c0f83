"""The AMI the fabric check's nodes were booted from: the one image a passing check vouches for.

Each node's ``ImageId`` comes from ``ec2:DescribeInstances``, the image's name from ``ec2:DescribeImages``. The
pipeline compares AMIs across accounts by name (a copy of an AMI in another account has its own id, and Image
Builder gives every copy of one build the same name), so the report carries both. Nodes booted from different
AMIs (an instance refresh under way) make the check refuse to run: its result would belong to no one image.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ops.job.context import JobError
from ops.preflight.aws import Aws


@dataclass(frozen=True)
class NodeAmi:
    image_id: str
    #: None when EC2 no longer describes the image (deregistered since the nodes booted).
    name: str | None


def _image_ids(aws: Aws, instance_ids: Sequence[str]) -> dict[str, str]:
    """Each instance's ``ImageId``, by instance id (a filter, so that an id EC2 forgot does not fail the call)."""
    found = aws.pages(
        "ec2", "describe_instances", "Reservations", Filters=[{"Name": "instance-id", "Values": list(instance_ids)}]
    )
    return {i["InstanceId"]: i["ImageId"] for r in found for i in r["Instances"]}


def _names(aws: Aws, image_ids: Sequence[str]) -> dict[str, str]:
    """Each image's name, by id; an image EC2 does not describe is absent."""
    found = aws.client("ec2").describe_images(Filters=[{"Name": "image-id", "Values": sorted(image_ids)}])
    return {i["ImageId"]: i.get("Name", "") for i in found.get("Images", [])}


def _label(image_id: str, names: dict[str, str]) -> str:
    return f"{image_id} ({names[image_id]})" if names.get(image_id) else image_id


def node_ami(aws: Aws, instance_ids: Sequence[str], group_name: str) -> NodeAmi:
    """The one AMI ``instance_ids`` were booted from, or a ``JobError`` (exit 2) that names each AMI's nodes."""
    by_node = _image_ids(aws, instance_ids)
    missing = sorted(set(instance_ids) - set(by_node))
    if missing:
        raise JobError(f"EC2 does not describe {', '.join(missing)}; fix: rerun once the fleet is stable")
    names = _names(aws, sorted(set(by_node.values())))
    if len(set(by_node.values())) > 1:
        groups = "; ".join(
            f"{', '.join(sorted(i for i, a in by_node.items() if a == image))}: {_label(image, names)}"
            for image in sorted(set(by_node.values()))
        )
        raise JobError(
            f"the nodes were booted from different AMIs ({groups}); the fabric check tests one image; fix: let "
            f"the instance refresh finish (aws autoscaling describe-instance-refreshes --auto-scaling-group-name "
            f"{group_name}), then rerun"
        )
    image_id = next(iter(by_node.values()))
    return NodeAmi(image_id=image_id, name=names.get(image_id) or None)

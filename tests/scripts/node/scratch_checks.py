"""What the scratch tests share (tests/scripts/node/test_scratch.py, test_scratch_image_mount.py): the fake disks a
node starts with, the calls and fstab lines the scratch step leaves, a node back in service, a reboot."""

from __future__ import annotations

from pathlib import Path

from gpu_constructs.fleet.fleet_launch_template import SCRATCH_DEVICE
from tests.scripts.node.fake_disks import ebs, instance_store
from tests.scripts.node.fake_node import Node, Result, lifecycle_call

OPTIONS = "defaults,noatime,nofail,x-systemd.device-timeout=30s"
ROOT_FSTAB = "LABEL=cloudimg-rootfs / ext4 discard,errors=remount-ro 0 1"
INSTANCE_STORE = [f"/dev/nvme{i}n1" for i in range(3, 7)]


def with_ebs_scratch(node: Node) -> None:
    """An unrelated EBS volume enumerated first (sdf as nvme1n1), the scratch volume (sdb) second."""
    node.disks.add(
        ebs("/dev/nvme1n1", "/dev/sdf", "vol0bbbbbbbbbbbbbbbb"),
        ebs("/dev/nvme2n1", SCRATCH_DEVICE, "vol0cccccccccccccccc"),
    )


def with_instance_store(node: Node, count: int = 4) -> None:
    node.disks.add(*(instance_store(name, f"AWS{i:017d}") for i, name in enumerate(INSTANCE_STORE[:count])))


def scratch_calls(result: Result) -> list[str]:
    return [call for call in result.calls if call.split()[0] in {"mkfs.xfs", "mount", "mdadm"}]


def assert_in_service(node: Node, result: Result) -> None:
    assert result.returncode == 0, result.log
    assert "scratch" in result.steps("ok")
    assert node.aws.calls == [lifecycle_call(node, "CONTINUE")]
    assert node.fleet.state == "InService"


def reboot(node: Node, *, fstab_mounted: bool, arrays: dict[str, str] | None = None) -> None:
    node.disks.reboot(fstab_mounted=fstab_mounted, arrays=arrays)
    node.aws.reset()  # a warm-pool start is held in Pending:Wait again
    Path(node.env["FAKE_CALLS"]).unlink(missing_ok=True)

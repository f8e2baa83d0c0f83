"""The scratch volume, end to end: the real bootstrap.sh runs its `scratch` step (the real
mount-scratch.sh) against fake disks (tests/scripts/node/fake_disks.py), a fake IMDS and moto's Auto
Scaling, from the disks the node finds to /scratch mounted, its fstab line and the launch hook."""

from __future__ import annotations

import stat

import pytest

from gpu_constructs.fleet.fleet_launch_template import SCRATCH_DEVICE
from tests.scripts.node.fake_disks import ebs
from tests.scripts.node.fake_node import Node, assert_abandoned
from tests.scripts.node.helpers import NODE_DIR
from tests.scripts.node.scratch_checks import (
    INSTANCE_STORE,
    OPTIONS,
    ROOT_FSTAB,
    assert_in_service,
    reboot,
    scratch_calls,
    with_ebs_scratch,
    with_instance_store,
)

# isort: split
import layout

MOUNT_SCRATCH = NODE_DIR / "mount-scratch.sh"


def mount_call(node: Node, device: str) -> str:
    return f"mount -t xfs -o defaults,noatime {device} {node.disks.mount_point}"


def assert_mounted(node: Node, device: str) -> None:
    uuid = node.disks.fs_uuid(device)
    assert node.disks.scratch_lines() == [f"UUID={uuid} {node.disks.mount_point} xfs {OPTIONS} 0 0"]
    assert node.disks.fstab.read_text().splitlines()[0] == ROOT_FSTAB  # the rest of fstab is kept
    assert stat.S_IMODE(node.disks.mount_point.stat().st_mode) == 0o1777
    assert f"{device} {node.disks.mount_point} xfs" in node.disks.mounts.read_text()


# ---------------------------------------------------------------------------------------------
# EBS scratch volume
# ---------------------------------------------------------------------------------------------


def test_blank_ebs_scratch_is_found_by_its_ec2_name_formatted_mounted_and_in_fstab(node: Node) -> None:
    with_ebs_scratch(node)
    result = node.run()

    assert_in_service(node, result)
    assert scratch_calls(result) == ["mkfs.xfs -K -L gpu-scratch /dev/nvme2n1", mount_call(node, "/dev/nvme2n1")]
    assert_mounted(node, "/dev/nvme2n1")
    assert not node.disks.has_fs("/dev/nvme1n1")  # the sdf volume is not the scratch volume
    assert "EBS disk /dev/nvme1n1 is sdf, not /dev/sdb: left alone" in result.log
    assert "EBS scratch volume /dev/sdb is /dev/nvme2n1" in result.log


def test_formatted_ebs_scratch_is_mounted_not_formatted_again(node: Node) -> None:
    with_ebs_scratch(node)
    node.disks.format("/dev/nvme2n1", "0b0e7f2e-5d1c-4a8e-9f00-2c7a3c1d9e11")
    result = node.run()

    assert_in_service(node, result)
    assert scratch_calls(result) == [mount_call(node, "/dev/nvme2n1")]
    assert node.disks.fs_uuid("/dev/nvme2n1") == "0b0e7f2e-5d1c-4a8e-9f00-2c7a3c1d9e11"
    assert_mounted(node, "/dev/nvme2n1")


@pytest.mark.parametrize("fstab_mounted", [True, False], ids=["fstab-mounted-it", "not-mounted-at-boot"])
def test_a_second_boot_keeps_the_data_and_the_single_fstab_line(node: Node, fstab_mounted: bool) -> None:
    with_ebs_scratch(node)
    assert node.run().returncode == 0
    uuid = node.disks.fs_uuid("/dev/nvme2n1")

    reboot(node, fstab_mounted=fstab_mounted)
    result = node.run()

    assert_in_service(node, result)
    assert not any(call.startswith("mkfs") for call in result.calls)
    assert node.disks.fs_uuid("/dev/nvme2n1") == uuid
    assert node.disks.scratch_lines() == [f"UUID={uuid} {node.disks.mount_point} xfs {OPTIONS} 0 0"]
    assert scratch_calls(result) == ([] if fstab_mounted else [mount_call(node, "/dev/nvme2n1")])


def test_no_scratch_device_is_skipped(node: Node) -> None:
    result = node.run()

    assert_in_service(node, result)
    assert scratch_calls(result) == []
    assert "no scratch device (no NVMe instance store, no EBS volume /dev/sdb): nothing to do" in result.log
    assert node.disks.fstab.read_text() == ROOT_FSTAB + "\n"
    assert not node.disks.mount_point.exists()


def test_without_nvme_cli_the_only_unused_ebs_disk_is_the_scratch_volume(node: Node) -> None:
    node.disks.add(ebs("/dev/nvme1n1", SCRATCH_DEVICE, "vol0cccccccccccccccc"))
    node.env["NVME_BIN"] = str(node.tmp / "no-such-nvme")
    result = node.run()

    assert_in_service(node, result)
    assert_mounted(node, "/dev/nvme1n1")


def test_without_nvme_cli_two_unused_ebs_disks_abandon_rather_than_guess(node: Node) -> None:
    with_ebs_scratch(node)
    node.env["NVME_BIN"] = str(node.tmp / "no-such-nvme")
    result = node.run()

    assert_abandoned(node, result, "scratch")
    assert "which one is /dev/sdb is unknown" in result.log
    assert scratch_calls(result) == []


# ---------------------------------------------------------------------------------------------
# NVMe instance store
# ---------------------------------------------------------------------------------------------


def test_instance_store_is_preferred_and_striped_into_one_array(node: Node) -> None:
    with_instance_store(node)
    with_ebs_scratch(node)
    result = node.run()

    assert_in_service(node, result)
    md = "/dev/md/gpu-scratch"
    assert scratch_calls(result) == [
        f"mdadm --create {md} --run --level=0 --raid-devices=4 {' '.join(INSTANCE_STORE)}",
        f"mkfs.xfs -K -L gpu-scratch {md}",
        mount_call(node, md),
    ]
    assert_mounted(node, md)
    assert not node.disks.has_fs("/dev/nvme2n1")  # the EBS scratch volume is left as it is
    assert "EBS scratch volume /dev/nvme2n1 stays unused: the instance store is faster" in result.log


def test_instance_store_array_survives_a_reboot_and_is_rebuilt_after_a_stop(node: Node) -> None:
    with_instance_store(node)
    assert node.run().returncode == 0
    uuid = node.disks.fs_uuid("/dev/md/gpu-scratch")

    # Reboot: the kernel assembled the array as md127 with its data; fstab did not mount it.
    reboot(node, fstab_mounted=False, arrays={"/dev/md/gpu-scratch": "/dev/md127"})
    result = node.run()
    assert_in_service(node, result)
    assert scratch_calls(result) == [mount_call(node, "/dev/md127")]
    assert node.disks.fs_uuid("/dev/md127") == uuid
    assert_mounted(node, "/dev/md127")

    # Warm-pool stop and start: the instance store comes back erased; a new array, one fstab line.
    node.disks.stop_start()
    reboot(node, fstab_mounted=False)
    result = node.run()
    assert_in_service(node, result)
    assert [call.split()[0] for call in scratch_calls(result)] == ["mdadm", "mkfs.xfs", "mount"]
    assert node.disks.fs_uuid("/dev/md/gpu-scratch") != uuid
    assert_mounted(node, "/dev/md/gpu-scratch")


def test_one_instance_store_disk_is_used_as_it_is(node: Node) -> None:
    with_instance_store(node, count=1)
    result = node.run()

    assert_in_service(node, result)
    assert scratch_calls(result) == ["mkfs.xfs -K -L gpu-scratch /dev/nvme3n1", mount_call(node, "/dev/nvme3n1")]
    assert_mounted(node, "/dev/nvme3n1")


def test_without_mdadm_the_first_instance_store_disk_is_used_and_the_rest_named(node: Node) -> None:
    with_instance_store(node)
    node.env["MDADM_BIN"] = str(node.tmp / "no-such-mdadm")
    result = node.run()

    assert_in_service(node, result)
    assert_mounted(node, "/dev/nvme3n1")
    assert "no mdadm: using /dev/nvme3n1 alone; /dev/nvme4n1 /dev/nvme5n1 /dev/nvme6n1 stay unused" in result.log


# ---------------------------------------------------------------------------------------------
# failures abandon the launch
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "message"),
    [
        ("FAKE_MKFS_FAIL", "cannot format /dev/nvme2n1"),
        ("FAKE_MOUNT_FAIL", "cannot mount /dev/nvme2n1 at {mount_point}"),
    ],
    ids=["mkfs", "mount"],
)
def test_a_present_device_that_cannot_be_formatted_or_mounted_abandons(node: Node, variable: str, message: str) -> None:
    with_ebs_scratch(node)
    node.env[variable] = "1"
    result = node.run()

    assert_abandoned(node, result, "scratch")
    assert message.format(mount_point=node.disks.mount_point) in result.log
    assert node.disks.scratch_lines() == []  # no fstab line for a file system that is not there
    assert not any(call.startswith("fi_info") for call in result.calls)  # nothing after the step ran


# ---------------------------------------------------------------------------------------------
# one contract: launch template, layout and the script's defaults
# ---------------------------------------------------------------------------------------------


def test_the_script_defaults_are_the_layout_and_the_launch_template_device() -> None:
    text = MOUNT_SCRATCH.read_text()
    assert layout.SCRATCH_EBS_DEVICE == SCRATCH_DEVICE
    assert f'"${{SCRATCH_EBS_DEVICE:-{layout.SCRATCH_EBS_DEVICE}}}"' in text
    assert f'"${{SCRATCH_MOUNT_POINT:-{layout.SCRATCH_MOUNT_POINT}}}"' in text

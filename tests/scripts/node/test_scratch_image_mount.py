"""/scratch on NVMe instance store that the image mounted before the bootstrap ran (the Deep Learning AMI mounts
it at /opt/dlami/nvme): the real bootstrap.sh and mount-scratch.sh against fake disks (tests/scripts/node/fake_disks.py)
whose instance store is already mounted, as in tests/scripts/node/test_scratch.py; and, with the fake systemd of
tests/scripts/node/fake_units.py, the image's own unit (dlami-nvme.service) still at work when the scratch step starts."""

from __future__ import annotations

import stat

from tests.scripts.node.fake_node import Node, Result, assert_abandoned
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


def assert_bound(node: Node, result: Result, device: str) -> None:
    """/scratch is the image's mount's `scratch` folder, bound (no array, no mkfs, no fstab line), both 1777."""
    source, mount_point = node.disks.image_mount_point / "scratch", node.disks.mount_point
    assert scratch_calls(result) == [f"mount --bind {source} {mount_point}"]
    assert f"{source} {mount_point} none" in node.disks.mounts.read_text()
    assert stat.S_IMODE(source.stat().st_mode) == stat.S_IMODE(mount_point.stat().st_mode) == 0o1777
    assert node.disks.scratch_lines() == []
    assert f"{mount_point} is {source} (instance store {device}, mounted by the image), mode 1777" in result.log


def test_instance_store_the_image_mounted_is_bound_at_scratch(node: Node) -> None:
    with_instance_store(node)
    with_ebs_scratch(node)
    node.disks.image_mounts("/dev/md0", members=INSTANCE_STORE)
    result = node.run()

    assert_in_service(node, result)
    assert_bound(node, result, "/dev/md0")
    assert f"instance store /dev/md0 is mounted by the image at {node.disks.image_mount_point}" in result.log
    assert not node.disks.has_fs("/dev/nvme2n1")  # the EBS scratch volume is left as it is
    assert "EBS scratch volume /dev/nvme2n1 stays unused: the instance store is faster" in result.log


def test_one_instance_store_disk_the_image_mounted_is_bound_too(node: Node) -> None:
    with_instance_store(node, count=1)
    node.disks.image_mounts("/dev/nvme3n1")
    result = node.run()

    assert_in_service(node, result)
    assert_bound(node, result, "/dev/nvme3n1")


def test_after_a_reboot_the_same_folder_is_bound_again_and_an_old_fstab_line_goes(node: Node) -> None:
    with_instance_store(node)
    node.disks.image_mounts("/dev/md0", members=INSTANCE_STORE)
    # A line an earlier boot wrote (an image that did not mount the store itself) would mount a device that is gone.
    node.disks.fstab.write_text(
        f"{ROOT_FSTAB}\nUUID=0b0e7f2e-5d1c-4a8e-9f00-2c7a3c1d9e11 {node.disks.mount_point} xfs {OPTIONS} 0 0\n"
    )
    assert node.run().returncode == 0
    assert node.disks.fstab.read_text() == ROOT_FSTAB + "\n"
    (node.disks.image_mount_point / "scratch" / "job.tmp").write_text("kept")

    reboot(node, fstab_mounted=False)  # the image mounts its store again; the bind is gone
    result = node.run()
    assert_in_service(node, result)
    assert_bound(node, result, "/dev/md0")
    assert (node.disks.image_mount_point / "scratch" / "job.tmp").read_text() == "kept"


# ---------------------------------------------------------------------------------------------
# The image's own unit still at work when the scratch step starts
# ---------------------------------------------------------------------------------------------

DLAMI_UNIT = "dlami-nvme.service"
UNIT_PROPERTIES = (
    "--property=LoadState,ActiveState,SubState,UnitFileState,InactiveExitTimestampMonotonic,ConditionTimestampMonotonic"
)


def image_unit_mounts_later(node: Node, *, finishes: bool = True) -> None:
    """The DLAMI's dlami-nvme.service, started by systemd at boot, is still setting up the instance store when the
    bootstrap runs: the disks look blank until, once the scratch step has asked systemd about it, it mounts its
    array at /opt/dlami/nvme (``finishes``) and ends well; else it stays activating."""
    with_instance_store(node)
    blank_disks, blank_mounts = node.disks.state / "lsblk.out", node.disks.mounts
    before = (blank_disks.read_text(), blank_mounts.read_text())
    node.disks.image_mounts("/dev/md0", members=INSTANCE_STORE)  # what the unit leaves behind ...
    after_disks, after_mounts = node.tmp / "lsblk.after", node.tmp / "mounts.after"
    after_disks.write_text(blank_disks.read_text())
    after_mounts.write_text(blank_mounts.read_text())
    blank_disks.write_text(before[0])  # ... but not yet
    blank_mounts.write_text(before[1])
    asked = f"grep -q 'show .*{DLAMI_UNIT}' {node.env['FAKE_CALLS']}"
    finish = f"cp {after_disks} {blank_disks}; cp {after_mounts} {blank_mounts}" if finishes else "sleep 30"
    node.units.booting(DLAMI_UNIT, f"until {asked} 2>/dev/null; do sleep 0.05; done; sleep 0.3; {finish}", node.env)
    node.env["IMAGE_STORE_POLL_S"] = "0.1"


def test_the_scratch_step_waits_for_the_images_unit_then_binds_what_it_mounted(node: Node) -> None:
    image_unit_mounts_later(node)
    result = node.run()

    assert_in_service(node, result)
    assert_bound(node, result, "/dev/md0")  # no mdadm over the disks the image was striping, no mkfs
    assert f"the image's {DLAMI_UNIT} is activating/start: waiting up to 120 s" in result.log
    assert f"the image's {DLAMI_UNIT} is active/exited: done with the instance store" in result.log
    assert result.calls.count(f"systemctl show {UNIT_PROPERTIES} {DLAMI_UNIT}") >= 2


def test_an_image_unit_that_never_finishes_leaves_the_disks_alone_and_abandons(node: Node) -> None:
    image_unit_mounts_later(node, finishes=False)
    node.env["IMAGE_STORE_WAIT_S"] = "1"
    result = node.run()

    assert_abandoned(node, result, "scratch")
    assert scratch_calls(result) == []
    assert (
        f"the image's {DLAMI_UNIT} is still activating/start after 1 s: the instance store is left to it" in result.log
    )


def test_without_the_images_unit_the_disks_are_used_at_once(node: Node) -> None:
    with_instance_store(node)  # blank disks, and an image (not the DLAMI) that has no such unit
    result = node.run()

    assert_in_service(node, result)
    assert scratch_calls(result)[0].startswith("mdadm --create")
    assert f"systemctl show {UNIT_PROPERTIES} {DLAMI_UNIT}" in result.calls  # asked once: not found
    assert "waiting up to" not in result.log

"""Fake block devices for mount-scratch.sh: lsblk, blkid, mkfs.xfs, mount, mdadm and nvme as small
shell scripts over a state folder, so that the real script (through the real bootstrap) runs
against a disk layout the test declares. Calls that change something (mkfs, mdadm, mount) are
appended to $FAKE_CALLS, as the bootstrap's other fakes do."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

EBS_MODEL = "Amazon Elastic Block Store"
INSTANCE_STORE_MODEL = "Amazon EC2 NVMe Instance Storage"

# State: $FAKE_DISK_STATE/fs/<device with / as _> holds "TYPE=..." and "UUID=..." lines.
FAKE_BLKID = """#!/usr/bin/env bash
tag="" dev=""
while (($#)); do
  case "$1" in
    -s) tag="$2"; shift 2 ;;
    -o) shift 2 ;;
    -p) shift ;;
    *) dev="$1"; shift ;;
  esac
done
state="$FAKE_DISK_STATE/fs/${dev//\\//_}"
[[ -f "$state" ]] || exit 2
sed -n "s/^${tag}=//p" "$state"
"""
FAKE_MKFS = """#!/usr/bin/env bash
printf 'mkfs.xfs %s\\n' "$*" >>"$FAKE_CALLS"
dev="${*: -1}"
if [[ -n "${FAKE_MKFS_FAIL:-}" ]]; then
  echo "mkfs.xfs: cannot open ${dev}: Device or resource busy" >&2
  exit 1
fi
printf 'TYPE=xfs\\nUUID=%s\\n' "$(cat /proc/sys/kernel/random/uuid)" >"$FAKE_DISK_STATE/fs/${dev//\\//_}"
echo "meta-data=${dev} isize=512 agcount=32"
"""
FAKE_MOUNT = """#!/usr/bin/env bash
printf 'mount %s\\n' "$*" >>"$FAKE_CALLS"
if [[ -n "${FAKE_MOUNT_FAIL:-}" ]]; then
  echo "mount: ${*: -1}: wrong fs type, bad option, bad superblock on ${*: -2:1}" >&2
  exit 32
fi
type="$2"
[[ "$1" != --bind ]] || type=none
printf '%s %s %s rw,noatime 0 0\\n' "${*: -2:1}" "${*: -1}" "$type" >>"$PROC_MOUNTS"
"""
FAKE_MDADM = """#!/usr/bin/env bash
printf 'mdadm %s\\n' "$*" >>"$FAKE_CALLS"
echo "mdadm: array $2 started."
"""
FAKE_NVME = """#!/usr/bin/env bash
dev="${*: -1}"
state="$FAKE_DISK_STATE/nvme/${dev//\\//_}"
[[ -f "$state" ]] || { echo "${dev}: Inappropriate ioctl for device" >&2; exit 1; }
cat "$state"
"""
FAKE_LSBLK = """#!/usr/bin/env bash
cat "$FAKE_DISK_STATE/lsblk.out"
"""


def _key(device: str) -> str:
    return device.replace("/", "_")


def _id_ctrl(serial: str, ec2_name: str) -> str:
    """`nvme id-ctrl -v` of an EBS volume: the EC2 device name in the vendor-specific data, blank-padded."""
    raw = ec2_name.encode().ljust(32, b" ")
    rows = [raw[i : i + 16] for i in (0, 16)]
    dump = "\n".join(
        f'{i * 16:04x}: {" ".join(f"{b:02x}" for b in row)} "{row.decode()}"' for i, row in enumerate(rows)
    )
    return (
        f"NVME Identify Controller:\nvid       : 0x1d0f\nsn        : {serial}\nmn        : {EBS_MODEL}\nvs[]:\n{dump}\n"
    )


@dataclass
class Disk:
    name: str  # /dev/nvme1n1
    model: str
    serial: str = ""
    ec2_name: str = ""  # EBS only: the launch template's DeviceName
    mounted_at: str = ""
    partitions: list[tuple[str, str]] = field(default_factory=list)  # (name, mount point)
    fstype: str = ""  # as lsblk shows it


def root_disk() -> Disk:
    return Disk(
        "/dev/nvme0n1",
        EBS_MODEL,
        "vol0aaaaaaaaaaaaaaaa",
        "/dev/sda1",
        partitions=[("/dev/nvme0n1p1", "/"), ("/dev/nvme0n1p15", "/boot/efi")],
    )


def ebs(name: str, ec2_name: str, serial: str) -> Disk:
    return Disk(name, EBS_MODEL, serial, ec2_name)


def instance_store(name: str, serial: str) -> Disk:
    return Disk(name, INSTANCE_STORE_MODEL, serial)


class FakeDisks:
    """The node's disks; ``arrays`` maps an assembled md device to its member disks."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.state = root / "disk-state"
        (self.state / "fs").mkdir(parents=True)
        (self.state / "nvme").mkdir()
        self.fstab = root / "etc" / "fstab"
        self.mounts = root / "proc-mounts"
        self.mount_point = root / "scratch"
        self.disks: list[Disk] = [root_disk()]
        self.arrays: dict[str, list[str]] = {}
        self.array_mounts: dict[str, str] = {}  # array -> where the image mounted it
        self.image_mount_point = root / "opt" / "dlami" / "nvme"  # the DLAMI's, under the test's folder
        self.fstab.parent.mkdir(exist_ok=True)
        self.fstab.write_text("LABEL=cloudimg-rootfs / ext4 discard,errors=remount-ro 0 1\n")
        self.mounts.write_text("/dev/nvme0n1p1 / ext4 rw,relatime 0 0\n")
        self.write()

    def install(self, bin_dir: Path) -> dict[str, str]:
        env = {
            "FAKE_DISK_STATE": str(self.state),
            "FSTAB": str(self.fstab),
            "PROC_MOUNTS": str(self.mounts),
            "SCRATCH_MOUNT_POINT": str(self.mount_point),
        }
        for variable, name, text in (
            ("LSBLK_BIN", "lsblk", FAKE_LSBLK),
            ("BLKID_BIN", "blkid", FAKE_BLKID),
            ("MKFS_BIN", "mkfs.xfs", FAKE_MKFS),
            ("MOUNT_BIN", "mount", FAKE_MOUNT),
            ("MDADM_BIN", "mdadm", FAKE_MDADM),
            ("NVME_BIN", "nvme", FAKE_NVME),
        ):
            path = bin_dir / name
            path.write_text(text)
            path.chmod(0o755)
            env[variable] = str(path)
        return env

    def add(self, *disks: Disk) -> None:
        self.disks.extend(disks)
        self.write()

    def image_mounts(self, device: str, *, members: list[str] | None = None) -> Path:
        """The image (the DLAMI) mounted the instance store before the bootstrap: ``device``, an array over
        ``members`` or one instance store disk, ext4 at ``image_mount_point``, which it returns."""
        mount_point = str(self.image_mount_point)
        self.image_mount_point.mkdir(parents=True, exist_ok=True)
        self.format(device, "5c1d3a8e-0b7f-4e2a-9d61-3f2b8c4e7a10", "ext4")
        if members is None:
            (disk,) = [d for d in self.disks if d.name == device]
            disk.mounted_at, disk.fstype = mount_point, "ext4"
        else:
            self.arrays[device] = members
            self.array_mounts[device] = mount_point
        with self.mounts.open("a") as mounts:
            mounts.write(f"{device} {mount_point} ext4 rw,relatime 0 0\n")
        self.write()
        return self.image_mount_point

    def format(self, device: str, uuid: str, fs_type: str = "xfs") -> None:
        (self.state / "fs" / _key(device)).write_text(f"TYPE={fs_type}\nUUID={uuid}\n")

    def fs_uuid(self, device: str) -> str:
        text = (self.state / "fs" / _key(device)).read_text()
        return next(line.removeprefix("UUID=") for line in text.splitlines() if line.startswith("UUID="))

    def has_fs(self, device: str) -> bool:
        return (self.state / "fs" / _key(device)).exists()

    def reboot(self, *, fstab_mounted: bool, arrays: dict[str, str] | None = None) -> None:
        """A reboot: nothing mounted but the root and the image's instance store, unless fstab mounted the scratch
        line again.
        ``arrays``: md device created before -> the name the kernel assembles it as at boot."""
        for created, assembled in (arrays or {}).items():
            members = [d.name for d in self.disks if d.model == INSTANCE_STORE_MODEL]
            self.arrays[assembled] = members
            (self.state / "fs" / _key(created)).rename(self.state / "fs" / _key(assembled))
        lines = ["/dev/nvme0n1p1 / ext4 rw,relatime 0 0"]  # and what the image mounts at each boot:
        lines += [f"{array} {mount_point} ext4 rw,relatime 0 0" for array, mount_point in self.array_mounts.items()]
        lines += [f"{disk.name} {disk.mounted_at} ext4 rw,relatime 0 0" for disk in self.disks if disk.mounted_at]
        if fstab_mounted:
            (line,) = [x for x in self.fstab.read_text().splitlines() if x.split()[1] == str(self.mount_point)]
            lines.append(f"{line.split()[0]} {self.mount_point} xfs rw,noatime 0 0")
        self.mounts.write_text("\n".join(lines) + "\n")
        self.write()

    def stop_start(self) -> None:
        """A warm-pool stop and start: instance store is erased, arrays are gone, EBS keeps its data."""
        for disk in self.disks:
            if disk.model == INSTANCE_STORE_MODEL:
                (self.state / "fs" / _key(disk.name)).unlink(missing_ok=True)
        for array in self.arrays:
            (self.state / "fs" / _key(array)).unlink(missing_ok=True)
        self.arrays.clear()
        self.mounts.write_text("/dev/nvme0n1p1 / ext4 rw,relatime 0 0\n")
        self.write()

    def write(self) -> None:
        rows = []
        for disk in self.disks:
            rows.append(
                f'NAME="{disk.name}" TYPE="disk" PKNAME="" MODEL="{disk.model:<40}" SERIAL="{disk.serial}" '
                f'FSTYPE="{disk.fstype}" MOUNTPOINT="{disk.mounted_at}"'
            )
            for part, mount_point in disk.partitions:
                rows.append(
                    f'NAME="{part}" TYPE="part" PKNAME="{disk.name}" MODEL="" SERIAL="" FSTYPE="ext4" '
                    f'MOUNTPOINT="{mount_point}"'
                )
            for array, members in self.arrays.items():
                if disk.name in members:
                    mounted, fs_type = self.array_mounts.get(array, ""), "ext4" if array in self.array_mounts else "xfs"
                    rows.append(
                        f'NAME="{array}" TYPE="raid0" PKNAME="{disk.name}" MODEL="" SERIAL="" FSTYPE="{fs_type}" '
                        f'MOUNTPOINT="{mounted}"'
                    )
            if disk.ec2_name:
                (self.state / "nvme" / _key(disk.name)).write_text(_id_ctrl(disk.serial, disk.ec2_name))
        (self.state / "lsblk.out").write_text("\n".join(rows) + "\n")

    def scratch_lines(self) -> list[str]:
        return [line for line in self.fstab.read_text().splitlines() if line.split()[1:2] == [str(self.mount_point)]]

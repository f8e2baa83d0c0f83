"""A job's working directory on Lustre: ``gpu-platform job run`` defaults it to ``/fsx/jobs/<job>``, which
nothing has created before the job's first start. The runner creates it (and its missing parents, mode
0755, owned by root like the job) only when the Lustre file system is mounted at the mount point: on a node
whose mount failed, ``/fsx`` is a bare folder of the root disk, and a job writing there would lose its
work with the instance."""

from __future__ import annotations

import os
from pathlib import Path

LUSTRE_FSTYPE = "lustre"


def _unescape(field: str) -> str:
    """A path of the mount table, whose spaces, tabs, newlines and backslashes are octal escapes."""
    for code in ("\\040", "\\011", "\\012", "\\134"):
        field = field.replace(code, chr(int(code[1:], 8)))
    return field


def mounted_fstype(mount_point: str, proc_mounts: str) -> str | None:
    """The type of the file system mounted last (the one in use) on ``mount_point``; ``None`` if none is."""
    target = mount_point.rstrip("/") or "/"
    found = None
    try:
        lines = Path(proc_mounts).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) >= 3 and _unescape(fields[1]) == target:
            found = fields[2]
    return found


def ensure_workdir(workdir: str, mount_point: str, proc_mounts: str) -> str | None:
    """Make ``workdir`` (a checked path at or under ``mount_point``) exist; the reason it cannot, else None."""
    if Path(workdir).is_dir():
        return None
    if not Path(mount_point).is_dir() or mounted_fstype(mount_point, proc_mounts) != LUSTRE_FSTYPE:
        return (
            f"{mount_point} is not a mounted Lustre file system, so it is not created (is lustre-mount.service active?)"
        )
    missing = []
    path = Path(workdir)
    while not path.exists():
        missing.append(path)
        path = path.parent
    try:
        for folder in reversed(missing):
            folder.mkdir(mode=0o755)
            os.chmod(folder, 0o755)  # noqa: S103 - the job folder is readable by all, whatever the umask
    except FileExistsError:
        pass  # a job on another node created it meanwhile (Lustre is shared)
    except OSError as err:
        return f"it cannot be created ({err.strerror})"
    return None if Path(workdir).is_dir() else "it is not a directory"

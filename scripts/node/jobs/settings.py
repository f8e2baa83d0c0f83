"""Where a job's files live on the node, and the programs the runner calls. Every path can be moved by an
environment variable of the same name (tests, triage); the defaults are the node's layout."""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, fields

from layout import WORKLOAD_PATH

JOB_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")
"""The checkpoint contract's job name (and the job document's JobId pattern)."""

UNIT_SAFE_PATH = re.compile(r"^/[A-Za-z0-9._/-]*$")
"""Paths written into a unit: no spaces, quotes, ``$`` or ``%`` that systemd would interpret."""

DEFAULT_JOB_PATH = WORKLOAD_PATH


@dataclass(frozen=True)
class Settings:
    node_dir: str = "/opt/gpu-platform/node"
    """The node scripts (PYTHONPATH of the supervisor)."""
    python: str = "/usr/bin/python3"
    """The interpreter of the supervisor (the node scripts' runtime, with boto3)."""
    torchrun: str = "torchrun"
    """A bare name is looked up on the job's PATH (job_path): the golden AMI's venv, else the bootstrap AMI's
    PyTorch environment; a path is run as it is."""
    job_path: str = DEFAULT_JOB_PATH
    """PATH of the job: the venv first, so that ``python3`` in a command is the venv's."""
    node_env_file: str = "/etc/gpu-platform/node.env"
    efa_node_env_file: str = "/etc/gpu-platform/efa-node.env"
    training_pid_dir: str = "/run/gpu-platform/jobs"
    checkpoint_dir: str = "/fsx/checkpoints"
    fsx_mount_point: str = "/fsx"
    """Where Lustre is mounted on this node (node.env's FSX_MOUNT_POINT): a job's ``/fsx/...`` working
    directory is that path under it."""
    proc_mounts: str = "/proc/mounts"
    """The mount table: a missing working directory is created only where Lustre is mounted."""
    job_state_dir: str = "/var/lib/gpu-platform/jobs"
    """The runner's record of each job: what to run, when it started, how it ended (root, 0700)."""
    job_log_dir: str = "/var/log/gpu-platform/jobs"
    """``<job>.log``: the job's output, always written, whether or not CloudWatch Logs can be reached."""
    systemctl: str = "systemctl"
    systemd_run: str = "systemd-run"
    imds_url: str = "http://169.254.169.254"

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None = None) -> Settings:
        """Defaults, each replaced by the environment variable of its name upper-cased (``JOB_TORCHRUN``
        etc. for the programs: ``TORCHRUN`` alone would be too easy to set by accident)."""
        env = os.environ if environ is None else environ
        values = {}
        for field in fields(cls):
            name = ENV_NAMES.get(field.name, field.name.upper())
            if env.get(name):
                values[field.name] = env[name]
        return cls(**values)

    def as_dict(self) -> dict[str, str]:
        return asdict(self)

    def on_node(self, fsx_path: str) -> str:
        """A checked ``/fsx[/...]`` path of the job document, where it is on this node."""
        return self.fsx_mount_point.rstrip("/") + fsx_path.removeprefix("/fsx") or "/"

    def check_unit_paths(self) -> str | None:
        """The first setting that cannot go into a unit file as is, as an error line; ``None`` when all can."""
        for name in ("node_dir", "python", "node_env_file", "efa_node_env_file", "job_state_dir", "fsx_mount_point"):
            value = getattr(self, name)
            if not UNIT_SAFE_PATH.match(value):
                return f"{name} {value!r} must be an absolute path of [A-Za-z0-9._/-]"
        if not all(UNIT_SAFE_PATH.match(part) for part in self.job_path.split(":")):
            return f"job_path {self.job_path!r} must be absolute paths of [A-Za-z0-9._/-] joined by ':'"
        return None


ENV_NAMES = {
    "torchrun": "JOB_TORCHRUN",
    "python": "JOB_PYTHON",
    "job_path": "JOB_PATH",
    "node_dir": "NODE_DIR",
    "systemctl": "SYSTEMCTL_BIN",
    "systemd_run": "SYSTEMD_RUN_BIN",
}

"""The CloudWatch agent configuration of a GPU node (plain JSON the agent reads on the instance).

What it publishes (namespace, measurements, dimensions) is :mod:`agent_metrics`, the one source of
truth alarms, scaling policies and dashboards read; this module renders the agent's file from it
and the node log files the agent ships. Plain Python with no CDK import, so the tests check the
config against the agent's own JSON schema without a synth.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gpu_constructs.fleet.render.agent_metrics import (
    AGGREGATION_DIMENSIONS,
    APPEND_DIMENSIONS,
    DISK_MEASUREMENTS,
    GPU_MEASUREMENTS,
    GPU_SECTION,
    MEM_MEASUREMENTS,
    checked_namespace,
)

# --------------------------------------------------------------------------- disks

#: The root volume holds the OS, container images and the agent's own state.
DEFAULT_DISK_PATHS: Final[tuple[str, ...]] = ("/",)

#: Never report these even if a listed path is one: RAM-backed file systems are
#: covered by ``mem``; overlay and squashfs are container layers and snaps (one
#: series per mount); Lustre is FSx, which publishes its own capacity metrics.
IGNORED_FILE_SYSTEM_TYPES: Final[tuple[str, ...]] = ("tmpfs", "devtmpfs", "overlay", "squashfs", "lustre")

# --------------------------------------------------------------------------- logs

#: One stream per instance, named by the agent: a node's lines stay together and
#: a terminated Spot node's log is still there under its id.
LOG_STREAM_NAME: Final = "{instance_id}"

#: Seconds between log uploads. Short because a Spot node has two minutes from the
#: interruption notice to termination, and the Spot watcher's last lines matter most.
LOGS_FORCE_FLUSH_INTERVAL_S: Final = 5

# CloudWatch Logs group names: 1-512 of letters, digits and _ - / . # (CreateLogGroup).
_LOG_GROUP_RE: Final = re.compile(r"[A-Za-z0-9_\-/.#]{1,512}")
_LOG_NAME_RE: Final = re.compile(r"[a-z][a-z0-9-]{0,62}")

#: Linux user the agent runs as (see :func:`agent_config`).
AGENT_USER: Final = "cwagent"


@dataclass(frozen=True)
class NodeLogFile:
    """A log file a node writes and the log group it is shipped to.

    The group must exist already: the CDK app creates it (retention, KMS key,
    removal policy) so that the instance role needs no ``logs:CreateLogGroup``.
    The file must be readable by the agent's user (:data:`AGENT_USER`), i.e. mode
    0644 as a root process with the default umask writes it.

    Attributes:
        name: short id, unique per node (``spot-watcher``).
        file_path: absolute path on the node.
        log_group_name: concrete name (not a token), so that it can also scope the
            instance role's policy and be checked here.
    """

    name: str
    file_path: str
    log_group_name: str

    def __post_init__(self) -> None:
        if not _LOG_NAME_RE.fullmatch(self.name):
            raise ValueError(
                f"node log name {self.name!r} is invalid; fix: lowercase letters, digits and '-', starting with a letter"
            )
        if not self.file_path.startswith("/") or len(self.file_path) > 4096:
            raise ValueError(f"node log {self.name}: file_path {self.file_path!r} is not an absolute path")
        if not _LOG_GROUP_RE.fullmatch(self.log_group_name):
            raise ValueError(
                f"node log {self.name}: log group name {self.log_group_name!r} is invalid; "
                "fix: 1-512 characters, letters, digits and _ - / . # (a concrete name, not a CDK token)"
            )


# --------------------------------------------------------------------------- the config


def agent_config(
    *,
    namespace: str,
    log_files: Sequence[NodeLogFile],
    metrics_interval_s: int = 60,
    disk_paths: Sequence[str] = DEFAULT_DISK_PATHS,
) -> dict[str, Any]:
    """The CloudWatch agent's JSON config for a GPU node, as a fresh dict.

    Decisions:

    - ``run_as_user`` is :data:`AGENT_USER`, the unprivileged user the agent's
      package creates, not root (the agent's default on Linux). Nothing here needs
      root: ``mem`` reads /proc, ``disk`` calls statfs, nvidia-smi opens device
      nodes that the driver makes world-accessible, and the node logs are 0644.
      The agent is a long-running process that parses files; as root a flaw in it
      would own the node.
    - ``omit_hostname``: the host name is redundant with ``InstanceId`` and would
      only multiply series.
    - Log retention is not set here (``retention_in_days``): the CDK app owns the
      log groups. Set by the agent it would need ``logs:PutRetentionPolicy`` on the
      instance role and would fight CloudFormation over the value (drift).
    - Sub-minute ``metrics_interval_s`` makes high-resolution metrics, billed as
      such; alarms then may use 10 s or 30 s periods.

    Args:
        namespace: usually :func:`namespace_for` of the environment.
        log_files: the node's logs; none means no ``logs`` section at all (the
            agent's schema requires a non-empty ``collect_list``).
        metrics_interval_s: collection interval in seconds (1 - 172800).
        disk_paths: mount points whose usage is reported (absolute, unique).
    """
    _check_arguments(namespace, log_files, metrics_interval_s, disk_paths)
    config: dict[str, Any] = {
        "agent": {
            "metrics_collection_interval": metrics_interval_s,
            "run_as_user": AGENT_USER,
            "omit_hostname": True,
        },
        "metrics": _metrics_section(namespace, metrics_interval_s, disk_paths),
    }
    if log_files:
        config["logs"] = _logs_section(log_files)
    return config


def _check_arguments(
    namespace: str, log_files: Sequence[NodeLogFile], metrics_interval_s: int, disk_paths: Sequence[str]
) -> None:
    """Raise ValueError for what the agent would reject or silently misread (see :func:`agent_config`)."""
    checked_namespace(namespace)
    if type(metrics_interval_s) is not int or not 1 <= metrics_interval_s <= 172_800:
        raise ValueError(f"metrics_interval_s {metrics_interval_s!r} is invalid; fix: an integer from 1 to 172800")
    _check_unique("disk path", disk_paths)
    for path in disk_paths:
        if not path.startswith("/"):
            raise ValueError(f"disk path {path!r} is not an absolute mount point")
    _check_unique("node log name", [f.name for f in log_files])
    _check_unique("node log file_path", [f.file_path for f in log_files])


def _metrics_section(namespace: str, metrics_interval_s: int, disk_paths: Sequence[str]) -> dict[str, Any]:
    """The ``metrics`` section: GPU, memory and disk measurements (:mod:`agent_metrics`) in ``namespace``."""
    return {
        "namespace": namespace,
        "append_dimensions": dict(APPEND_DIMENSIONS),
        "aggregation_dimensions": [list(dims) for dims in AGGREGATION_DIMENSIONS],
        "metrics_collected": {
            GPU_SECTION: {
                "measurement": list(GPU_MEASUREMENTS),
                "metrics_collection_interval": metrics_interval_s,
            },
            "mem": {"measurement": list(MEM_MEASUREMENTS)},
            "disk": {
                "measurement": list(DISK_MEASUREMENTS),
                "resources": list(disk_paths),
                "ignore_file_system_types": list(IGNORED_FILE_SYSTEM_TYPES),
                # A device name is an accident of the AMI and the instance
                # family (nvme0n1p1, xvda1); without it, a mount point's
                # series has the same dimensions on every node.
                "drop_device": True,
            },
        },
    }


def _logs_section(log_files: Sequence[NodeLogFile]) -> dict[str, Any]:
    """The ``logs`` section: each file to its log group, one stream per instance."""
    return {
        "logs_collected": {
            "files": {
                "collect_list": [
                    {
                        "file_path": f.file_path,
                        "log_group_name": f.log_group_name,
                        "log_stream_name": LOG_STREAM_NAME,
                    }
                    for f in log_files
                ]
            }
        },
        "force_flush_interval": LOGS_FORCE_FLUSH_INTERVAL_S,
    }


def to_json(config: Mapping[str, Any]) -> str:
    """The config as the agent's file content, byte-stable for snapshot diffs.

    The ``${aws:...}`` placeholders are for the agent: never pass this text through
    ``Fn::Sub`` (``Fn.sub``), which would read them as its own variables.
    """
    return json.dumps(config, indent=2, sort_keys=True) + "\n"


def _check_unique(what: str, values: Sequence[str]) -> None:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{what} {value!r} appears twice; fix: list each once")
        seen.add(value)

"""The CloudWatch agent configuration of a GPU node, and the metric names it publishes.

This module is the one source of truth for what a node publishes: the namespace,
the measurements and the dimensions. Alarms, scaling policies and dashboards take
their metric names from here instead of spelling ``nvidia_smi_utilization_gpu``
themselves: an alarm on a metric nobody publishes never fires, it sits in
INSUFFICIENT_DATA, so a renamed or dropped measurement must break a test, not an
on-call night.

It is plain Python with no CDK import: the agent reads plain JSON on the instance,
and a stack only has to place it (an SSM parameter, a file in user data). The
tests can therefore check the config against the agent's own JSON schema without
a synth.

Facts about the agent this relies on (aws/amazon-cloudwatch-agent, ``translator/``):

- The config section ``nvidia_gpu`` is translated to the ``nvidia_smi`` input
  (``metrics_collect/gpu/nvidiaSmi.go``); a metric is published as
  ``<input>_<measurement>``, so ``utilization_gpu`` becomes
  ``nvidia_smi_utilization_gpu`` (the AWS "Collect NVIDIA GPU metrics" page lists
  the same names, published without a CloudWatch unit).
- The translator keeps only measurements on its Linux allow-list for
  ``nvidia_smi`` (``metrics/config/registered_metrics.go``) and drops the rest;
  :data:`SUPPORTED_GPU_MEASUREMENTS` mirrors that list so a test catches a name
  the agent would ignore.
- GPU metrics carry the dimensions ``index`` and ``name`` (the agent excludes
  ``compute_mode``, ``pstate`` and ``uuid``); when ``append_dimensions`` is set the
  ``host`` dimension is not added (the schema's description of ``omit_hostname``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final

# --------------------------------------------------------------------------- namespace

#: Every metric of a node goes to one namespace per environment, so that dev's
#: experiments never move prod's fleet-wide aggregates or alarms.
NAMESPACE_FORMAT: Final = "GpuPlatform/{env}"

# CloudWatch namespaces: 1-255 of letters, digits and . - _ / # : and space, and
# "AWS/" is reserved for AWS services (PutMetricData API reference).
_NAMESPACE_RE: Final = re.compile(r"[A-Za-z0-9.\-_/#: ]{1,255}")


def namespace_for(env: str) -> str:
    """The metrics namespace of environment ``env`` (``GpuPlatform/dev``)."""
    return _checked_namespace(NAMESPACE_FORMAT.format(env=env))


def _checked_namespace(namespace: str) -> str:
    if not _NAMESPACE_RE.fullmatch(namespace) or not namespace.strip():
        raise ValueError(
            f"metrics namespace {namespace!r} is invalid; fix: 1-255 characters, letters, digits and . - _ / # : space"
        )
    if namespace.startswith("AWS/"):
        raise ValueError(
            f"metrics namespace {namespace!r} starts with the reserved 'AWS/'; fix: use namespace_for(env)"
        )
    return namespace


# --------------------------------------------------------------------------- measurements

#: Key of the GPU section in the agent's config file.
GPU_SECTION: Final = "nvidia_gpu"
#: Prefix of the published GPU metric names (the input the section maps to).
GPU_METRIC_PREFIX: Final = "nvidia_smi"

#: Config sections whose published prefix differs from their key.
_SECTION_PREFIX: Final[Mapping[str, str]] = MappingProxyType({GPU_SECTION: GPU_METRIC_PREFIX})

#: Measurements the agent accepts for ``nvidia_smi`` on Linux (its allow-list, see
#: the module docstring). A name outside it is silently not collected.
SUPPORTED_GPU_MEASUREMENTS: Final[frozenset[str]] = frozenset(
    {
        "utilization_gpu",
        "utilization_memory",
        "temperature_gpu",
        "power_draw",
        "fan_speed",
        "memory_total",
        "memory_used",
        "memory_free",
        "pcie_link_gen_current",
        "pcie_link_width_current",
        "encoder_stats_session_count",
        "encoder_stats_average_fps",
        "encoder_stats_average_latency",
        "clocks_current_graphics",
        "clocks_current_sm",
        "clocks_current_memory",
        "clocks_current_video",
    }
)


class GpuMeasurement(StrEnum):
    """The GPU measurements every node collects: what ML training and inference need.

    Each one is a custom metric per GPU per instance (8 per p4d/p5 node), so the
    list is short on purpose. Left out: ``fan_speed`` (data-centre GPUs are
    passively cooled; nvidia-smi reports N/A), ``memory_free`` (total minus used,
    by metric math), the encoder statistics (video) and the graphics/video clocks
    (the SM clock is the one that drops when a GPU throttles).
    """

    UTILIZATION_GPU = "utilization_gpu"  # % of time a kernel ran: idle or saturated fleet
    UTILIZATION_MEMORY = "utilization_memory"  # % of time device memory was read or written
    MEMORY_USED = "memory_used"  # MiB: headroom before CUDA out-of-memory
    MEMORY_TOTAL = "memory_total"  # MiB: the denominator for a memory-used percentage
    TEMPERATURE_GPU = "temperature_gpu"  # deg C: > 85 is critical (DESIGN.md seed thresholds)
    POWER_DRAW = "power_draw"  # W: power capping shows as a plateau here
    CLOCKS_CURRENT_SM = "clocks_current_sm"  # MHz: drops under load = thermal or power throttling
    CLOCKS_CURRENT_MEMORY = "clocks_current_memory"  # MHz: HBM clock, drops with the same causes

    @property
    def metric_name(self) -> str:
        """Published metric name, e.g. ``nvidia_smi_utilization_gpu``."""
        return f"{GPU_METRIC_PREFIX}_{self.value}"


#: The collected GPU measurements, in config order.
GPU_MEASUREMENTS: Final[tuple[str, ...]] = tuple(m.value for m in GpuMeasurement)


def gpu_metric_name(measurement: str) -> str:
    """Published name of a collected GPU measurement (``nvidia_smi_<measurement>``).

    Only collected measurements have a name here: asking for one the config does
    not collect (a typo, or ``fan_speed``) raises instead of giving the name of a
    metric that never arrives.
    """
    try:
        return GpuMeasurement(measurement).metric_name
    except ValueError:
        raise ValueError(
            f"{measurement!r} is not a GPU measurement the nodes collect; collected: {', '.join(GPU_MEASUREMENTS)}"
        ) from None


#: Host memory: a data loader or a leak runs the node out of memory before the GPU.
MEM_MEASUREMENTS: Final[tuple[str, ...]] = ("used_percent",)
#: Root and scratch volumes: checkpoints, container images and caches fill them.
DISK_MEASUREMENTS: Final[tuple[str, ...]] = ("used_percent",)

MEM_USED_PERCENT: Final = "mem_used_percent"
DISK_USED_PERCENT: Final = "disk_used_percent"


def metric_names() -> tuple[str, ...]:
    """Every metric name :func:`agent_config` publishes, relative to its namespace.

    Derived from the constants; :func:`published_metrics` derives the same set from
    a config, so a test can hold both sides against each other and against the
    metric names alarms and dashboards use.
    """
    return (
        *(m.metric_name for m in GpuMeasurement),
        *(f"mem_{m}" for m in MEM_MEASUREMENTS),
        *(f"disk_{m}" for m in DISK_MEASUREMENTS),
    )


def published_metrics(config: Mapping[str, Any]) -> frozenset[str]:
    """Metric names an agent config publishes, read from the config itself.

    Follows the agent's naming: the section's prefix (``nvidia_gpu`` publishes as
    ``nvidia_smi``), a measurement given with its prefix is not prefixed twice, and
    a ``rename`` replaces the name.
    """
    names: set[str] = set()
    collected = config.get("metrics", {}).get("metrics_collected", {})
    for section, body in collected.items():
        prefix = _SECTION_PREFIX.get(section, section)
        for item in body.get("measurement", ()):
            if isinstance(item, Mapping):
                if "rename" in item:
                    names.add(item["rename"])
                    continue
                item = item["name"]
            names.add(f"{prefix}_{item.removeprefix(prefix + '_')}")
    return frozenset(names)


# --------------------------------------------------------------------------- dimensions

INSTANCE_ID: Final = "InstanceId"
AUTO_SCALING_GROUP_NAME: Final = "AutoScalingGroupName"
INSTANCE_TYPE: Final = "InstanceType"

#: Added to every metric. ``AutoScalingGroupName`` is what makes a fleet alarm
#: possible; ``InstanceId`` finds the node; ``InstanceType`` separates the types a
#: Spot fleet mixes (a g5 and a p4d have different normal temperatures and power).
#: The values are the agent's own placeholders, resolved on the instance.
APPEND_DIMENSIONS: Final[Mapping[str, str]] = MappingProxyType(
    {
        INSTANCE_ID: "${aws:InstanceId}",
        AUTO_SCALING_GROUP_NAME: "${aws:AutoScalingGroupName}",
        INSTANCE_TYPE: "${aws:InstanceType}",
    }
)

#: Per fleet, across all its GPUs and nodes: what alarms and scaling policies use
#: (GPU utilisation > 95 % for 10 min, temperature Maximum > 85 C, scale out/in).
FLEET_AGGREGATION: Final[tuple[str, ...]] = (AUTO_SCALING_GROUP_NAME,)
#: Per node, across its GPUs, still filterable by fleet: the dashboard's "which
#: node" view. One extra series per node and measurement; nodes are ephemeral, so
#: nothing alarms on it.
NODE_AGGREGATION: Final[tuple[str, ...]] = (AUTO_SCALING_GROUP_NAME, INSTANCE_ID)
AGGREGATION_DIMENSIONS: Final[tuple[tuple[str, ...], ...]] = (FLEET_AGGREGATION, NODE_AGGREGATION)


def fleet_dimensions(auto_scaling_group_name: str) -> dict[str, str]:
    """Dimensions of a fleet-wide metric (the :data:`FLEET_AGGREGATION` series).

    The name may be a CDK token (``asg.auto_scaling_group_name``): it is only
    placed, not checked.
    """
    return {AUTO_SCALING_GROUP_NAME: auto_scaling_group_name}


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
    _checked_namespace(namespace)
    if type(metrics_interval_s) is not int or not 1 <= metrics_interval_s <= 172_800:
        raise ValueError(f"metrics_interval_s {metrics_interval_s!r} is invalid; fix: an integer from 1 to 172800")
    _check_unique("disk path", disk_paths)
    for path in disk_paths:
        if not path.startswith("/"):
            raise ValueError(f"disk path {path!r} is not an absolute mount point")
    _check_unique("node log name", [f.name for f in log_files])
    _check_unique("node log file_path", [f.file_path for f in log_files])

    config: dict[str, Any] = {
        "agent": {
            "metrics_collection_interval": metrics_interval_s,
            "run_as_user": AGENT_USER,
            "omit_hostname": True,
        },
        "metrics": {
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
        },
    }
    if log_files:
        config["logs"] = {
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
    return config


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

"""The metric names, namespace and dimensions a GPU node's CloudWatch agent publishes.

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

import re
from collections.abc import Mapping
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
    return checked_namespace(NAMESPACE_FORMAT.format(env=env))


def checked_namespace(namespace: str) -> str:
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

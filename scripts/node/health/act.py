"""What the GPU health check does about its verdict: logs it, fixes what it may, tells AWS.

Owns the node's side effects besides reading: the reasons in the log (and how its lines are written), ``nvidia-smi
-pm 1`` when persistence mode is off, the instance identity (flags, else IMDSv2), the CloudWatch metrics
(``GpuHealthCheckFailed`` and ``PlatformUnitsDown`` per Auto Scaling group, ``NodeRunning`` per group and market)
and ``SetInstanceHealth(Unhealthy)``. The AWS calls take a client; gpu_health opens them.
"""

from __future__ import annotations

import argparse
import fcntl
import logging
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from imds_client import ImdsClient, ImdsError

from health.decide import PERSISTENCE_FIX_COMMAND, HealthReport
from health.parse import first_line
from health.probe import run_command
from health.units import UNITS_DOWN_METRIC

LOG = logging.getLogger("gpu-health")

METRIC_NAME = "GpuHealthCheckFailed"
DEFAULT_NAMESPACE = "GpuPlatform/Node"
ASG_DIMENSION = "AutoScalingGroupName"
NODE_RUNNING_METRIC = "NodeRunning"
MARKET_DIMENSION = "Market"
REASON_METRIC = "GpuNodeUnhealthy"
"""1 per failing check and reason class (dimension Reason: xid-<code>, dcgm-<test>, efa, fabric, driver,
gpu-count, ecc, dcgm-not-run), per group: the dashboard's "nodes replaced this week, by reason"."""
REASON_DIMENSION = "Reason"
CHECKPOINT_LOCK = "/run/gpu-platform/checkpoint.lock"
"""checkpoint-hook.sh holds an exclusive flock on it while a checkpoint request runs."""


def fix_persistence(report: HealthReport, timeout_s: float) -> bool:
    """Turn persistence mode on (``nvidia-smi -pm 1``, all GPUs); True when nvidia-smi says it did."""
    result = run_command(PERSISTENCE_FIX_COMMAND, timeout_s)
    gpus = ", ".join(str(index) for index in report.persistence_off)
    if result.returncode == 0:
        LOG.info("persistence mode turned on (GPU %s were off): %s", gpus, first_line(result.stdout))
        return True
    why = "timed out" if result.timed_out else "not found" if result.not_found else f"exited {result.returncode}"
    LOG.warning(
        "%s %s: persistence mode stays off on GPU %s: %s",
        " ".join(PERSISTENCE_FIX_COMMAND),
        why,
        gpus,
        first_line(result.stderr) or first_line(result.stdout),
    )
    return False


@dataclass(frozen=True)
class NodeIdentity:
    instance_id: str | None
    region: str | None
    asg_name: str | None
    market: str | None = None  # spot | on-demand: the dashboard counts nodes per market


def resolve_identity(args: argparse.Namespace) -> NodeIdentity:
    """Flags win; IMDSv2 fills in the rest. An IMDS failure leaves the fields unknown."""
    instance_id, region, asg_name = args.instance_id, args.region, args.asg_name
    if instance_id and region and asg_name:
        return NodeIdentity(instance_id, region, asg_name)
    try:
        imds = ImdsClient(args.imds_url)
        instance_id = instance_id or imds.instance_id()
        region = region or imds.region()
        asg_name = asg_name or imds.asg_name()
        market = imds.market()
    except ImdsError as err:
        LOG.error("cannot read the instance identity from IMDS: %s", err)
        market = None
    return NodeIdentity(instance_id, region, asg_name, market)


def publish_metric(
    cloudwatch: Any,
    namespace: str,
    asg_name: str,
    failed: bool,
    market: str | None = None,
    reasons: Iterable[str] = (),
    units_down: int | None = None,
) -> None:
    """The check's result, one ``GpuNodeUnhealthy`` per reason class when it failed, the count of the platform's
    units that are down (when they were checked), and (when the market is known) one ``NodeRunning`` per node and
    market, which the dashboard sums into Spot and On-Demand node counts per fleet."""
    group = [{"Name": ASG_DIMENSION, "Value": asg_name}]
    data = [{"MetricName": METRIC_NAME, "Dimensions": group, "Value": 1.0 if failed else 0.0, "Unit": "Count"}]
    if units_down is not None:
        data.append({"MetricName": UNITS_DOWN_METRIC, "Dimensions": group, "Value": float(units_down), "Unit": "Count"})
    data += [
        {
            "MetricName": REASON_METRIC,
            "Dimensions": [{"Name": ASG_DIMENSION, "Value": asg_name}, {"Name": REASON_DIMENSION, "Value": reason}],
            "Value": 1.0,
            "Unit": "Count",
        }
        for reason in (reasons if failed else ())
    ]
    if market:
        data.append(
            {
                "MetricName": NODE_RUNNING_METRIC,
                "Dimensions": [{"Name": ASG_DIMENSION, "Value": asg_name}, {"Name": MARKET_DIMENSION, "Value": market}],
                "Value": 1.0,
                "Unit": "Count",
            }
        )
    cloudwatch.put_metric_data(Namespace=namespace, MetricData=data)


def wait_for_checkpoint(lock_path: str, wait_s: float, poll_s: float = 1.0) -> bool:
    """True once no checkpoint request holds ``lock_path`` (or none ever ran: no lock file); False when
    one still runs after ``wait_s``. A shared lock on a read-only descriptor: it never blocks the hook
    for longer than one probe, and the unit's read-only view of /run/gpu-platform suffices."""
    try:
        fd = os.open(lock_path, os.O_RDONLY)
    except FileNotFoundError:
        return True
    deadline = time.monotonic() + wait_s
    logged = False
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
                return True
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return False
                if not logged:
                    LOG.info("a checkpoint is in progress (%s held): waiting up to %g s", lock_path, wait_s)
                    logged = True
                time.sleep(poll_s)
    finally:
        os.close(fd)


def mark_unhealthy(autoscaling: Any, instance_id: str) -> None:
    autoscaling.set_instance_health(InstanceId=instance_id, HealthStatus="Unhealthy", ShouldRespectGracePeriod=False)


def log_report(report: HealthReport) -> None:
    for warning in report.warnings:
        LOG.warning(warning)
    if report.healthy:
        LOG.info("healthy")
        return
    for reason in report.reasons:
        LOG.error("unhealthy: %s", reason)


class _JournalFormatter(logging.Formatter):
    """Under systemd, prefix lines with <priority> so the journal keeps their level."""

    _PRIORITY: ClassVar[dict[int, int]] = {
        logging.DEBUG: 7,
        logging.INFO: 6,
        logging.WARNING: 4,
        logging.ERROR: 3,
        logging.CRITICAL: 2,
    }

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        if os.environ.get("JOURNAL_STREAM"):
            return f"<{self._PRIORITY.get(record.levelno, 6)}>{line}"
        return line


def configure_logging() -> None:
    if LOG.handlers:
        return
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(_JournalFormatter("gpu-health: %(levelname)s %(message)s"))
    LOG.addHandler(handler)
    LOG.setLevel(logging.INFO)

#!/usr/bin/env python3
"""GPU health check for a GPU node of the platform.

Reads ``nvidia-smi``, the kernel log (NVRM Xid lines), on NVSwitch types the Fabric Manager state,
on EFA fleets the EFA devices, libfabric's efa provider and NCCL's OFI plugin, and, where ``dcgmi``
is installed, a DCGM diagnostic (``--dcgm-level``); decides with a pure function (``evaluate``);
then, behind flags, logs the reasons, turns persistence mode back on, publishes
``GpuHealthCheckFailed`` (1 or 0) and ``GpuNodeUnhealthy`` per reason class per Auto Scaling group,
and, once no checkpoint is in progress, marks the instance Unhealthy so that its group replaces it.
It also counts the platform's units that are down (``PlatformUnitsDown``: a metric and an alarm, never
a reason to replace the node; health/units.py).

    gpu_health.py --once --expected-gpus 8                # boot: exit 0 healthy, 1 unhealthy
    gpu_health.py --expected-gpus 8 --interval 300        # long-running loop (the timer is preferred)
    gpu_health.py --once --expected-gpus 8 --no-metric --no-set-health \\
        --nvidia-smi-output smi.txt --kernel-log-file kern.log   # replay recorded outputs

The check is split by concern, flat modules beside this one in /opt/gpu-platform/node:
health_parse, health_dcgm, health_efa (tool output -> facts), health_xids (the Xid policy, data in
xid_catalog.csv), health_decide (facts -> verdict), health_probe (runs the tools), health_units (the
platform's units), health_act (persistence fix, identity, metrics, checkpoint wait, instance health). This module is the command line and the run; it is the one that opens the AWS clients.

Python 3 standard library plus boto3 (imported only when an AWS action runs).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from health.act import (
    CHECKPOINT_LOCK,
    DEFAULT_NAMESPACE,
    METRIC_NAME,
    NODE_RUNNING_METRIC,
    REASON_METRIC,
    NodeIdentity,
    configure_logging,
    fix_persistence,
    log_report,
    mark_unhealthy,
    publish_metric,
    resolve_identity,
    wait_for_checkpoint,
)
from health.dcgm import DCGM_LEVEL_TIMEOUT_S, DcgmOutcome, parse_dcgm_json
from health.decide import FABRIC_MANAGER_UNIT, HealthReport, evaluate
from health.efa import FI_INFO_BIN
from health.parse import SmiResult
from health.probe import NVIDIA_SMI_COMMAND, read_efa, read_fabric, read_kernel_log, run_command, run_dcgm_diag
from health.units import UNITS_DOWN_METRIC, add_unit_arguments, check_units
from health.xids import parse_extra_xids
from imds_client import DEFAULT_IMDS_URL
from slurm_node import act_on_verdict, add_slurm_arguments

LOG = logging.getLogger("gpu-health")

# The metric names stay readable from the entry point: the fleet's alarms and dashboard tests read them here.
__all__ = [
    "METRIC_NAME",
    "NODE_RUNNING_METRIC",
    "REASON_METRIC",
    "UNITS_DOWN_METRIC",
    "apply_actions",
    "build_parser",
    "check_once",
    "main",
]


def _extra_xids(text: str) -> dict[int, str]:
    try:
        return parse_extra_xids(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="GPU health check: nvidia-smi, NVRM Xids, NVSwitch fabric, EFA, DCGM.")
    parser.add_argument("--expected-gpus", type=int, required=True, help="GPU count of the instance type")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="check once; exit 0 healthy, 1 unhealthy")
    mode.add_argument("--interval", type=float, default=300.0, help="seconds between checks when looping")
    parser.add_argument("--namespace", default=DEFAULT_NAMESPACE, help="CloudWatch namespace of the metric")
    parser.add_argument("--asg-name", help="default: IMDS tag aws:autoscaling:groupName")
    parser.add_argument("--instance-id", help="default: from IMDS")
    parser.add_argument("--region", help="default: from IMDS")
    parser.add_argument("--imds-url", default=DEFAULT_IMDS_URL)
    parser.add_argument("--no-metric", action="store_true", help=f"do not publish {METRIC_NAME}")
    parser.add_argument("--no-set-health", action="store_true", help="do not mark the instance Unhealthy")
    # Defaults from node.env (gpu-health.service reads it as EnvironmentFile=): HEALTH_* keys of the fleet's
    # health settings, EXPECTED_EFA from the bootstrap. Flags win (the bootstrap passes them).
    parser.add_argument(
        "--extra-fatal-xids",
        type=_extra_xids,
        default=_extra_xids(os.environ.get("HEALTH_EXTRA_FATAL_XIDS", "")),
        help="comma-separated Xid codes the fleet makes unhealthy on top of xid_catalog.csv",
    )
    parser.add_argument(
        "--dcgm",
        choices=("auto", "off", "required"),
        default=os.environ.get("HEALTH_DCGM") or "auto",
        help="auto: run dcgmi diag when installed; required: a DCGM that did not run is a failure",
    )
    parser.add_argument("--dcgm-level", type=int, choices=sorted(DCGM_LEVEL_TIMEOUT_S), default=1)
    parser.add_argument("--dcgm-timeout", type=float, help="default: the level's budget (health_dcgm)")
    parser.add_argument(
        "--efa-devices",
        type=int,
        default=int(os.environ.get("EXPECTED_EFA") or 0),
        help="EFA fleets: the type's EFA interface count; 0 skips the EFA check",
    )
    parser.add_argument("--fi-info", default=os.environ.get("FI_INFO_BIN") or FI_INFO_BIN)
    parser.add_argument("--ofi-nccl-dir", action="append", help="where NCCL's OFI plugin may be (repeatable)")
    parser.add_argument("--checkpoint-lock", default=CHECKPOINT_LOCK)
    parser.add_argument(
        "--checkpoint-wait", type=float, default=240.0, help="seconds to wait for a checkpoint before Unhealthy"
    )
    parser.add_argument(
        "--fabric-manager",
        choices=("auto", "off"),
        default="auto",
        help="auto: on NVSwitch types (p4d, p4de, p5, p5e, p5en) the NVSwitch fabric must be up",
    )
    parser.add_argument(
        "--fabric-wait", type=float, default=60.0, help="seconds to wait for a fabric still coming up (boot)"
    )
    parser.add_argument("--instance-type", help="default: from IMDS (only NVSwitch types need it)")
    parser.add_argument(
        "--no-fix-persistence", action="store_true", help="only warn when persistence mode is off (nvidia-smi -pm 1)"
    )
    parser.add_argument("--smi-timeout", type=float, default=30.0)
    replay = parser.add_argument_group("replay recorded outputs instead of running the tools")
    replay.add_argument("--nvidia-smi-output", type=Path)
    replay.add_argument("--nvidia-smi-rc", type=int, default=0)
    replay.add_argument("--kernel-log-file", type=Path)
    replay.add_argument("--dcgm-json", type=Path)
    replay.add_argument("--nvidia-smi-q-output", type=Path, help="recorded nvidia-smi -q (Fabric sections)")
    replay.add_argument("--fabric-manager-state", help=f"recorded systemctl is-active {FABRIC_MANAGER_UNIT}")
    replay.add_argument("--fi-info-output", type=Path, help="recorded fi_info -p efa")
    replay.add_argument("--fi-info-rc", type=int, default=0)
    add_unit_arguments(parser)
    add_slurm_arguments(parser)
    return parser


def collect_and_evaluate(args: argparse.Namespace) -> HealthReport:
    replaying = args.nvidia_smi_output is not None
    fabric, fabric_skipped = read_fabric(args, replaying)
    if args.nvidia_smi_output is not None:
        smi = SmiResult(returncode=args.nvidia_smi_rc, stdout=args.nvidia_smi_output.read_text())
    else:
        smi = run_command(NVIDIA_SMI_COMMAND, args.smi_timeout)
    if args.kernel_log_file is not None:
        kernel_log: str | None = args.kernel_log_file.read_text()
    else:
        kernel_log = read_kernel_log()
    level = args.dcgm_level
    if args.dcgm_json is not None:
        dcgm = parse_dcgm_json(args.dcgm_json.read_text(), level)
    elif args.dcgm == "off":
        dcgm = None
    else:
        dcgm = run_dcgm_diag(level, args.dcgm_timeout or DCGM_LEVEL_TIMEOUT_S[level])
        if dcgm is None and args.dcgm == "required":
            dcgm = DcgmOutcome(error="dcgmi is not installed but --dcgm required was given", level=level)
    report = evaluate(
        smi,
        kernel_log,
        args.expected_gpus,
        dcgm,
        extra_xids=args.extra_fatal_xids,
        dcgm_required=args.dcgm == "required",
        smi_timeout_s=args.smi_timeout,
        fabric=fabric,
        efa=read_efa(args),
    )
    if fabric_skipped:
        report.warnings.append(fabric_skipped)
    return report


def apply_actions(
    report: HealthReport,
    identity: NodeIdentity,
    *,
    namespace: str,
    publish: bool,
    set_health: bool,
    session: Any = None,
    checkpoint_lock: str = CHECKPOINT_LOCK,
    checkpoint_wait_s: float = 240.0,
    units_down: int | None = None,
) -> list[str]:
    """Publish the metrics and, when unhealthy, mark the instance Unhealthy once no checkpoint is in
    progress (its termination would cut the checkpoint short); a checkpoint still running after
    ``checkpoint_wait_s`` defers the mark to the next check. Each action runs even if the other
    failed; the errors are logged and returned."""
    errors: list[str] = []
    if not (publish or set_health):
        return errors
    if not (identity.asg_name and identity.region):
        errors.append("no Auto Scaling group name or region (pass --asg-name/--region or enable IMDS tags)")
        LOG.error("skipping AWS actions: %s", errors[-1])
        return errors
    if session is None:
        import boto3  # only the AWS actions need it

        session = boto3.session.Session(region_name=identity.region)
    if publish:
        try:
            publish_metric(
                session.client("cloudwatch"),
                namespace,
                identity.asg_name,
                not report.healthy,
                identity.market,
                report.reason_classes,
                units_down,
            )
            units = "" if units_down is None else f", {UNITS_DOWN_METRIC}={units_down}"
            LOG.info("published %s=%d%s to %s", METRIC_NAME, int(not report.healthy), units, namespace)
        except Exception as err:  # botocore errors share no base class worth importing here
            errors.append(f"put_metric_data failed: {err}")
            LOG.error(errors[-1])
    if set_health and not report.healthy:
        if not identity.instance_id:
            errors.append("no instance id: cannot mark the instance Unhealthy")
            LOG.error(errors[-1])
            return errors
        if not wait_for_checkpoint(checkpoint_lock, checkpoint_wait_s):
            LOG.warning(
                "a checkpoint is still in progress after %g s (%s): Unhealthy deferred to the next check",
                checkpoint_wait_s,
                checkpoint_lock,
            )
            return errors
        try:
            mark_unhealthy(session.client("autoscaling"), identity.instance_id)
            LOG.warning("marked %s Unhealthy in %s", identity.instance_id, identity.asg_name)
        except Exception as err:
            errors.append(f"set_instance_health failed: {err}")
            LOG.error(errors[-1])
    return errors


def check_once(args: argparse.Namespace, session: Any = None) -> HealthReport:
    report = collect_and_evaluate(args)
    log_report(report)
    act_on_verdict(args, report, LOG)  # under Slurm: drain with the reason first, so that no new job lands here
    if report.persistence_off and not args.no_fix_persistence:
        if args.nvidia_smi_output is not None:
            LOG.info("replayed nvidia-smi output: persistence mode left as it is")
        else:
            fix_persistence(report, args.smi_timeout)
    units_down = check_units(args)
    publish, set_health = not args.no_metric, not args.no_set_health
    if publish or set_health:
        apply_actions(
            report,
            resolve_identity(args),
            namespace=args.namespace,
            publish=publish,
            set_health=set_health,
            session=session,
            checkpoint_lock=args.checkpoint_lock,
            checkpoint_wait_s=args.checkpoint_wait,
            units_down=units_down,
        )
    return report


def main(argv: list[str] | None = None, session: Any = None) -> int:
    configure_logging()
    args = build_parser().parse_args(argv)
    if args.expected_gpus < 1:
        LOG.error("--expected-gpus must be at least 1, got %d", args.expected_gpus)
        return 2
    while True:
        report = check_once(args, session)
        if args.once:
            return 0 if report.healthy else 1
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())

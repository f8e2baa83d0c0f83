"""Reading a GPU node for the health check: runs the tools, returns their output (I/O, no verdict).

Owns the commands the check runs and how: ``nvidia-smi`` with a timeout that survives a hung
driver, the kernel log (``journalctl -k``, else ``dmesg``), ``dcgmi diag -r 1 -j`` where it is
installed, the instance type from IMDSv2, and the Fabric Manager probe of NVSwitch types
(``systemctl is-active`` or ``nvidia-smi -q``, polled while the fabric is still coming up).
health.parse turns the output into facts; health.decide judges them.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import subprocess
import time
from collections.abc import Iterable

from imds_client import ImdsClient, ImdsError

from health.dcgm import DcgmOutcome, parse_dcgm_json
from health.decide import FABRIC_MANAGER_UNIT, FabricInput, fabric_check, fabric_reasons
from health.efa import EfaInput, find_ofi_nccl, parse_fi_info
from health.parse import NVIDIA_SMI_FIELDS, SmiResult, first_line

LOG = logging.getLogger("gpu-health")

NVIDIA_SMI_COMMAND = (
    "nvidia-smi",
    "--query-gpu=" + ",".join(NVIDIA_SMI_FIELDS),
    "--format=csv,noheader,nounits",
)
NVIDIA_SMI_QUERY_COMMAND = ("nvidia-smi", "-q")
FABRIC_POLL_S = 2.0  # at boot Fabric Manager may still be starting: look again this often, up to --fabric-wait
INSTANCE_TYPE_PATH = "/latest/meta-data/instance-type"
KERNEL_LOG_COMMANDS = (
    ("journalctl", "-k", "--no-pager", "-q", "-o", "short-iso"),  # -k: kernel messages of this boot
    ("dmesg", "--time-format", "iso"),
)


def run_command(command: Iterable[str], timeout_s: float) -> SmiResult:
    """Run a command with a timeout. A process stuck in the driver (D state) may ignore SIGKILL,
    so after a timeout this waits a few seconds for it to die and then leaves it behind."""
    argv = list(command)
    try:
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except FileNotFoundError:
        return SmiResult(returncode=None, stdout="", not_found=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        try:
            stdout, stderr = process.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            stdout, stderr = "", ""
        return SmiResult(returncode=None, stdout=stdout or "", stderr=stderr or "", timed_out=True)
    return SmiResult(returncode=process.returncode, stdout=stdout, stderr=stderr)


def read_kernel_log(timeout_s: float = 30) -> str | None:
    for command in KERNEL_LOG_COMMANDS:
        result = run_command(command, timeout_s)
        if result.returncode == 0:
            return result.stdout
    return None


def dcgm_command(level: int) -> tuple[str, ...]:
    return ("dcgmi", "diag", "-r", str(level), "-j")


def run_dcgm_diag(level: int, timeout_s: float) -> DcgmOutcome | None:
    """None when dcgmi is not installed. dcgmi exits non-zero when a test fails, so the JSON decides."""
    if shutil.which("dcgmi") is None:
        return None
    result = run_command(dcgm_command(level), timeout_s)
    if result.timed_out:
        return DcgmOutcome(error=f"dcgmi diag -r {level} did not finish within {timeout_s:g} s", level=level)
    return parse_dcgm_json(result.stdout, level)


def read_efa(args: argparse.Namespace) -> EfaInput | None:
    """EFA devices, provider and OFI NCCL plugin, for ``--efa-devices N`` > 0 (EFA fleets); None otherwise."""
    if args.efa_devices <= 0:
        return None
    if args.fi_info_output is not None:
        result = SmiResult(returncode=args.fi_info_rc, stdout=args.fi_info_output.read_text())
    else:
        result = run_command((args.fi_info, "-p", "efa"), args.smi_timeout)
    error = "timed out" if result.timed_out else "not found" if result.not_found else first_line(result.stderr)
    return EfaInput(
        expected_devices=args.efa_devices,
        fi_info_rc=result.returncode,
        fi_info=parse_fi_info(result.stdout),
        fi_info_error=error,
        plugin=find_ofi_nccl(args.ofi_nccl_dir) if args.ofi_nccl_dir else find_ofi_nccl(),
    )


def resolve_instance_type(args: argparse.Namespace) -> str | None:
    """``--instance-type``, else IMDS; None (logged) when IMDS cannot say."""
    if args.instance_type:
        return args.instance_type
    try:
        value = ImdsClient(args.imds_url).get(INSTANCE_TYPE_PATH)
    except ImdsError as err:
        LOG.error("cannot read the instance type from IMDS: %s", err)
        return None
    return value.strip() if value else None


def read_fabric(args: argparse.Namespace, replaying: bool) -> tuple[FabricInput | None, str | None]:
    """(what the Fabric Manager check reads, or None; a warning when the check is skipped). Replaying
    recorded nvidia-smi output never runs the live tools: the fabric input is replayed or skipped."""
    if args.fabric_manager == "off":
        return None, None
    if replaying and args.nvidia_smi_q_output is None and args.fabric_manager_state is None:
        return None, "replayed nvidia-smi output without a recorded fabric state: Fabric Manager check skipped"
    instance_type = resolve_instance_type(args)
    if instance_type is None:
        return None, "instance type unknown: Fabric Manager check skipped"
    if fabric_check(instance_type) is None:
        return None, None
    deadline = time.monotonic() + args.fabric_wait
    while True:
        fabric = _read_fabric_once(args, instance_type)
        replayed = args.nvidia_smi_q_output is not None or args.fabric_manager_state is not None
        if replayed or not fabric_reasons(fabric, []) or time.monotonic() >= deadline:
            return fabric, None
        LOG.info("NVSwitch fabric not ready yet on %s: checking again in %g s", instance_type, FABRIC_POLL_S)
        time.sleep(FABRIC_POLL_S)


def _read_fabric_once(args: argparse.Namespace, instance_type: str) -> FabricInput:
    if fabric_check(instance_type) == "service":
        state = args.fabric_manager_state
        if state is None:
            state = run_command(("systemctl", "is-active", FABRIC_MANAGER_UNIT), args.smi_timeout).stdout
        return FabricInput(instance_type, service_state=state)
    if args.nvidia_smi_q_output is not None:
        query = SmiResult(returncode=0, stdout=args.nvidia_smi_q_output.read_text())
        state = args.fabric_manager_state  # replayed: checked only when recorded too
    else:
        query = run_command(NVIDIA_SMI_QUERY_COMMAND, args.smi_timeout)
        state = run_command(("systemctl", "is-active", FABRIC_MANAGER_UNIT), args.smi_timeout).stdout
    return FabricInput(instance_type, smi_query=query, service_state=state)

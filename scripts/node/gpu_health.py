#!/usr/bin/env python3
"""GPU health check for a GPU node of the platform.

Reads ``nvidia-smi``, the kernel log (NVRM Xid lines), on NVSwitch instance types the Fabric
Manager state and, where ``dcgmi`` is installed, a DCGM level 1 diagnostic; decides healthy /
unhealthy with a pure function (``evaluate``); then, behind flags, logs the reasons, turns
persistence mode back on where it was off, publishes ``GpuHealthCheckFailed`` (1 or 0) to
CloudWatch per Auto Scaling group, and marks the instance Unhealthy so that its Auto Scaling
group replaces it.

    gpu_health.py --once --expected-gpus 8                # boot: exit 0 healthy, 1 unhealthy
    gpu_health.py --expected-gpus 8 --interval 300        # long-running loop (the timer is preferred)
    gpu_health.py --once --expected-gpus 8 --no-metric --no-set-health \\
        --nvidia-smi-output smi.txt --kernel-log-file kern.log   # replay recorded outputs

Python 3 standard library plus boto3 (imported only when an AWS action runs).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from imds_client import DEFAULT_IMDS_URL, ImdsClient, ImdsError

LOG = logging.getLogger("gpu-health")

METRIC_NAME = "GpuHealthCheckFailed"
DEFAULT_NAMESPACE = "GpuPlatform/Node"
ASG_DIMENSION = "AutoScalingGroupName"
NODE_RUNNING_METRIC = "NodeRunning"
MARKET_DIMENSION = "Market"

NVIDIA_SMI_FIELDS = (
    "index",
    "name",
    "pci.bus_id",
    "persistence_mode",
    "ecc.errors.uncorrected.volatile.total",
    "temperature.gpu",
)
NVIDIA_SMI_COMMAND = (
    "nvidia-smi",
    "--query-gpu=" + ",".join(NVIDIA_SMI_FIELDS),
    "--format=csv,noheader,nounits",
)
DCGM_COMMAND = ("dcgmi", "diag", "-r", "1", "-j")
NVIDIA_SMI_QUERY_COMMAND = ("nvidia-smi", "-q")
PERSISTENCE_FIX_COMMAND = ("nvidia-smi", "-pm", "1")
FABRIC_MANAGER_UNIT = "nvidia-fabricmanager.service"
FABRIC_POLL_S = 2.0  # at boot Fabric Manager may still be starting: look again this often, up to --fabric-wait
INSTANCE_TYPE_PATH = "/latest/meta-data/instance-type"

# 8-GPU NVSwitch systems (HGX boards): NVLink between the GPUs works only once Fabric Manager has
# set up the NVSwitch fabric. On Ampere (A100) the nvidia-fabricmanager service is the signal; from
# Hopper on, each GPU reports its own fabric registration (`nvidia-smi -q`, "Fabric": State
# Completed, Status Success once registered). Other types have no NVSwitch and are not checked.
FABRIC_BY_SERVICE = frozenset({"p4d.24xlarge", "p4de.24xlarge"})
FABRIC_BY_GPU_STATE = frozenset({"p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge"})
KERNEL_LOG_COMMANDS = (
    ("journalctl", "-k", "--no-pager", "-q", "-o", "short-iso"),  # -k: kernel messages of this boot
    ("dmesg", "--time-format", "iso"),
)

# Xids that mean "this node cannot be trusted with the next job": the GPU needs a reset, a
# reboot or an RMA, none of which a running node can do to itself safely. In an Auto Scaling
# fleet, replacing the instance is the cheapest reset. Meanings and resolutions from NVIDIA's Xid
# catalog for Ampere and newer, A100 and H100 alike (docs.nvidia.com/deploy/xid-errors/
# analyzing-xid-catalog.html: every Xid whose immediate action is RESET_GPU or RESTART_BM, plus
# the memory-error workflows), and the older table for 61:
FATAL_XIDS: Mapping[int, str] = {
    46: "GPU stopped processing (GPU timeout): GPU reset needed",
    48: "double-bit ECC error (DBE): uncorrectable memory error, data already corrupt",
    61: "internal micro-controller breakpoint/warning (PMU): firmware in a bad state, GPU reset needed",
    62: "internal micro-controller halt (PMU): GPU reset needed",
    63: "ECC page retirement / row remap recorded: takes effect only after a GPU reset",
    64: "ECC page retirement / row remap failed: the GPU could not fence bad memory (RMA class)",
    74: "NVLink error: a link is down or degraded, collectives over NVSwitch stall; GPU reset needed",
    79: "GPU has fallen off the bus: gone from PCIe, only a reboot or a new host brings it back",
    92: "high single-bit ECC error rate: predictor of uncorrectable errors",
    94: "contained ECC error: the affected job was killed; row remap needs a GPU reset",
    95: "uncontained ECC error: every job on the GPU is affected; GPU reset needed",
    109: "context switch timeout: the GPU stopped switching contexts; GPU reset needed",
    110: "security fault: GPU reset needed",
    119: "GSP RPC timeout: the GPU System Processor stopped answering (nvidia-smi hangs too)",
    120: "GSP error: fault in the GSP firmware; GPU reset or reboot needed",
    136: "NVLink training failed: a link did not come up; GPU reset needed",
    140: "unrecovered ECC error: uncorrectable errors the driver could not retire or remap",
    143: "GPU initialization error: GPU reset needed",
    155: "NVLink software-defined error: GPU reset needed",
    156: "resource retirement event: the retirement takes effect only after a GPU reset",
    158: "GPU fatal timeout: GPU reset needed",
}
#: NVLink5 errors (Blackwell): fatal when the driver's own line says so ("Fatal", not "Non-fatal").
NVLINK5_XIDS = range(144, 151)
#: Xid 154 names the recovery action the GPU now needs; 0x0 (None) means it needs none again.
RECOVERY_ACTION_XID = 154
# Deliberately NOT fatal: application-caused Xids such as 13 (graphics engine exception),
# 31 (MMU fault / illegal address), 43 (GPU stopped processing) and 45 (preemptive cleanup after
# a killed process). A buggy job raises them on healthy hardware; replacing the node would churn
# the fleet without fixing anything. They are logged as warnings. Xid 154 (recovery action
# changed) reports transitions in both directions: the last one per GPU decides.

HOT_GPU_C = 85  # above this a warning is logged; alarms on temperature belong to MonitoringStack

_XID_RE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)\):"
    r"\s*(?P<code>\d+)(?:,\s*(?P<detail>.*))?"
)
_NOT_A_NUMBER = {"[N/A]", "N/A", "[Not Supported]", "[Unknown Error]", ""}
_NVLINK_FATAL_RE = re.compile(r"(?<![-\w])Fatal\b")
_RECOVERY_RE = re.compile(r"recovery action changed from .*? to (?P<code>0x[0-9A-Fa-f]+)(?: \((?P<name>[^)]*)\))?")


# ---------------------------------------------------------------------------------------------
# Inputs, as data
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SmiResult:
    """What running nvidia-smi gave: exit code and output, or that it hung / is missing."""

    returncode: int | None
    stdout: str
    stderr: str = ""
    timed_out: bool = False
    not_found: bool = False


@dataclass(frozen=True)
class GpuRow:
    index: int
    name: str
    bus_id: str
    persistence_mode: str
    ecc_uncorrected_volatile: int | None  # None: ECC not supported or disabled
    temperature_c: int | None


@dataclass(frozen=True)
class SmiTable:
    gpus: list[GpuRow]
    unparsed: list[str]  # lines that are not GPU rows, e.g. "Unable to determine the device handle ..."


@dataclass(frozen=True)
class XidEvent:
    code: int
    pci: str  # as the kernel wrote it, e.g. "0000:10:1c"
    detail: str


@dataclass(frozen=True)
class DcgmOutcome:
    """A DCGM diagnostic: ``error`` is set when it did not run or its output could not be read."""

    failures: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.error is None and not self.failures


@dataclass(frozen=True)
class FabricInput:
    """What the Fabric Manager check of an NVSwitch type read: ``nvidia-smi -q`` (by GPU state) or
    the unit's ``systemctl is-active`` answer (by service); ``None`` where it could not be read."""

    instance_type: str
    smi_query: SmiResult | None = None
    service_state: str | None = None


@dataclass
class HealthReport:
    healthy: bool
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    persistence_off: list[int] = field(default_factory=list)  # GPU indices: fixed, not failed


# ---------------------------------------------------------------------------------------------
# Parsing (pure)
# ---------------------------------------------------------------------------------------------


def _int_or_none(value: str) -> int | None:
    value = value.strip()
    if value in _NOT_A_NUMBER:
        return None
    try:
        return int(float(value))
    except ValueError:
        return None


def parse_smi_csv(text: str) -> SmiTable:
    """Rows of ``nvidia-smi --query-gpu=<NVIDIA_SMI_FIELDS> --format=csv,noheader,nounits``."""
    gpus: list[GpuRow] = []
    unparsed: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(NVIDIA_SMI_FIELDS) or not cells[0].isdigit():
            unparsed.append(line)
            continue
        gpus.append(
            GpuRow(
                index=int(cells[0]),
                name=cells[1],
                bus_id=cells[2],
                persistence_mode=cells[3],
                ecc_uncorrected_volatile=_int_or_none(cells[4]),
                temperature_c=_int_or_none(cells[5]),
            )
        )
    return SmiTable(gpus=gpus, unparsed=unparsed)


def parse_xids(kernel_log: str) -> list[XidEvent]:
    """NVRM Xid lines of a kernel log (journalctl -k or dmesg), in order."""
    events = []
    for match in _XID_RE.finditer(kernel_log):
        events.append(
            XidEvent(code=int(match["code"]), pci=match["pci"].lower(), detail=(match["detail"] or "").strip())
        )
    return events


def parse_fabric_states(text: str) -> dict[str, tuple[str, str]]:
    """Bus id -> (State, Status) of each GPU's "Fabric" section in ``nvidia-smi -q``."""
    states: dict[str, tuple[str, str]] = {}
    bus_id: str | None = None
    in_fabric = False
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("GPU "):
            bus_id, in_fabric = line[4:].strip(), False
            continue
        indent = len(line) - len(line.lstrip(" "))
        if indent == 4:
            in_fabric = line.strip() == "Fabric" and bus_id is not None
            fields = {}
        elif in_fabric and indent == 8 and ":" in line:
            key, value = (part.strip() for part in line.split(":", 1))
            fields[key] = value
            if bus_id is not None and {"State", "Status"} <= fields.keys():
                states[bus_id] = (fields["State"], fields["Status"])
    return states


def pci_key(bus_id: str) -> tuple[int, int, int] | None:
    """(domain, bus, device) of "00000000:10:1C.0" (nvidia-smi) or "0000:10:1c" (kernel)."""
    parts = bus_id.strip().split(":")
    if len(parts) != 3:
        return None
    try:
        return int(parts[0], 16), int(parts[1], 16), int(parts[2].split(".")[0], 16)
    except ValueError:
        return None


def _dcgm_message(node: Mapping[str, Any]) -> str:
    texts: list[str] = []
    for key in ("warnings", "errors", "info"):
        items = node.get(key)
        if isinstance(items, str):
            items = [items]
        for item in items or []:
            if isinstance(item, Mapping):
                item = item.get("warning") or item.get("message") or item.get("msg") or ""
            if item:
                texts.append(str(item))
    return "; ".join(texts) or "failed"


def _dcgm_entity(node: Mapping[str, Any]) -> str:
    for key in ("gpu_ids", "gpu_id", "entity_id"):
        if key in node:
            return f"GPU {node[key]}: "
    return ""


def _walk_dcgm(node: Any, test: str, detailed: list[str], summaries: list[str]) -> None:
    if isinstance(node, list):
        for item in node:
            _walk_dcgm(item, test, detailed, summaries)
        return
    if not isinstance(node, Mapping):
        return
    test = str(node.get("name") or node.get("test_name") or test)
    status = node.get("status")
    if isinstance(status, str) and status.strip().lower() == "fail":
        detailed.append(f"{test}: {_dcgm_entity(node)}{_dcgm_message(node)}")
    for key, value in node.items():
        if key == "test_summary":  # DCGM 4 repeats the per-GPU verdicts in a summary
            if isinstance(value, Mapping) and str(value.get("status", "")).lower() == "fail":
                summaries.append(f"{test}: failed")
            continue
        _walk_dcgm(value, test, detailed, summaries)


def parse_dcgm_json(text: str) -> DcgmOutcome:
    """``dcgmi diag -r 1 -j`` output. The JSON has no stable schema across DCGM 3 and 4, so this
    looks for any ``"status": "Fail"`` (naming the enclosing test) rather than fixed paths."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as err:
        first_line = text.strip().splitlines()[0] if text.strip() else "no output"
        return DcgmOutcome(error=f"dcgmi diag output is not JSON ({err.msg}): {first_line}")
    runtime_error = document.get("runtime_error") if isinstance(document, Mapping) else None
    if runtime_error:
        return DcgmOutcome(error=f"dcgmi diag could not run: {runtime_error}")
    detailed: list[str] = []
    summaries: list[str] = []
    _walk_dcgm(document, "diag", detailed, summaries)
    return DcgmOutcome(failures=list(dict.fromkeys(detailed or summaries)))


# ---------------------------------------------------------------------------------------------
# The decision (pure)
# ---------------------------------------------------------------------------------------------


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _driver_reasons(smi: SmiResult, table: SmiTable, smi_timeout_s: float | None) -> list[str]:
    """Why nvidia-smi itself failed. Lines it printed between GPU rows are reported separately."""
    if smi.not_found:
        return ["nvidia-smi not found: the NVIDIA driver utilities are not installed"]
    if smi.timed_out:
        limit = f" within {smi_timeout_s:g} s" if smi_timeout_s else ""
        return [f"nvidia-smi did not answer{limit}: the NVIDIA driver is hung"]
    if smi.returncode == 0:
        return []
    message = _first_line(smi.stderr) or ("" if table.gpus else _first_line(smi.stdout))
    return [f"nvidia-smi exited {smi.returncode}" + (f": {message}" if message else "")]


def _gpu_list(gpus: Iterable[GpuRow]) -> str:
    return ", ".join(f"{gpu.index} ({gpu.bus_id})" for gpu in gpus)


def _table_reasons(table: SmiTable, expected_gpus: int) -> list[str]:
    reasons = [f"nvidia-smi: {line}" for line in table.unparsed]
    if len(table.gpus) != expected_gpus:
        seen = _gpu_list(table.gpus) or "none"
        reasons.append(f"GPU count is {len(table.gpus)}, expected {expected_gpus} (seen: {seen})")
    for gpu in table.gpus:
        if gpu.ecc_uncorrected_volatile:
            reasons.append(
                f"GPU {gpu.index} ({gpu.bus_id}): {gpu.ecc_uncorrected_volatile} uncorrectable volatile ECC errors"
            )
    return reasons


def _not_persistent(table: SmiTable) -> list[GpuRow]:
    return [gpu for gpu in table.gpus if gpu.persistence_mode.lower() != "enabled"]


def fabric_check(instance_type: str | None) -> str | None:
    """How this type's NVSwitch fabric is checked: ``service``, ``gpu-state``, or None (no NVSwitch)."""
    if instance_type in FABRIC_BY_SERVICE:
        return "service"
    if instance_type in FABRIC_BY_GPU_STATE:
        return "gpu-state"
    return None


def _fabric_reasons(fabric: FabricInput, gpus: list[GpuRow]) -> list[str]:
    kind = fabric_check(fabric.instance_type)
    if kind == "service":
        state = (fabric.service_state or "").strip() or "unknown"
        if state == "active":
            return []
        return [
            f"{fabric.instance_type} has NVSwitches but {FABRIC_MANAGER_UNIT} is {state}: "
            "no NVLink between the GPUs until Fabric Manager runs"
        ]
    if kind != "gpu-state":
        return []
    smi = fabric.smi_query
    if smi is None or smi.timed_out or smi.not_found or smi.returncode != 0:
        return [f"{fabric.instance_type} has NVSwitches but nvidia-smi -q did not report the GPUs' fabric state"]
    states = parse_fabric_states(smi.stdout)
    if not states:
        return [f"{fabric.instance_type} has NVSwitches but nvidia-smi -q lists no Fabric section"]
    by_key = {pci_key(gpu.bus_id): gpu for gpu in gpus}
    not_ready = []
    for bus_id, (state, status) in states.items():
        if (state, status) != ("Completed", "Success"):
            gpu = by_key.get(pci_key(bus_id))
            name = f"{gpu.index} ({gpu.bus_id})" if gpu else bus_id
            not_ready.append(f"{name}: State {state}, Status {status}")
    if not not_ready:
        return []
    return [f"NVSwitch fabric not ready on GPU {'; '.join(not_ready)}: is {FABRIC_MANAGER_UNIT} running?"]


def _gpu_for_pci(pci: str, gpus: Iterable[GpuRow]) -> str:
    key = pci_key(pci)
    for gpu in gpus:
        if key is not None and pci_key(gpu.bus_id) == key:
            return f" (GPU {gpu.index})"
    return ""


def _fatal_meaning(code: int, details: list[str], fatal: Mapping[int, str]) -> tuple[str | None, str]:
    """(why it is fatal or None, the kernel line to quote) for all the events of one Xid on one GPU."""
    if code in fatal:
        return fatal[code], details[0]
    if code in NVLINK5_XIDS:
        worst = next((d for d in details if _NVLINK_FATAL_RE.search(d)), None)
        if worst is not None:
            return "NVLink5 error the driver reports as Fatal: GPU reset needed", worst
    if code == RECOVERY_ACTION_XID:
        match = _RECOVERY_RE.search(details[-1])
        if match and int(match["code"], 16) != 0:
            action = match["name"] or match["code"]
            return f"the GPU's recovery action is now {action}: it needs that before the next job", details[-1]
        return None, details[-1]
    return None, details[0]


def _xid_findings(events: list[XidEvent], gpus: list[GpuRow], fatal: Mapping[int, str]) -> tuple[list[str], list[str]]:
    """(reasons, warnings): one line per (Xid, GPU), with how many times it was logged."""
    details: dict[tuple[int, str], list[str]] = {}
    for event in events:
        details.setdefault((event.code, event.pci), []).append(event.detail)
    reasons: list[str] = []
    warnings: list[str] = []
    for (code, pci), lines in details.items():
        times = f" [x{len(lines)}]" if len(lines) > 1 else ""
        where = f"Xid {code} on PCI {pci}{_gpu_for_pci(pci, gpus)}{times}"
        meaning, quoted = _fatal_meaning(code, lines, fatal)
        if meaning is not None:
            reasons.append(f"{where}: {meaning} (kernel: {quoted})")
        else:
            warnings.append(f"{where} (not in the fatal set): {quoted}")
    return reasons, warnings


def evaluate(
    smi: SmiResult,
    kernel_log: str | None,
    expected_gpus: int,
    dcgm: DcgmOutcome | None = None,
    *,
    fatal_xids: Mapping[int, str] = FATAL_XIDS,
    dcgm_required: bool = False,
    smi_timeout_s: float | None = None,
    fabric: FabricInput | None = None,
) -> HealthReport:
    """Healthy when the driver answers, every expected GPU is seen with no uncorrectable ECC error,
    no fatal Xid was logged this boot, the NVSwitch fabric is up (``fabric``: NVSwitch types) and
    DCGM (where it ran) passed. Persistence mode off is a warning: the caller turns it back on."""
    table = parse_smi_csv(smi.stdout) if not (smi.timed_out or smi.not_found) else SmiTable([], [])
    reasons = _driver_reasons(smi, table, smi_timeout_s)
    warnings: list[str] = []
    driver_answered = smi.returncode == 0 or bool(table.gpus)
    persistence_off = _not_persistent(table)
    if driver_answered:
        reasons += _table_reasons(table, expected_gpus)
    if persistence_off:
        warnings.append(
            f"persistence mode is not Enabled on GPU {_gpu_list(persistence_off)}; is nvidia-persistenced "
            f"running? (not a failure: the node turns it on with {' '.join(PERSISTENCE_FIX_COMMAND)})"
        )
    if fabric is not None:
        reasons += _fabric_reasons(fabric, table.gpus)
    warnings += [
        f"GPU {gpu.index} ({gpu.bus_id}) is at {gpu.temperature_c} C"
        for gpu in table.gpus
        if gpu.temperature_c is not None and gpu.temperature_c > HOT_GPU_C
    ]
    if kernel_log is None:
        warnings.append("kernel log could not be read: Xid check skipped")
    else:
        xid_reasons, xid_warnings = _xid_findings(parse_xids(kernel_log), table.gpus, fatal_xids)
        reasons += xid_reasons
        warnings += xid_warnings
    if dcgm is not None:
        reasons += [f"DCGM diag level 1: {failure}" for failure in dcgm.failures]
        if dcgm.error:
            (reasons if dcgm_required else warnings).append(dcgm.error)
    return HealthReport(
        healthy=not reasons,
        reasons=reasons,
        warnings=warnings,
        persistence_off=[gpu.index for gpu in persistence_off],
    )


# ---------------------------------------------------------------------------------------------
# Collecting the inputs (I/O)
# ---------------------------------------------------------------------------------------------


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


def run_dcgm_diag(timeout_s: float) -> DcgmOutcome | None:
    """None when dcgmi is not installed. dcgmi exits non-zero when a test fails, so the JSON decides."""
    if shutil.which(DCGM_COMMAND[0]) is None:
        return None
    result = run_command(DCGM_COMMAND, timeout_s)
    if result.timed_out:
        return DcgmOutcome(error=f"dcgmi diag -r 1 did not finish within {timeout_s:g} s")
    return parse_dcgm_json(result.stdout)


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
        if replayed or not _fabric_reasons(fabric, []) or time.monotonic() >= deadline:
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
    else:
        query = run_command(NVIDIA_SMI_QUERY_COMMAND, args.smi_timeout)
    return FabricInput(instance_type, smi_query=query)


def fix_persistence(report: HealthReport, timeout_s: float) -> bool:
    """Turn persistence mode on (``nvidia-smi -pm 1``, all GPUs); True when nvidia-smi says it did."""
    result = run_command(PERSISTENCE_FIX_COMMAND, timeout_s)
    gpus = ", ".join(str(index) for index in report.persistence_off)
    if result.returncode == 0:
        LOG.info("persistence mode turned on (GPU %s were off): %s", gpus, _first_line(result.stdout))
        return True
    why = "timed out" if result.timed_out else "not found" if result.not_found else f"exited {result.returncode}"
    LOG.warning(
        "%s %s: persistence mode stays off on GPU %s: %s",
        " ".join(PERSISTENCE_FIX_COMMAND),
        why,
        gpus,
        _first_line(result.stderr) or _first_line(result.stdout),
    )
    return False


# ---------------------------------------------------------------------------------------------
# Actions (AWS); boto3 is imported here only, so that parsing needs nothing beyond the stdlib
# ---------------------------------------------------------------------------------------------


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


def publish_metric(cloudwatch: Any, namespace: str, asg_name: str, failed: bool, market: str | None = None) -> None:
    """The check's result, and (when the market is known) one ``NodeRunning`` per node and market,
    which the dashboard sums into Spot and On-Demand node counts per fleet."""
    data = [
        {
            "MetricName": METRIC_NAME,
            "Dimensions": [{"Name": ASG_DIMENSION, "Value": asg_name}],
            "Value": 1.0 if failed else 0.0,
            "Unit": "Count",
        }
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


def mark_unhealthy(autoscaling: Any, instance_id: str) -> None:
    autoscaling.set_instance_health(InstanceId=instance_id, HealthStatus="Unhealthy", ShouldRespectGracePeriod=False)


def apply_actions(
    report: HealthReport,
    identity: NodeIdentity,
    *,
    namespace: str,
    publish: bool,
    set_health: bool,
    session: Any = None,
) -> list[str]:
    """Publish the metric and, when unhealthy, mark the instance Unhealthy. Each action runs even
    if the other failed; the errors are logged and returned."""
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
                session.client("cloudwatch"), namespace, identity.asg_name, not report.healthy, identity.market
            )
            LOG.info("published %s=%d to %s", METRIC_NAME, int(not report.healthy), namespace)
        except Exception as err:  # botocore errors share no base class worth importing here
            errors.append(f"put_metric_data failed: {err}")
            LOG.error(errors[-1])
    if set_health and not report.healthy:
        if not identity.instance_id:
            errors.append("no instance id: cannot mark the instance Unhealthy")
            LOG.error(errors[-1])
            return errors
        try:
            mark_unhealthy(session.client("autoscaling"), identity.instance_id)
            LOG.warning("marked %s Unhealthy in %s", identity.instance_id, identity.asg_name)
        except Exception as err:
            errors.append(f"set_instance_health failed: {err}")
            LOG.error(errors[-1])
    return errors


def log_report(report: HealthReport) -> None:
    for warning in report.warnings:
        LOG.warning(warning)
    if report.healthy:
        LOG.info("healthy")
        return
    for reason in report.reasons:
        LOG.error("unhealthy: %s", reason)


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def parse_fatal_xids(text: str) -> dict[int, str]:
    """ "48,79,..." -> {48: <meaning or "operator-listed">, ...}."""
    codes = [int(part) for part in text.replace(" ", "").split(",") if part]
    return {code: FATAL_XIDS.get(code, "listed as fatal by --fatal-xids") for code in codes}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="GPU health check: nvidia-smi, NVRM Xids, DCGM level 1.")
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
    parser.add_argument(
        "--fatal-xids", type=parse_fatal_xids, default=dict(FATAL_XIDS), help="comma-separated Xid codes"
    )
    parser.add_argument(
        "--dcgm",
        choices=("auto", "off", "required"),
        default="auto",
        help="auto: run dcgmi diag -r 1 when installed; required: a DCGM that cannot run is a failure",
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
    parser.add_argument("--dcgm-timeout", type=float, default=180.0)
    replay = parser.add_argument_group("replay recorded outputs instead of running the tools")
    replay.add_argument("--nvidia-smi-output", type=Path)
    replay.add_argument("--nvidia-smi-rc", type=int, default=0)
    replay.add_argument("--kernel-log-file", type=Path)
    replay.add_argument("--dcgm-json", type=Path)
    replay.add_argument("--nvidia-smi-q-output", type=Path, help="recorded nvidia-smi -q (Fabric sections)")
    replay.add_argument("--fabric-manager-state", help=f"recorded systemctl is-active {FABRIC_MANAGER_UNIT}")
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
    if args.dcgm_json is not None:
        dcgm = parse_dcgm_json(args.dcgm_json.read_text())
    elif args.dcgm == "off":
        dcgm = None
    else:
        dcgm = run_dcgm_diag(args.dcgm_timeout)
        if dcgm is None and args.dcgm == "required":
            dcgm = DcgmOutcome(error="dcgmi is not installed but --dcgm required was given")
    report = evaluate(
        smi,
        kernel_log,
        args.expected_gpus,
        dcgm,
        fatal_xids=args.fatal_xids,
        dcgm_required=args.dcgm == "required",
        smi_timeout_s=args.smi_timeout,
        fabric=fabric,
    )
    if fabric_skipped:
        report.warnings.append(fabric_skipped)
    return report


def check_once(args: argparse.Namespace, session: Any = None) -> HealthReport:
    report = collect_and_evaluate(args)
    log_report(report)
    if report.persistence_off and not args.no_fix_persistence:
        if args.nvidia_smi_output is not None:
            LOG.info("replayed nvidia-smi output: persistence mode left as it is")
        else:
            fix_persistence(report, args.smi_timeout)
    publish, set_health = not args.no_metric, not args.no_set_health
    if publish or set_health:
        apply_actions(
            report,
            resolve_identity(args),
            namespace=args.namespace,
            publish=publish,
            set_health=set_health,
            session=session,
        )
    return report


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

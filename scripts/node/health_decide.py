"""The GPU health decision: facts in, verdict and reasons out (pure, standard library only).

Owns what makes a node unhealthy: the driver answering, the GPU count, uncorrectable ECC errors,
fatal Xids (the policy table is health_xids), the NVSwitch fabric of the instance types that
have one, and a failed DCGM diagnostic; and what is only a warning (persistence mode off, a hot
GPU, application Xids, a DCGM that could not run unless it is required). ``evaluate`` is the
entry; it runs no tool and calls no AWS API (health_probe reads, health_act acts).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from health_parse import (
    DcgmOutcome,
    GpuRow,
    SmiResult,
    SmiTable,
    XidEvent,
    first_line,
    parse_fabric_states,
    parse_smi_csv,
    parse_xids,
    pci_key,
)
from health_xids import FATAL_XIDS, xid_verdict

FABRIC_MANAGER_UNIT = "nvidia-fabricmanager.service"
PERSISTENCE_FIX_COMMAND = ("nvidia-smi", "-pm", "1")
HOT_GPU_C = 85  # above this a warning is logged; alarms on temperature belong to MonitoringStack

# 8-GPU NVSwitch systems (HGX boards): NVLink between the GPUs works only once Fabric Manager has
# set up the NVSwitch fabric. On Ampere (A100) the nvidia-fabricmanager service is the signal; from
# Hopper on, each GPU reports its own fabric registration (`nvidia-smi -q`, "Fabric": State
# Completed, Status Success once registered). Other types have no NVSwitch and are not checked.
FABRIC_BY_SERVICE = frozenset({"p4d.24xlarge", "p4de.24xlarge"})
FABRIC_BY_GPU_STATE = frozenset({"p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge"})


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


def _driver_reasons(smi: SmiResult, table: SmiTable, smi_timeout_s: float | None) -> list[str]:
    """Why nvidia-smi itself failed. Lines it printed between GPU rows are reported separately."""
    if smi.not_found:
        return ["nvidia-smi not found: the NVIDIA driver utilities are not installed"]
    if smi.timed_out:
        limit = f" within {smi_timeout_s:g} s" if smi_timeout_s else ""
        return [f"nvidia-smi did not answer{limit}: the NVIDIA driver is hung"]
    if smi.returncode == 0:
        return []
    message = first_line(smi.stderr) or ("" if table.gpus else first_line(smi.stdout))
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


def fabric_reasons(fabric: FabricInput, gpus: list[GpuRow]) -> list[str]:
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
        meaning, quoted = xid_verdict(code, lines, fatal)
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
        reasons += fabric_reasons(fabric, table.gpus)
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

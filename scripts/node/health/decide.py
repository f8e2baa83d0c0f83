"""The GPU health decision: facts in, verdict and reasons out (pure, standard library only).

Owns what makes a node unhealthy: the driver answering, the GPU count, uncorrectable ECC errors,
fatal Xids (the policy table is health.xids), the NVSwitch fabric of the instance types that
have one, and a failed DCGM diagnostic; and what is only a warning (persistence mode off, a hot
GPU, application Xids, a DCGM that could not run unless it is required). ``evaluate`` is the
entry; it runs no tool and calls no AWS API (health.probe reads, health.act acts).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from health.dcgm import DcgmOutcome
from health.efa import EfaInput, efa_reasons
from health.parse import (
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
from health.xids import warning_note, xid_verdict

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
    reason_classes: list[str] = field(default_factory=list)  # one per kind of reason: the metric's Reason values


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


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


def _table_class(reason: str) -> str:
    if reason.startswith("GPU count"):
        return "gpu-count"
    return "ecc" if "ECC" in reason else "driver"


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
    service = (fabric.service_state or "").strip()
    if fabric.service_state is not None and service != "active":  # Hopper: Fabric Manager must run too
        return [
            f"{fabric.instance_type} has NVSwitches but {FABRIC_MANAGER_UNIT} is {service or 'unknown'}: "
            "the fabric loses its manager"
        ]
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


def _where(pci: str, gpu_instance: int | None, gpus: Iterable[GpuRow]) -> str:
    """ "GPU 6 (PCI 0000:cb:00, MIG GPU-I 5)": the index nvidia-smi gives that address, when it lists it."""
    key = pci_key(pci)
    index = next((gpu.index for gpu in gpus if key is not None and pci_key(gpu.bus_id) == key), None)
    mig = f", MIG GPU-I {gpu_instance}" if gpu_instance is not None else ""
    if index is None:
        return f"PCI {pci}{mig} (no GPU of nvidia-smi at that address)"
    return f"GPU {index} (PCI {pci}{mig})"


def _xid_findings(
    events: list[XidEvent], gpus: list[GpuRow], extra: Mapping[int, str] | None
) -> tuple[list[tuple[str, str]], list[str]]:
    """((reason class, reason) pairs, warnings): one line per (Xid, GPU, MIG instance), with its count."""
    details: dict[tuple[int, str, int | None], list[str]] = {}
    for event in events:
        details.setdefault((event.code, event.pci, event.gpu_instance), []).append(event.detail)
    reasons: list[tuple[str, str]] = []
    warnings: list[str] = []
    for (code, pci, gpu_instance), lines in details.items():
        times = f" [x{len(lines)}]" if len(lines) > 1 else ""
        where = f"Xid {code} on {_where(pci, gpu_instance, gpus)}{times}"
        meaning, quoted = xid_verdict(code, lines, extra)
        if meaning is not None:
            reasons.append((f"xid-{code}", f"{where}: {meaning} (kernel: {quoted})"))
        else:
            warnings.append(f"{where}: {warning_note(code)}; node kept (kernel: {quoted})")
    return reasons, warnings


def _dcgm_findings(dcgm: DcgmOutcome, required: bool) -> tuple[list[tuple[str, str]], list[str]]:
    label = f"DCGM diag level {dcgm.level}"
    reasons = [(f"dcgm-{_slug(result.test)}", f"{label}: {result.describe()}") for result in dcgm.with_status("fail")]
    warnings = [f"{label}: {text}" for text in dcgm.warnings]
    if dcgm.error:
        if required:
            reasons.append(("dcgm-not-run", dcgm.error))
        else:
            warnings.append(dcgm.error)
    return list(dict.fromkeys(reasons)), warnings


def evaluate(
    smi: SmiResult,
    kernel_log: str | None,
    expected_gpus: int,
    dcgm: DcgmOutcome | None = None,
    *,
    extra_xids: Mapping[int, str] | None = None,
    dcgm_required: bool = False,
    smi_timeout_s: float | None = None,
    fabric: FabricInput | None = None,
    efa: EfaInput | None = None,
) -> HealthReport:
    """Healthy when the driver answers, every expected GPU is seen with no uncorrectable ECC error,
    no Xid the catalog (or the fleet) makes unhealthy was logged this boot, the NVSwitch fabric is up
    (``fabric``: NVSwitch types), EFA is complete (``efa``: EFA fleets) and DCGM (where it ran) passed.
    Persistence mode off is a warning: the caller turns it back on."""
    table = parse_smi_csv(smi.stdout) if not (smi.timed_out or smi.not_found) else SmiTable([], [])
    findings: list[tuple[str, str]] = [("driver", text) for text in _driver_reasons(smi, table, smi_timeout_s)]
    warnings: list[str] = []
    driver_answered = smi.returncode == 0 or bool(table.gpus)
    persistence_off = _not_persistent(table)
    if driver_answered:
        findings += [(_table_class(text), text) for text in _table_reasons(table, expected_gpus)]
    if persistence_off:
        warnings.append(
            f"persistence mode is not Enabled on GPU {_gpu_list(persistence_off)}; is nvidia-persistenced "
            f"running? (not a failure: the node turns it on with {' '.join(PERSISTENCE_FIX_COMMAND)})"
        )
    if fabric is not None:
        findings += [("fabric", text) for text in fabric_reasons(fabric, table.gpus)]
    if efa is not None:
        findings += [("efa", text) for text in efa_reasons(efa)]
    warnings += [
        f"GPU {gpu.index} ({gpu.bus_id}) is at {gpu.temperature_c} C"
        for gpu in table.gpus
        if gpu.temperature_c is not None and gpu.temperature_c > HOT_GPU_C
    ]
    if kernel_log is None:
        warnings.append("kernel log could not be read: Xid check skipped")
    else:
        xid_reasons, xid_warnings = _xid_findings(parse_xids(kernel_log), table.gpus, extra_xids)
        findings += xid_reasons
        warnings += xid_warnings
    if dcgm is not None:
        dcgm_reasons, dcgm_warnings = _dcgm_findings(dcgm, dcgm_required)
        findings += dcgm_reasons
        warnings += dcgm_warnings
    return HealthReport(
        healthy=not findings,
        reasons=[text for _, text in findings],
        warnings=warnings,
        persistence_off=[gpu.index for gpu in persistence_off],
        reason_classes=list(dict.fromkeys(cls for cls, _ in findings)),
    )

"""Parsing for the GPU health check: the tools' text in, facts out (pure, standard library only).

Owns the shapes of what the check reads on a node and the data they become: ``nvidia-smi
--query-gpu`` CSV rows (``SmiTable``), ``nvidia-smi -q`` Fabric sections, NVRM Xid lines of the
kernel log (``XidEvent``); ``dcgmi diag -j`` JSON is health.dcgm's. Nothing here runs a tool,
reads a file or judges health: health.decide does that from these facts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The ``--query-gpu`` columns, in the order parse_smi_csv reads them (health.probe asks for them).
NVIDIA_SMI_FIELDS = (
    "index",
    "name",
    "pci.bus_id",
    "persistence_mode",
    "ecc.errors.uncorrected.volatile.total",
    "temperature.gpu",
)

# One NVRM Xid line, wherever the log tool put its prefix (dmesg -T / --ctime "[Sun Feb 23 ...]", --time-format
# iso, --decode "kern  :warn  : ", monotonic "[12345.678]", syslog "... kernel: [  219.47] ", journalctl -k -o
# short-iso): the match starts at "NVRM: Xid". MIG lines name the GPU instance (and compute instance) after the
# PCI address: "NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, ...".
_XID_RE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)"
    r"(?:\s+GPU-I:(?P<gi>\d+))?(?:\s+GPU-CI:(?P<ci>\d+))?\):"
    r"\s*(?P<code>\d+)(?:,\s*(?P<detail>.*))?"
)
_NOT_A_NUMBER = {"[N/A]", "N/A", "[Not Supported]", "[Unknown Error]", ""}


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
    gpu_instance: int | None = None  # MIG: the GPU instance the line names (GPU-I:05 -> 5)
    compute_instance: int | None = None


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
            XidEvent(
                code=int(match["code"]),
                pci=match["pci"].lower(),
                detail=(match["detail"] or "").strip(),
                gpu_instance=int(match["gi"]) if match["gi"] else None,
                compute_instance=int(match["ci"]) if match["ci"] else None,
            )
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


def first_line(text: str) -> str:
    """The first non-blank line of a tool's output, stripped ("" when there is none)."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""

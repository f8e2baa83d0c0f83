"""Parsing for the GPU health check: the tools' text in, facts out (pure, standard library only).

Owns the shapes of what the check reads on a node and the data they become: ``nvidia-smi
--query-gpu`` CSV rows (``SmiTable``), ``nvidia-smi -q`` Fabric sections, NVRM Xid lines of the
kernel log (``XidEvent``) and ``dcgmi diag -j`` JSON (``DcgmOutcome``). Nothing here runs a
tool, reads a file or judges health: health_decide does that from these facts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: The ``--query-gpu`` columns, in the order parse_smi_csv reads them (health_probe asks for them).
NVIDIA_SMI_FIELDS = (
    "index",
    "name",
    "pci.bus_id",
    "persistence_mode",
    "ecc.errors.uncorrected.volatile.total",
    "temperature.gpu",
)

_XID_RE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)\):"
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


@dataclass(frozen=True)
class DcgmOutcome:
    """A DCGM diagnostic: ``error`` is set when it did not run or its output could not be read."""

    failures: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.error is None and not self.failures


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


def first_line(text: str) -> str:
    """The first non-blank line of a tool's output, stripped ("" when there is none)."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""

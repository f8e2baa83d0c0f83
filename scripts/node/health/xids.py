"""The Xid policy of the GPU health check: which NVRM Xid codes make a node unhealthy (pure, standard library).

The policy is data: ``xid_catalog.csv`` next to this module, NVIDIA's Xid catalog (source URL and the
date it was read in its header) with the resolution NVIDIA gives each code and the decision the node
takes from it. ``load_catalog`` reads it, ``xid_verdict`` applies it to every logged event of one Xid
on one GPU, ``parse_extra_xids`` reads a fleet's added codes (``--extra-fatal-xids``, node.env
``HEALTH_EXTRA_FATAL_XIDS``). health.decide calls it.
"""

from __future__ import annotations

import csv
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

CATALOG_FILE = Path(__file__).resolve().parent / "xid_catalog.csv"
CATALOG_COLUMNS = ("code", "mnemonic", "name", "nvidia_action", "resolution", "decision", "why")
RESOLUTIONS = ("ignore", "restart-app", "reset-gpu", "reboot", "hardware", "recovery-action", "nvlink-severity")
DECISIONS = ("warning", "unhealthy", "recovery-action", "nvlink-severity")
#: What a resolution means for the node; a row whose decision differs must say why.
DECISION_BY_RESOLUTION = {
    "ignore": "warning",
    "restart-app": "warning",
    "reset-gpu": "unhealthy",
    "reboot": "unhealthy",
    "hardware": "unhealthy",
    "recovery-action": "recovery-action",
    "nvlink-severity": "nvlink-severity",
}


@dataclass(frozen=True)
class XidEntry:
    code: int
    mnemonic: str
    name: str
    nvidia_action: str
    resolution: str
    decision: str
    why: str

    @property
    def meaning(self) -> str:
        """How a reason names it: NVIDIA's name and resolution, and the platform's why where it departs."""
        text = f"{self.name} ({self.mnemonic}); NVIDIA: {self.nvidia_action or 'no published action'}"
        return f"{text}; platform: {self.why}" if self.why else text


class XidCatalogError(ValueError):
    """The table itself is broken: one line naming the file, the line and the fix."""


def read_catalog(path: Path = CATALOG_FILE) -> dict[int, XidEntry]:
    """The table by code. Every row is checked: known resolution and decision, a why wherever the
    decision is not the one its resolution gives, each code once."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    reader = csv.DictReader(lines)
    if tuple(reader.fieldnames or ()) != CATALOG_COLUMNS:
        raise XidCatalogError(f"{path}: the header must be {','.join(CATALOG_COLUMNS)}")
    entries: dict[int, XidEntry] = {}
    for row in reader:
        where = f"{path}: Xid {row.get('code')}"
        try:
            entry = XidEntry(int(row["code"]), *(row[column] or "" for column in CATALOG_COLUMNS[1:]))
        except (TypeError, ValueError):
            raise XidCatalogError(f"{where}: not a row of {len(CATALOG_COLUMNS)} cells with a numeric code") from None
        expected = DECISION_BY_RESOLUTION.get(entry.resolution)
        if entry.decision not in DECISIONS:
            raise XidCatalogError(f"{where}: decision {entry.decision!r}; fix: one of {', '.join(DECISIONS)}")
        if expected is None and entry.resolution != "unpublished":
            raise XidCatalogError(f"{where}: resolution {entry.resolution!r}; fix: one of {', '.join(RESOLUTIONS)}")
        if entry.decision != expected and not entry.why:
            raise XidCatalogError(f"{where}: decision {entry.decision} departs from {entry.resolution}; fix: say why")
        if entry.code in entries:
            raise XidCatalogError(f"{where}: listed twice; fix: keep one row")
        entries[entry.code] = entry
    return entries


@functools.lru_cache(maxsize=4)
def load_catalog(path: Path = CATALOG_FILE) -> Mapping[int, XidEntry]:
    return read_catalog(path)


def fatal_xids(catalog: Mapping[int, XidEntry] | None = None) -> dict[int, str]:
    """Code -> meaning of every code the table makes unhealthy outright."""
    catalog = load_catalog() if catalog is None else catalog
    return {code: entry.meaning for code, entry in catalog.items() if entry.decision == "unhealthy"}


FATAL_XIDS: Mapping[int, str] = fatal_xids()
NVLINK5_XIDS = range(144, 151)
RECOVERY_ACTION_XID = 154

_NVLINK_FATAL_RE = re.compile(r"(?<![-\w])Fatal\b")
_RECOVERY_RE = re.compile(r"recovery action changed from .*? to (?P<code>0x[0-9A-Fa-f]+)(?: \((?P<name>[^)]*)\))?")


def xid_verdict(
    code: int, details: list[str], extra: Mapping[int, str] | None = None, catalog: Mapping[int, XidEntry] | None = None
) -> tuple[str | None, str]:
    """(why it makes the node unhealthy, or None; the kernel line to quote) for all events of one Xid
    on one GPU. NVLink5 codes count when the driver's line says ``Fatal`` (NVIDIA's decode table gives
    each error status a Fatal / Non-fatal severity and the driver prints it); Xid 154 by the recovery
    action of its last line (it reports changes in both directions; 0x0 None needs nothing)."""
    catalog = load_catalog() if catalog is None else catalog
    if extra and code in extra:
        return extra[code], details[0]
    entry = catalog.get(code)
    decision = entry.decision if entry else "warning"
    if decision == "unhealthy":
        return entry.meaning if entry else "", details[0]
    if decision == "nvlink-severity":
        worst = next((d for d in details if _NVLINK_FATAL_RE.search(d)), None)
        if worst is not None:
            return "NVLink5 error the driver reports as Fatal: NVIDIA's resolution is a GPU reset", worst
    if decision == "recovery-action":
        match = _RECOVERY_RE.search(details[-1])
        if match and int(match["code"], 16) != 0:
            action = match["name"] or match["code"]
            return f"the GPU's recovery action is now {action}: it needs that before the next job", details[-1]
        return None, details[-1]
    return None, details[0]


def warning_note(code: int, catalog: Mapping[int, XidEntry] | None = None) -> str:
    """Why an Xid that is kept is only a warning: NVIDIA's resolution, or that the table lacks it."""
    entry = (load_catalog() if catalog is None else catalog).get(code)
    if entry is None:
        return "not in the Xid catalog table"
    return f"{entry.name}; NVIDIA: {entry.nvidia_action or 'no published action'}"


def parse_extra_xids(text: str) -> dict[int, str]:
    """ "63,92" (``--extra-fatal-xids``) -> {63: "...", ...}: codes a fleet makes unhealthy on top of the table."""
    codes: dict[int, str] = {}
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        if not part.isdigit():
            raise ValueError(f"{part!r} is not an Xid code (a number such as 63)")
        entry = load_catalog().get(int(part))
        name = f"{entry.name} " if entry else ""
        codes[int(part)] = f"{name}made unhealthy by the fleet's health.extra_fatal_xids"
    return codes

"""The Xid policy of the GPU health check: which NVRM Xid codes make a node unhealthy (pure data).

Owns the fatal Xid table (code -> why it is fatal), the Blackwell NVLink5 range judged by the
driver's own "Fatal" word, the recovery-action Xid 154, and ``xid_verdict``, which applies them
to every logged event of one Xid on one GPU. health_decide calls it; the command line's
``--fatal-xids`` replaces the table.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

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

_NVLINK_FATAL_RE = re.compile(r"(?<![-\w])Fatal\b")
_RECOVERY_RE = re.compile(r"recovery action changed from .*? to (?P<code>0x[0-9A-Fa-f]+)(?: \((?P<name>[^)]*)\))?")


def xid_verdict(code: int, details: list[str], fatal: Mapping[int, str]) -> tuple[str | None, str]:
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


def parse_fatal_xids(text: str) -> dict[int, str]:
    """ "48,79,..." (``--fatal-xids``) -> {48: <meaning or "operator-listed">, ...}."""
    codes = [int(part) for part in text.replace(" ", "").split(",") if part]
    return {code: FATAL_XIDS.get(code, "listed as fatal by --fatal-xids") for code in codes}

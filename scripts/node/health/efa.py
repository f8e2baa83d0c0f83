"""EFA before work, for the GPU health check of EFA fleets: the node's EFA devices, libfabric's efa
provider and NCCL's OFI plugin (the one place that counts EFA devices; the bootstrap's gpu-health
step runs it with the instance type's EFA interface count from the catalog).

Without any of the three, NCCL falls back to TCP sockets: a training job still starts, and crawls. So
an EFA fleet's node that lacks one is unhealthy and its launch is abandoned.

- ``fi_info -p efa`` (libfabric, ``/opt/amazon/efa/bin/fi_info``) lists one ``domain: <device>-rdm`` (and
  ``-dgrm``) per EFA device under ``provider: efa``; a node without the provider or a device makes
  it exit non-zero ("fi_getinfo: -61 (No data available)").
- The EFA installer ships the OFI NCCL plugin (``libnccl-net*.so``) under ``/opt/amazon/ofi-nccl``; older
  images built it under ``/opt/aws-ofi-nccl``. ``health.ofi_plugin`` looks for it: the same code the golden
  image's checks run (scripts/image/components/efa.yaml and gpu-validation.yaml embed it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from health.ofi_plugin import OFI_NCCL_GLOB, OFI_NCCL_ROOTS, find_plugin

FI_INFO_BIN = "/opt/amazon/efa/bin/fi_info"

_FIELD_RE = re.compile(r"^\s*(?P<key>provider|domain):\s*(?P<value>\S+)", re.M)


@dataclass(frozen=True)
class FiInfo:
    """What ``fi_info -p efa`` printed: providers named and distinct EFA devices (domain minus -rdm/-dgrm)."""

    providers: frozenset[str]
    devices: frozenset[str]


@dataclass(frozen=True)
class EfaInput:
    expected_devices: int
    fi_info_rc: int | None  # None: fi_info is missing or hung
    fi_info: FiInfo
    fi_info_error: str
    plugin: str | None  # path of the OFI NCCL plugin found, None when none


def parse_fi_info(text: str) -> FiInfo:
    providers: set[str] = set()
    devices: set[str] = set()
    provider = ""
    for match in _FIELD_RE.finditer(text):
        if match["key"] == "provider":
            provider = match["value"]
            providers.add(provider)
        elif provider == "efa":
            devices.add(re.sub(r"-(rdm|dgrm)$", "", match["value"]))
    return FiInfo(frozenset(providers), frozenset(devices))


def find_ofi_nccl(roots: Iterable[str] = OFI_NCCL_ROOTS) -> str | None:
    """NCCL's OFI plugin anywhere below ``roots`` (``--ofi-nccl-dir`` replaces them), or None."""
    return find_plugin(roots)


def efa_reasons(efa: EfaInput) -> list[str]:
    """Why this EFA node would run NCCL over sockets; [] when devices, provider and plugin are all there."""
    reasons: list[str] = []
    seen = len(efa.fi_info.devices)
    if efa.fi_info_rc is None or (efa.fi_info_rc != 0 and not seen):
        why = efa.fi_info_error or "no output"
        reasons.append(f"EFA: fi_info -p efa failed ({why}): no EFA device or no efa provider in libfabric")
    elif "efa" not in efa.fi_info.providers:
        reasons.append("EFA: libfabric lists no efa provider (fi_info -p efa): NCCL would fall back to sockets")
    elif seen != efa.expected_devices:
        names = ", ".join(sorted(efa.fi_info.devices)) or "none"
        reasons.append(
            f"EFA: fi_info -p efa lists {seen} EFA devices ({names}), the instance type has {efa.expected_devices} "
            "(does the launch template attach one EFA interface per network card?)"
        )
    if efa.plugin is None:
        reasons.append(
            f"EFA: NCCL's OFI plugin ({OFI_NCCL_GLOB}) is not installed under {' or '.join(OFI_NCCL_ROOTS)}: "
            "NCCL would fall back to sockets"
        )
    return reasons

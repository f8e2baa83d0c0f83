"""The parent image's machine, faked: GPUs and driver, kernel modules, systemd, the EFA installer
(tests/scripts/image/fake_tools.py runs these; the package tools live there, downloads and keys in fake_downloads.py)."""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable

from fake_tools import ROOT, compare, fail, load, save

PERSISTENCED = ROOT / "etc/systemd/system/nvidia-persistenced.service"


def _persistence_on() -> bool:
    """The daemon runs with --persistence-mode: the unit written in /etc, or a drop-in, says so."""
    files = [PERSISTENCED, *PERSISTENCED.with_name(PERSISTENCED.name + ".d").glob("*.conf")]
    return any(f.is_file() and "--persistence-mode" in f.read_text() for f in files)


def nvidia_smi(args: list[str]) -> int:
    state = load()
    if not state["driver"]:
        return fail("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", 9)
    query = next(a.split("=", 1)[1] for a in args if a.startswith("--query-gpu="))
    values = {
        "driver_version": state["driver"],
        "persistence_mode": "Enabled" if _persistence_on() else "Disabled",
        "name": "NVIDIA A10G",
    }
    for index in range(state["gpus"]):
        print(", ".join(str(index) if f == "index" else values[f] for f in query.split(",")))
    return 0


def modinfo(args: list[str]) -> int:
    state = load()
    module = args[-1]
    if module == "nvidia" and state["driver"]:
        print(state["driver"])
        return 0
    if module == "lustre" and f"lustre-client-modules-{state['kernel']}" in state["installed"]:
        return 0
    if module == "efa" and state["efa"]:
        return 0
    return fail(f"modinfo: ERROR: Module {module} not found.", 1)


#: Ubuntu's packaged unit: persistence mode off, stopped when nothing needs it.
PACKAGED_PERSISTENCED = (
    "[Unit]\nStopWhenUnneeded=true\n[Service]\n"
    "ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --no-persistence-mode --verbose\n"
)


def systemctl(args: list[str]) -> int:
    state = load()
    verb, units = args[0], [a for a in args[1:] if not a.startswith("-")]
    if verb in ("enable", "disable", "stop"):
        enabled = set(state["enabled"])
        state["enabled"] = sorted(enabled | set(units) if verb == "enable" else enabled - set(units))
        save(state)
    elif verb == "mask":
        state["masked"] = sorted({*state["masked"], *units})
        save(state)
    elif verb == "is-enabled" and units[0] in state["masked"]:
        print("masked")
        return 1
    elif verb in ("is-enabled", "is-active"):
        return 0 if units[0] in state["enabled"] else 3
    elif verb == "cat":
        return _cat(state, units[0])
    elif verb == "add-wants":
        wants = ROOT / f"etc/systemd/system/{units[0]}.wants"
        wants.mkdir(parents=True, exist_ok=True)
        (wants / units[1]).write_text("")
    return 0


def _cat(state: dict, unit: str) -> int:
    """The unit file (the administrator's in /etc/systemd/system before the packaged one), then its drop-ins."""
    own = ROOT / f"etc/systemd/system/{unit}"
    packaged = unit == "nvidia-persistenced.service" and state["driver"] and state["persistenced_unit"]
    if not own.is_file() and not packaged:
        return fail(f"No files found for {unit}.", 1)
    print(own.read_text() if own.is_file() else PACKAGED_PERSISTENCED)
    for dropin in sorted((ROOT / f"etc/systemd/system/{unit}.d").glob("*.conf")):
        print(dropin.read_text())
    return 0


def lspci(args: list[str]) -> int:
    for index in range(load()["gpus"]):
        print(f"0000:00:{0x1B + index:02x}.0 0302: 10de:2237 (rev a1)")
    return 0


SONAME = re.compile(r"lib[\w+-]+\.so\.\d+")


def ldconfig(args: list[str]) -> int:
    """``-p``: the linker's cache, folder by folder in the order of /etc/ld.so.conf.d (files sorted by name), a
    soname link found in a folder listed first coming first; cuDNN and libefa as their packages install them."""
    if "-p" not in args:
        return 0
    state = load()
    folders = [
        line.strip()
        for conf in sorted((ROOT / "etc/ld.so.conf.d").glob("*.conf"))
        for line in conf.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    found = [
        (f.name, f"{folder}/{f.name}") for folder in folders for f in sorted((ROOT / folder.lstrip("/")).glob("*"))
    ]
    system = "/usr/lib/x86_64-linux-gnu"
    found += [(f"libcudnn.so.{n[8]}", "") for n in state["installed"] if n.startswith("libcudnn") and n[8].isdigit()]
    found += [("libefa.so.1", "")] if state["efa"] else []
    print(f"{len(found)} libs found in cache `/etc/ld.so.cache'")
    for name, path in found:
        if SONAME.fullmatch(name):
            print(f"\t{name} (libc6,x86-64) => {path or f'{system}/{name}'}")
    return 0


def uname(args: list[str]) -> int:
    print(load()["kernel"] if "-r" in args else "x86_64" if "-m" in args else "Linux")
    return 0


def linux_version(args: list[str]) -> int:
    """``list``: the installed kernels; ``sort``: stdin's kernel versions, oldest first (dpkg's order)."""
    kernels = load()["kernels"] if args[0] == "list" else sys.stdin.read().split()
    print("\n".join(sorted(kernels, key=functools.cmp_to_key(compare))))
    return 0


def efa_install(args: list[str]) -> int:
    """``fake-efa-install VERSION PLUGIN_DEBIAN_VERSION``: what an EFA installer leaves behind (the parent's, or
    the tarball's efa_installer.sh)."""
    version, plugin = args
    efa = ROOT / "opt/amazon"
    for folder in ("efa/bin", "efa/lib", "ofi-nccl/lib"):
        (efa / folder).mkdir(parents=True, exist_ok=True)
    (efa / "efa_installed_packages").write_text(f"# EFA installer version: {version}\nlibfabric-aws\n")
    (efa / "efa/bin/fi_info").write_text("#!/bin/sh\necho 'fi_info: libfabric'\n")
    (efa / "efa/bin/fi_info").chmod(0o755)
    (efa / "efa/lib/libfabric.so.1").write_text("")
    (efa / "ofi-nccl/lib/libnccl-net-ofi.so").write_text("")
    state = load()
    state["efa"] = version
    state["installed"]["libnccl-ofi"] = plugin
    save(state)
    return 0


def dcgmi(args: list[str]) -> int:
    print(f"{load()['gpus']} GPUs found.")
    return 0


def _quiet(args: list[str]) -> int:
    return 0


TOOLS: dict[str, Callable[[list[str]], int]] = {
    "nvidia-smi": nvidia_smi,
    "modinfo": modinfo,
    "modprobe": _quiet,
    "systemctl": systemctl,
    "lspci": lspci,
    "ldconfig": ldconfig,
    "update-initramfs": _quiet,
    "update-alternatives": lambda args: 2,
    "uname": uname,
    "linux-version": linux_version,
    "nvidia-persistenced": _quiet,
    "nv-hostengine": _quiet,
    "dcgmi": dcgmi,
    "fake-efa-install": efa_install,
}

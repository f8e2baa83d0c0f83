"""The commands a parent image answers with, faked for the component steps the tests run (tests/scripts/image/fake_system.py).

Served by tests/scripts/image/fake_tool_server.py, which the small wrapper of each tool on PATH calls (``python3
fake_tools.py TOOL ARGS...`` runs one by hand, in the same environment). The parent image is a JSON
state file (``FAKE_STATE``): installed packages (dpkg), the versions the apt repositories offer (apt-cache
madison), the loaded NVIDIA driver, the GPUs, the kernel. ``apt-get`` behaves like ``apt-get -y``: it refuses a
version nobody offers and a downgrade without ``--allow-downgrades``, and logs every install with the version
installed before it. Files go under ``GPU_PLATFORM_ROOT``, the fake root the steps write to.
"""

from __future__ import annotations

import fnmatch
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

STATE = Path(os.environ.get("FAKE_STATE", "state.json"))
ROOT = Path(os.environ.get("GPU_PLATFORM_ROOT", "/nonexistent"))


def _order(c: str) -> int:
    if c.isdigit():
        return 0
    if c.isalpha():
        return ord(c)
    if c == "~":
        return -1
    return ord(c) + 256 if c else 0


def _verrevcmp(a: str, b: str) -> int:
    """dpkg's comparison of two upstream versions or revisions (lib/dpkg/version.c, verrevcmp)."""
    i = j = 0
    while i < len(a) or j < len(b):
        first_diff = 0
        while (i < len(a) and not a[i].isdigit()) or (j < len(b) and not b[j].isdigit()):
            ac, bc = _order(a[i] if i < len(a) else ""), _order(b[j] if j < len(b) else "")
            if ac != bc:
                return ac - bc
            i, j = i + 1, j + 1
        while i < len(a) and a[i] == "0":
            i += 1
        while j < len(b) and b[j] == "0":
            j += 1
        while i < len(a) and a[i].isdigit() and j < len(b) and b[j].isdigit():
            first_diff = first_diff or ord(a[i]) - ord(b[j])
            i, j = i + 1, j + 1
        if i < len(a) and a[i].isdigit():
            return 1
        if j < len(b) and b[j].isdigit():
            return -1
        if first_diff:
            return first_diff
    return 0


def _split(version: str) -> tuple[int, str, str]:
    epoch, _, rest = version.partition(":") if ":" in version else ("0", "", version)
    upstream, _, revision = rest.rpartition("-") if "-" in rest else (rest, "", "")
    return int(epoch or 0), upstream, revision


def compare(a: str, b: str) -> int:
    """<0, 0 or >0 as Debian version ``a`` sorts before, with or after ``b``."""
    (ea, ua, ra), (eb, ub, rb) = _split(a), _split(b)
    return (ea - eb) or _verrevcmp(ua, ub) or _verrevcmp(ra, rb)


def upstream(version: str) -> str:
    return _split(version)[1]


def load() -> dict:
    return json.loads(STATE.read_text())


def save(state: dict) -> None:
    STATE.write_text(json.dumps(state, indent=1, sort_keys=True))


def fail(message: str, code: int = 100) -> int:
    print(message, file=sys.stderr)
    return code


def install(state: dict, name: str, version: str, root: Path = ROOT) -> None:
    """dpkg's view after an install, with the side effects the components rely on (the parent's packages too)."""
    state["installed"][name] = version
    if fnmatch.fnmatch(name, "nvidia-driver-*-open"):
        state["driver"] = upstream(version)
    if fnmatch.fnmatch(name, "datacenter-gpu-manager-4-cuda*"):
        state["installed"]["datacenter-gpu-manager-4-core"] = version
    if name.startswith("cuda-toolkit-"):
        release = name.removeprefix("cuda-toolkit-").replace("-", ".")
        nvcc(root / f"usr/local/cuda-{release}", release, upstream(version))
        # NVIDIA's packages register /usr/local/cuda with update-alternatives (group "cuda", auto mode), which
        # replaces a plain link there: modelled at its worst, the link moves to the toolkit just installed.
        link = root / "usr/local/cuda"
        if link.is_symlink() or not link.exists():
            link.unlink(missing_ok=True)
            link.symlink_to(f"cuda-{release}")
    if name == "libnccl2":  # NVIDIA's package: /usr/lib/x86_64-linux-gnu/libnccl.so.2 -> libnccl.so.2.X.Y
        library(root / "usr/lib/x86_64-linux-gnu", "libnccl.so.2", upstream(version))
    if name.startswith("linux-image-") and name.endswith(state["kernel"].rsplit("-", 1)[1]) and name[12].isdigit():
        state["kernels"] = sorted({*state.get("kernels", []), name.removeprefix("linux-image-")})
    if name == "amazon-cloudwatch-agent":
        _executable(root / "opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl", "exit 0")


def nvcc(toolkit: Path, release: str, version: str) -> None:
    """A toolkit's nvcc, answering --version as CUDA's does (release MAJOR.MINOR)."""
    _executable(toolkit / "bin/nvcc", f"echo 'Cuda compilation tools, release {release}, V{version}'")


def library(folder: Path, soname: str, version: str) -> None:
    """``folder``/SONAME -> SONAME's file at ``version`` (libnccl.so.2 -> libnccl.so.2.30.7), an older one replaced."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = soname.rsplit(".so.", 1)[0]
    for old in folder.glob(f"{stem}.so.*"):
        old.unlink()
    (folder / f"{stem}.so.{version}").write_text("")
    (folder / soname).symlink_to(f"{stem}.so.{version}")


def _unattended_upgrade(state: dict) -> None:
    """apt-daily-upgrade.timer firing while apt runs: unattended-upgrades installs the pending kernel, unless its
    timer is masked or the kernel metapackage is held (apt and unattended-upgrades leave a held package alone)."""
    kernel = state.get("pending_kernel")
    if not kernel or "apt-daily-upgrade.timer" in state["masked"] or "linux-image-aws" in state["held"]:
        return
    before = state["installed"].get("linux-image-aws")
    state["log"].append(
        {"tool": "unattended-upgrade", "package": f"linux-image-{kernel}", "version": kernel, "before": None}
    )
    install(state, f"linux-image-{kernel}", kernel)
    state["installed"]["linux-image-aws"] = f"{kernel}-new"
    state["log"].append(
        {"tool": "unattended-upgrade", "package": "linux-image-aws", "version": "new", "before": before}
    )
    state["pending_kernel"] = None


def _executable(path: Path, command: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{command}\n")
    path.chmod(0o755)


def apt_get(args: list[str]) -> int:
    state = load()
    _unattended_upgrade(state)
    if "install" not in args:
        for name in args[args.index("purge") + 1 :] if "purge" in args else []:
            if not name.startswith("-"):
                state["installed"].pop(name, None)
        save(state)
        return 0
    specs = [a for a in args[args.index("install") + 1 :] if not a.startswith("-")]
    wanted = {}
    for spec in specs:
        name, _, version = spec.partition("=")
        offered = state["offered"].get(name, [])
        if version and version not in offered:
            return fail(f"E: Version '{version}' for '{name}' was not found")
        version = version or state["installed"].get(name) or (offered[0] if offered else "1.0-1")
        before = state["installed"].get(name)
        state["log"].append({"tool": "apt-get", "package": name, "version": version, "before": before, "args": args})
        if before and compare(version, before) < 0 and "--allow-downgrades" not in args:
            save(state)
            return fail("E: Packages were downgraded and -y was used without --allow-downgrades.")
        wanted[name] = version
    for name, version in wanted.items():
        install(state, name, version)
    save(state)
    return 0


def apt_mark(args: list[str]) -> int:
    state = load()
    if args[0] == "hold":
        state["held"] = sorted({*state["held"], *args[1:]})
        save(state)
    elif args[0] == "showhold":
        print("".join(f"{name}\n" for name in state["held"]), end="")
    return 0


def apt_cache(args: list[str]) -> int:
    if args[:1] == ["madison"]:
        for version in load()["offered"].get(args[1], []):
            print(f" {args[1]} | {version} | https://repo.invalid/x86_64  Packages")
    return 0


def _render(fmt: str, name: str, version: str) -> str:
    text = fmt.replace("${Package}", name).replace("${Version}", version)
    return text.replace("${Status}", "install ok installed").replace("\\n", "\n")


def dpkg_query(args: list[str]) -> int:
    fmt = next((a.split("=", 1)[1] for a in args if a.startswith("-f=")), "${Package}\t${Version}\n")
    patterns = [a for a in args if not a.startswith("-")]
    installed = load()["installed"]
    code = 0
    for pattern in patterns or ["*"]:
        names = sorted(n for n in installed if fnmatch.fnmatch(n, pattern))
        if not names:
            code = fail(f"dpkg-query: no packages found matching {pattern}", 1)
        for name in names:
            sys.stdout.write(_render(fmt, name, installed[name]))
    return code


def dpkg(args: list[str]) -> int:
    if args[0] == "--compare-versions":
        a, op, b = args[1:4]
        result = compare(a, b)
        ok = {"lt": result < 0, "le": result <= 0, "eq": result == 0, "ne": result != 0, "ge": result >= 0}
        return 0 if ok.get(op, result > 0) else 1
    if args[0] == "-i":
        fields = dict(line.split(": ", 1) for line in Path(args[-1]).read_text().splitlines() if ": " in line)
        state = load()
        before = state["installed"].get(fields["Package"])
        state["log"].append(
            {"tool": "dpkg -i", "package": fields["Package"], "version": fields["Version"], "before": before}
        )
        install(state, fields["Package"], fields["Version"])
        save(state)
    return 0


def tools() -> dict[str, Callable[[list[str]], int]]:
    """Every fake tool by its name on PATH: the package tools here, the machine's in fake_devices.py, downloads,
    keys and AWS PCS's installers in fake_downloads.py."""
    from fake_devices import TOOLS as DEVICE_TOOLS
    from fake_downloads import TOOLS as DOWNLOAD_TOOLS

    package_tools = {"apt-get": apt_get, "apt-cache": apt_cache, "apt-mark": apt_mark, "dpkg-query": dpkg_query}
    return {**package_tools, "dpkg": dpkg, **DEVICE_TOOLS, **DOWNLOAD_TOOLS}


if __name__ == "__main__":
    sys.exit(tools()[sys.argv[1]](sys.argv[2:]))

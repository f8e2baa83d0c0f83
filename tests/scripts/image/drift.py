"""What the tests of a parent moving share (tests/scripts/image/test_parent_drift.py, test_dlami_parent.py): the
components' parameters, what the repositories offer, and the checks that nothing was downgraded."""

from __future__ import annotations

import fnmatch
from pathlib import Path

from config.image import DEFAULT_VERSIONS
from tests.scripts.image.fake_system import KERNEL, StepResult
from tests.scripts.image.fake_tools import compare

PARAMETERS = {
    **DEFAULT_VERSIONS,
    "PipIndexUrl": "https://pypi.org/simple",
    "ExpectedGpuCount": "4",
    "ExpectEfa": "true",
}
LUSTRE = f"lustre-client-modules-{KERNEL}"
CUDNN = ("libcudnn9-cuda-13", "libcudnn9-dev-cuda-13")
NCCL = ("libnccl2", "libnccl-dev")


def offering(packages: tuple[str, ...], offered: list[str]) -> dict[str, list[str]]:
    """The same versions offered for each of ``packages`` (a -dev beside its library)."""
    return {package: list(offered) for package in packages}


#: What NVIDIA's, AWS's and Ubuntu's repositories offer, newest first: the pins, what the parents carry, and a
#: DCGM newer than any parent (a kept or pinned version must win over the repository's newest).
REPOSITORY = {
    "nvidia-driver-595-open": ["595.91.07-1"],
    "nvidia-fabricmanager-595": ["595.91.07-1", "595.58.03-1"],
    "nvidia-fabricmanager-600": ["600.12.03-1"],
    "datacenter-gpu-manager-4-cuda13": ["1:4.10.0-1", "1:4.9.1-1", "1:4.7.0-1", "1:4.5.3-1"],
    "cuda-toolkit-13-0": ["13.0.5-1", "13.0.3-1", "13.0.1-1"],
    **offering(CUDNN, ["9.26.0.12-1", "9.24.0.43-1", "9.20.0.1-1"]),
    **offering(NCCL, ["2.31.2-1+cuda13.1", "2.31.2-1+cuda13.0", "2.30.7-1+cuda13.2", "2.30.7-1+cuda13.0"]),
    **offering((LUSTRE, "lustre-client-utils"), ["2.15.7-1fsx36", "2.15.6-1fsx34", "2.15.5-1fsx30"]),
}


def fail_message(result: StepResult) -> str:
    """The step's result with its ERROR lines."""
    return f"{result}\n(the step's ERROR lines: {[line for line in result.stderr.splitlines() if 'ERROR' in line]})"


def downgrades(state: dict) -> list[str]:
    """Every apt-get or dpkg -i call that asked for a version below the one installed before it."""
    return [
        f"{call['tool']} {call['package']}={call['version']} over {call['before']}"
        for call in state["log"]
        if (call["before"] and compare(call["version"], call["before"]) < 0)
        or "--allow-downgrades" in call.get("args", [])
    ]


def pins_below_installed(root: Path, state: dict) -> list[str]:
    """A priority >= 1000 apt pin that matches an offered version below the installed one (apt would downgrade)."""
    found = []
    for path in sorted((root / "etc/apt/preferences.d").iterdir()):
        for stanza in path.read_text().split("\n\n"):
            fields = dict(line.split(": ", 1) for line in stanza.strip().splitlines() if ": " in line)
            if int(fields.get("Pin-Priority", "0")) < 1000 or not fields.get("Pin", "").startswith("version "):
                continue
            pattern = fields["Pin"].removeprefix("version ")
            for name, installed in state["installed"].items():
                if not any(fnmatch.fnmatchcase(name, glob) for glob in fields["Package"].split()):
                    continue
                below = [
                    v
                    for v in state["offered"].get(name, [])
                    if fnmatch.fnmatchcase(v, pattern) and compare(v, installed) < 0
                ]
                found += [f"{path.name}: {name} {installed} pinned to {v}" for v in below]
    return found

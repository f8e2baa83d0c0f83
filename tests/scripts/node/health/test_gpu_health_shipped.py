"""The health check as it ships: scripts/node zipped flat, unpacked under the install prefix, run by
its unit's ExecStart from there. Its package (health/) must travel with gpu_health.py and be
found beside it, with no help from the test's import path."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.scripts.node.helpers import FIXTURES, NODE_DIR, UNIT_DIR, read_unit

# isort: split
import layout

#: What the fleet's and the image's S3 assets leave out of scripts/node (stacks/fleet_stack.py).
ASSET_EXCLUDES = ("README.md", "__pycache__", ".pyc")


def ship(to: Path) -> Path:
    """Zip scripts/node as the asset does, unpack it the way the image component does; the install folder."""
    archive = to / "node-scripts.zip"
    with zipfile.ZipFile(archive, "w") as out:
        for path in sorted(NODE_DIR.rglob("*")):
            relative = path.relative_to(NODE_DIR)
            if path.is_file() and not any(part.endswith(ASSET_EXCLUDES) for part in relative.parts):
                out.write(path, relative.as_posix())
    installed = to / layout.INSTALL_PREFIX.lstrip("/")
    subprocess.run([sys.executable, "-m", "zipfile", "-e", str(archive), str(installed)], check=True, timeout=60)
    return installed


def unit_argv(installed: Path) -> list[str]:
    (command,) = read_unit(UNIT_DIR / "gpu-health.service")["Service"]["ExecStart"]
    env = {"EXPECTED_GPUS": "8", "METRIC_NAMESPACE": "GpuPlatform/dev"}
    words = [re.sub(r"\$\{(\w+)\}", lambda m: env[m[1]], word) for word in shlex.split(command)]
    assert words[1] == f"{layout.INSTALL_PREFIX}/gpu_health.py"
    # -E -s: no PYTHONPATH, no user site; the script's own folder is the only place left to import from
    return [sys.executable, "-E", "-s", str(installed / "gpu_health.py"), *words[2:]]


def test_the_unpacked_check_runs_from_its_folder_and_judges(tmp_path: Path) -> None:
    installed = ship(tmp_path)
    shipped = {path.relative_to(installed).as_posix() for path in installed.rglob("*") if path.is_file()}
    package = {"__init__", "parse", "xids", "decide", "probe", "act", "dcgm", "efa"}
    assert {f"health/{name}.py" for name in package} | {"health/xid_catalog.csv"} <= shipped
    case = FIXTURES / "p4d_xid79"
    replay = ["--no-metric", "--no-set-health", "--dcgm", "off", "--fabric-manager", "off"]
    replay += ["--nvidia-smi-rc", (case / "nvidia-smi.rc").read_text().strip()]
    replay += ["--nvidia-smi-output", str(case / "nvidia-smi.out"), "--kernel-log-file", str(case / "kernel.log")]
    env = {key: value for key, value in os.environ.items() if key not in ("JOURNAL_STREAM", "PYTHONPATH")}
    result = subprocess.run(
        [*unit_argv(installed), *replay], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert (
        "gpu-health: ERROR unhealthy: Xid 79 on PCI 0000:a0:1c (no GPU of nvidia-smi at that address): GPU has fallen"
        in result.stdout
    )
    assert result.stderr == ""

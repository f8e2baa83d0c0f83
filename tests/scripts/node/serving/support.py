"""What the service's node tests share: service.json's two kinds (a command, an image), writing one, running a node
module as the node runs it, and the fake docker and nvidia-modprobe that conftest.py puts on a test's PATH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.scripts.node.helpers import NODE_DIR

COMMAND = {"port": 8080, "health_check_path": "/health", "command": "python3 /x/serve.py --port 8080", "image": None}
IMAGE = {
    "port": 9000,
    "health_check_path": "/v2/health/ready",
    "command": None,
    "image": "nvcr.io/nvidia/tritonserver:24.05-py3",
}


def write(tmp_path: Path, data: object) -> Path:
    """``data`` as service.json under ``tmp_path``."""
    path = tmp_path / "service.json"
    path.write_text(json.dumps(data))
    return path


def node_module(module: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python3 -m <module>`` as the node runs it (PYTHONPATH = the node scripts)."""
    child_env = {**os.environ, **(env or {}), "PYTHONPATH": str(NODE_DIR)}
    return subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, env=child_env, timeout=60, check=False
    )


FAKE_DOCKER = """#!/usr/bin/env bash
printf '%s\\n' "$*" >>"$DOCKER_CALLS"
if [[ "$1" == pull && -n "${DOCKER_PULL_FAILS:-}" ]]; then exit 1; fi
if [[ "$1" == run ]]; then printf 'PYTHONPATH=%s\\n' "${PYTHONPATH:-unset}" >>"$DOCKER_CALLS"; fi
"""


# nvidia-modprobe as root: records its arguments; exits 1 silently (as the real one does for -u) when told to.
UVM_CALL = "nvidia-modprobe --unified-memory --create-nvidia-device-file=0"
FAKE_NVIDIA_MODPROBE = """#!/usr/bin/env bash
printf 'nvidia-modprobe %s\\n' "$*" >>"$DOCKER_CALLS"
[[ -z "${NVIDIA_MODPROBE_FAILS:-}" ]] || exit 1
"""

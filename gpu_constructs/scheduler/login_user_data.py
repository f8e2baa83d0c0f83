"""The user data of the Slurm login nodes: the cluster's people, their POSIX users, and Slurm accounting.

A login node gets no node scripts zip (its role reads nothing in S3: Session Manager and PCS registration only), so
its user data carries the one script it runs, scripts/node/slurm_people.py, beside the people file, both gzipped
and base64-encoded: PCS takes user data as a MIME archive, whose shell part is base64 again, and the whole must fit
EC2's 16 KB. Rendering is a pure function of its inputs (gzip without a timestamp: the same config, the same
template).
"""

from __future__ import annotations

import base64
from pathlib import Path

from gpu_constructs.fleet.render.user_data import CONFIG_DIR, INSTALL_PREFIX, USER_DATA_LIMIT_BYTES, packed

SLURM_PEOPLE_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "node" / "slurm_people.py"
PEOPLE_FILE = f"{CONFIG_DIR}/people.json"
SCRIPT_PATH = f"{INSTALL_PREFIX}/slurm_people.py"
#: The oneshot unit that applies Slurm accounting once the node's Slurm answers (not yet when user data runs).
ACCOUNTS_UNIT = "gpu-platform-slurm-accounts.service"
UNIT_DIR = "/etc/systemd/system"
#: How long the unit waits between two tries while the cluster's accounting does not answer yet.
ACCOUNTS_RETRY_SECONDS = 30
#: The MIME archive around the shell part (boundaries, headers), rounded up.
MIME_OVERHEAD_BYTES = 512


def accounts_unit() -> str:
    """Slurm accounting of the people file (``slurm_people.py accounts``), after the node's Slurm daemons, tried
    again every ``ACCOUNTS_RETRY_SECONDS`` until it succeeds; idempotent, so every boot may run it."""
    return "\n".join(
        [
            "[Unit]",
            "Description=GPU platform: Slurm accounts of the cluster's teams and people, and the urgent QoS",
            "Wants=network-online.target",
            "After=network-online.target sackd.service slurmd.service",
            f"ConditionPathExists={PEOPLE_FILE}",
            "StartLimitIntervalSec=0",
            "",
            "[Service]",
            "Type=oneshot",
            "RemainAfterExit=yes",
            f"ExecStart=/usr/bin/python3 {SCRIPT_PATH} accounts --people {PEOPLE_FILE}",
            "Restart=on-failure",
            f"RestartSec={ACCOUNTS_RETRY_SECONDS}",
            "",
            "[Install]",
            "WantedBy=multi-user.target",
        ]
    )


def mime_size(lines: list[str]) -> int:
    """What the lines weigh in the user data EC2 counts: the shell part base64-encoded in PCS's MIME archive."""
    return len(base64.b64encode(("#!/bin/bash\n" + "\n".join(lines)).encode())) + MIME_OVERHEAD_BYTES


def login_user_data(people_json: str, *, accounting: bool) -> list[str]:
    """The bash lines (CDK adds the shebang): the people file and the script, the POSIX users now (Session
    Manager's Run As needs them before anyone arrives), and, with ``accounting``, the unit that applies Slurm
    accounting. ``systemctl --no-block``: the unit runs after slurmd, which PCS starts after this user data."""
    accounts = [
        f"cat > {UNIT_DIR}/{ACCOUNTS_UNIT} <<'UNIT'",
        accounts_unit(),
        "UNIT",
        "systemctl daemon-reload",
        f"systemctl enable --now --no-block {ACCOUNTS_UNIT}",
    ]
    lines = [
        "set -euo pipefail",
        f"install -d -m 0755 {CONFIG_DIR} {INSTALL_PREFIX}",
        *packed(PEOPLE_FILE, people_json + "\n", "PEOPLE"),
        *packed(SCRIPT_PATH, SLURM_PEOPLE_SCRIPT.read_text(encoding="utf-8"), "SLURM_PEOPLE"),
        f"chmod 0755 {SCRIPT_PATH}",
        f"/usr/bin/python3 {SCRIPT_PATH} users --people {PEOPLE_FILE}",
        *(accounts if accounting else []),
    ]
    size = mime_size(lines)
    if size > USER_DATA_LIMIT_BYTES:
        raise ValueError(
            f"the Slurm login nodes' user data would be {size} bytes, over EC2's {USER_DATA_LIMIT_BYTES}; fix: "
            "fewer slurm.users, or people from a directory service"
        )
    return lines

"""The user data of a GPU node: write its settings, fetch the node scripts, run the bootstrap.

Rendering is a pure function of its inputs, so its size (EC2 allows 16 KB) and
content are tested without a synth. Values may be CDK tokens (bucket names,
DNS names): CloudFormation resolves them at deploy time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aws_cdk import Token

#: EC2's limit on user data, before base64.
USER_DATA_LIMIT_BYTES = 16 * 1024

INSTALL_PREFIX = "/opt/gpu-platform/node"
CONFIG_DIR = "/etc/gpu-platform"
#: cloud-init runs these at every boot after the first (on the first, they run before user data).
PER_BOOT_DIR = "/var/lib/cloud/scripts/per-boot"


@dataclass(frozen=True)
class NodeScripts:
    """Where the node scripts zip lies (an S3 asset of the fleet stack)."""

    bucket_name: str
    object_key: str


def _heredoc(path: str, body: str, marker: str) -> list[str]:
    # A quoted marker: the shell expands nothing inside (the agent config has ${aws:...}).
    return [f"cat > {path} <<'{marker}'", body, marker]


def render_node_env(values: Mapping[str, str]) -> str:
    """KEY=value lines; a value with a newline or quote is refused (it would break the file)."""
    lines = []
    for key, value in values.items():
        # Tokens (resolved by CloudFormation: DNS names, bucket names) are checked by their source.
        if not Token.is_unresolved(value) and any(c in str(value) for c in "\n\"'`$\\"):
            raise ValueError(f"node.env value of {key} has a character the env file cannot hold: {value!r}")
        lines.append(f"{key}={value}")
    return "\n".join(lines)


def render_user_data(
    *,
    region: str,
    node_env: Mapping[str, str],
    instance_types: Mapping[str, Mapping[str, Any]],
    agent_config_json: str,
    scripts: NodeScripts,
    every_boot: bool = False,
) -> list[str]:
    """The bash lines of the user data (CDK adds the shebang).

    ``every_boot``: also run the bootstrap at each later boot (cloud-init's per-boot
    scripts). A warm-pool instance is started again from Stopped and must pass its GPU
    check, mount Lustre and complete the launch hook once more before it serves.
    """
    zip_path = f"{INSTALL_PREFIX}.zip"
    per_boot = (
        [
            f"install -d -m 0755 {PER_BOOT_DIR}",
            f"ln -sf {INSTALL_PREFIX}/bootstrap.sh {PER_BOOT_DIR}/gpu-platform-bootstrap.sh",
        ]
        if every_boot
        else []
    )
    return [
        "set -euo pipefail",
        f"install -d -m 0755 {CONFIG_DIR} {INSTALL_PREFIX} /var/log/gpu-platform",
        *_heredoc(f"{CONFIG_DIR}/node.env", render_node_env(node_env), "NODE_ENV"),
        *_heredoc(f"{CONFIG_DIR}/instance-types.json", json.dumps(instance_types, sort_keys=True), "INSTANCE_TYPES"),
        *_heredoc(f"{CONFIG_DIR}/cloudwatch-agent.json", agent_config_json, "AGENT_CONFIG"),
        f"aws s3 cp --only-show-errors --region {region} s3://{scripts.bucket_name}/{scripts.object_key} {zip_path}",
        f"python3 -m zipfile -e {zip_path} {INSTALL_PREFIX}",
        f"chmod 0755 {INSTALL_PREFIX}/*.sh {INSTALL_PREFIX}/*.py",
        *per_boot,
        f"exec {INSTALL_PREFIX}/bootstrap.sh",
    ]

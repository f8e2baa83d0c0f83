"""The user data of a GPU node: write its settings, fetch the node scripts, run the bootstrap.

Rendering is a pure function of its inputs, so its size (EC2 allows 16 KB) and
content are tested without a synth. Values may be CDK tokens (bucket names,
DNS names): CloudFormation resolves them at deploy time.
"""

from __future__ import annotations

import base64
import gzip
import json
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aws_cdk import Token

#: EC2's limit on user data, before base64.
USER_DATA_LIMIT_BYTES = 16 * 1024

INSTALL_PREFIX = "/opt/gpu-platform/node"
#: The repository's examples/ (the example service and training job), beside the node scripts.
EXAMPLES_DIR = "/opt/gpu-platform/examples"
CONFIG_DIR = "/etc/gpu-platform"
LOG_DIR = "/var/log/gpu-platform"
#: The node log the user data's errors go to (NODE_LOGS["bootstrap"]; bootstrap.sh appends to it).
BOOTSTRAP_LOG_NAME = "bootstrap.log"
#: cloud-init runs these at every boot after the first (on the first, they run before user data).
PER_BOOT_DIR = "/var/lib/cloud/scripts/per-boot"


@dataclass(frozen=True)
class NodeScripts:
    """Where the node scripts zip lies (an S3 asset of the fleet stack) and, in the same bucket, the
    examples zip (None: no examples shipped)."""

    bucket_name: str
    object_key: str
    examples_object_key: str | None = None


def _heredoc(path: str, body: str, marker: str) -> list[str]:
    # A quoted marker: the shell expands nothing inside (the agent config has ${aws:...}).
    return [f"cat > {path} <<'{marker}'", body, marker]


def packed(path: str, body: str, marker: str) -> list[str]:
    """Lines that write ``body`` to ``path`` from its gzip in base64 (a heredoc its alphabet never ends): a file that
    grows with the config (the Slurm cluster's people) in a third of its size. No timestamp in the gzip: the same
    config renders the same template."""
    encoded = base64.b64encode(gzip.compress(body.encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")
    return [f"base64 -d <<'{marker}' | gunzip > {path}", *textwrap.wrap(encoded, 76), marker]


def render_node_env(values: Mapping[str, str]) -> str:
    """KEY=value lines; a value with a newline or quote is refused (it would break the file)."""
    lines = []
    for key, value in values.items():
        # Tokens (resolved by CloudFormation: DNS names, bucket names) are checked by their source.
        if not Token.is_unresolved(value) and any(c in str(value) for c in "\n\"'`$\\"):
            raise ValueError(f"node.env value of {key} has a character the env file cannot hold: {value!r}")
        lines.append(f"{key}={value}")
    return "\n".join(lines)


#: Download attempts of the node scripts, and the first pause between two (doubled after each).
FETCH_ATTEMPTS = 5
FETCH_BACKOFF_SECONDS = 5


def _preamble(*, region: str, group: str, hook: str) -> list[str]:
    """Paths (overridable only to run the script off an instance, in tests) and the EXIT trap that
    abandons the launch at once when any command fails: without it, a node whose user data failed
    would wait out the launch hook's heartbeat timeout."""
    return [
        "set -euo pipefail",
        f'etc="${{GPU_PLATFORM_CONFIG_DIR:-{CONFIG_DIR}}}" node="${{GPU_PLATFORM_NODE_DIR:-{INSTALL_PREFIX}}}"',
        f'examples="${{GPU_PLATFORM_EXAMPLES_DIR:-{EXAMPLES_DIR}}}"',
        f'logs="${{GPU_PLATFORM_LOG_DIR:-{LOG_DIR}}}" per_boot="${{GPU_PLATFORM_PER_BOOT_DIR:-{PER_BOOT_DIR}}}"',
        f'imds="${{IMDS_URL:-http://169.254.169.254}}" aws="${{AWS_CLI:-aws}}" backoff="${{FETCH_BACKOFF_S:-{FETCH_BACKOFF_SECONDS}}}"',
        # stderr also to bootstrap.log, which the agent ships once it runs (the console keeps a copy:
        # a node that fails before the agent starts shows it in `aws ec2 get-console-output` only)
        'install -d -m 0755 "$logs"',
        f'exec 3>&2 2> >(tee -a "$logs/{BOOTSTRAP_LOG_NAME}" >&3)',
        "abandon() {",
        "  local rc=$? token id",
        "  trap - EXIT",
        '  [ "$rc" -ne 0 ] || exit 0',
        '  echo "user data failed (status $rc): completing the launch hook with ABANDON" >&2',
        "  token=$(curl -sf -m 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' \"$imds/latest/api/token\") &&",
        '    id=$(curl -sf -m 5 -H "X-aws-ec2-metadata-token: $token" "$imds/latest/meta-data/instance-id") &&',
        f'    "$aws" autoscaling complete-lifecycle-action --region {region} --auto-scaling-group-name {group}'
        f' --lifecycle-hook-name {hook} --instance-id "$id" --lifecycle-action-result ABANDON ||',
        '    echo "ABANDON could not be sent: the hook\'s default result applies at its timeout" >&2',
        '  exit "$rc"',
        "}",
        "trap abandon EXIT",
        "trap 'exit 143' TERM",
    ]


def _fetch(*, region: str) -> list[str]:
    """``fetch SRC ZIP``: one zip, retried with a doubling pause (the node role's read policy or the S3
    route may lag the instance by seconds); the last failure falls to the EXIT trap."""
    return [
        "fetch() {",
        '  local try=1 src="$1" zip="$2"',
        f'  until "$aws" s3 cp --only-show-errors --region {region} "$src" "$zip"; do',
        f'    [ "$try" -lt {FETCH_ATTEMPTS} ] || return 1',
        f'    echo "node scripts download failed (attempt $try of {FETCH_ATTEMPTS}); retrying in $((backoff << (try - 1))) s" >&2',
        '    sleep "$((backoff << (try - 1)))"',
        "    try=$((try + 1))",
        "  done",
        "}",
    ]


def render_user_data(
    *,
    region: str,
    node_env: Mapping[str, str],
    instance_types: Mapping[str, Mapping[str, Any]],
    agent_config_json: str,
    scripts: NodeScripts,
    service_json: str | None = None,
    people_json: str | None = None,
    every_boot: bool = False,
) -> list[str]:
    """The bash lines of the user data (CDK adds the shebang).

    Any failure, including a download that still fails after its retries, completes the launch
    hook named in ``node_env`` (``ASG_NAME``, ``LAUNCH_HOOK_NAME``) with ABANDON at once; from
    ``exec`` on, bootstrap.sh's own trap does.

    ``service_json``: the fleet's service (``service.json``, node_settings.service_json), written only
    for a served fleet. The examples zip (``scripts.examples_object_key``) is unpacked into EXAMPLES_DIR.

    ``people_json``: a Slurm node's people (node_settings.people_json), written to ``people.json`` (packed); their POSIX
    users are added (scripts/node/slurm_people.py users) before the bootstrap, so before slurmd starts any job.

    ``every_boot``: also run the bootstrap at each later boot (cloud-init's per-boot
    scripts). A warm-pool instance is started again from Stopped and must pass its GPU
    check, mount Lustre and complete the launch hook once more before it serves.
    """
    per_boot = (
        ['install -d -m 0755 "$per_boot"', 'ln -sf "$node/bootstrap.sh" "$per_boot/gpu-platform-bootstrap.sh"']
        if every_boot
        else []
    )
    service = _heredoc('"$etc/service.json"', service_json, "SERVICE") if service_json is not None else []
    people = packed('"$etc/people.json"', people_json + "\n", "PEOPLE") if people_json is not None else []
    users = ['python3 "$node/slurm_people.py" users --people "$etc/people.json"'] if people_json is not None else []
    examples = (
        [
            'install -d -m 0755 "$examples"',
            f'fetch s3://{scripts.bucket_name}/{scripts.examples_object_key} "$examples.zip"',
            'python3 -m zipfile -e "$examples.zip" "$examples"',
        ]
        if scripts.examples_object_key is not None
        else []
    )
    return [
        *_preamble(region=region, group=node_env["ASG_NAME"], hook=node_env["LAUNCH_HOOK_NAME"]),
        *_fetch(region=region),
        'install -d -m 0755 "$etc" "$node" "$logs"',
        *_heredoc('"$etc/node.env"', render_node_env(node_env), "NODE_ENV"),
        *_heredoc('"$etc/instance-types.json"', json.dumps(instance_types, sort_keys=True), "INSTANCE_TYPES"),
        *_heredoc('"$etc/cloudwatch-agent.json"', agent_config_json, "AGENT_CONFIG"),
        *service,
        *people,
        f'fetch s3://{scripts.bucket_name}/{scripts.object_key} "$node.zip"',
        'python3 -m zipfile -e "$node.zip" "$node"',
        'chmod 0755 "$node"/*.sh "$node"/*.py',
        *examples,
        *users,
        *per_boot,
        "shopt -s execfail  # a failed exec returns, and falls to the trap",
        "# bootstrap.sh writes bootstrap.log itself: its stderr goes back to the console only",
        'exec "$node/bootstrap.sh" 2>&3 3>&-',
    ]

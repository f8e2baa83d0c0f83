"""``gpu-platform validate``: the config alone, as synth reads it, plus checks that need a clock.

No synth and no AWS call. The config rules are the ones ``app.py`` runs (``load_platform``), so
a config error here is the same one-line error synth prints. On top of them:

- a Capacity Block whose window has ended is an ERROR: its fleet could never launch (an instance
  of a block runs only inside the block's window), and Auto Scaling refuses to create the
  fleet's scheduled actions with a start time in the past;
- a Capacity Block whose window is already open (past the fleet's scale-up action, start + 5 min)
  is a WARNING: a fleet already deployed keeps its actions, but a first deploy of it fails for
  the same reason, and a redeploy during the block replaces nothing (Capacity Block fleets are
  not refreshed) yet touches a group whose jobs are running;
- the example notification address (example.com/.net/.org, RFC 2606) and the placeholder
  account ids of the shipped configs (one digit twelve times) are WARNINGs: valid, but nobody
  receives the alerts and the deploy goes to an account that is not yours;
- a file in the config folder that looks like an environment but is not read (``qa.yml``, ``dev.yaml.bak``,
  ``Prod.YAML``, or a ``.yaml`` with an account and a region in a subfolder) is a WARNING: only
  ``<config>/<env>.yaml`` files are environments;
- an edit since the deployed config (``--since``, a git revision) that CloudFormation would apply by
  replacing something in use (a target group, a load balancer, the file system, a placement group, the
  VPC's subnets) is an ERROR naming the safe way (a WARNING with ``--allow-replacement``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from config.loader import CONFIG_DIR, available_environments, display_path, load_platform, safe_load
from config.pipeline_schema import PIPELINE_FILE
from config.schema import Environment
from ops.deployed_config import change_findings
from ops.findings import Finding, Level

#: The fleet's scale-up action runs this long after the block starts (gpu_constructs/fleet/gpu_fleet.py).
BLOCK_START_DELAY = timedelta(minutes=5)
_PLACEHOLDER_ACCOUNT = re.compile(r"^(\d)\1{11}$")
_EXAMPLE_DOMAIN = re.compile(r"@(.+\.)?example\.(com|net|org)$", re.IGNORECASE)


def clock_findings(env: Environment, shown: str, now: datetime) -> list[Finding]:
    findings = []
    for i, fleet in enumerate(env.fleets):
        block = fleet.capacity_block
        if block is None:
            continue
        field = f"fleets[{i}].capacity_block"
        if block.end <= now:
            findings.append(
                Finding(
                    "capacity-block-window",
                    Level.ERROR,
                    f"{shown}: {field}: the block {block.id} ended at {block.end.isoformat()}",
                    "set id, start and end of a block you have bought, or remove capacity_block and the fleet",
                )
            )
        elif block.start + BLOCK_START_DELAY <= now:
            findings.append(
                Finding(
                    "capacity-block-window",
                    Level.WARNING,
                    f"{shown}: {field}: the block {block.id} is open since {block.start.isoformat()}; a first "
                    "deploy of this fleet now fails (Auto Scaling refuses a scheduled action in the past)",
                    "deploy this fleet before a block starts; a fleet already deployed keeps its schedule",
                )
            )
    return findings


def placeholder_findings(env: Environment, shown: str) -> list[Finding]:
    findings = []
    if _PLACEHOLDER_ACCOUNT.match(env.account):
        findings.append(
            Finding(
                "placeholder-account",
                Level.WARNING,
                f"{shown}: account: {env.account} is the shipped placeholder",
                f"write your AWS account id (quoted) in {shown}",
            )
        )
    for i, address in enumerate(env.notifications.emails):
        if _EXAMPLE_DOMAIN.search(address):
            findings.append(
                Finding(
                    "example-notification-address",
                    Level.WARNING,
                    f"{shown}: notifications.emails[{i}]: {address} is an example address: nobody receives the alerts",
                    "write the on-call team's address",
                )
            )
    return findings


def _looks_like_environment(path: Path) -> bool:
    try:
        data = safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    return isinstance(data, dict) and {"account", "region"} <= set(data)


def unread_file_findings(config_dir: Path) -> list[Finding]:
    """Files of ``config_dir`` that look like an environment but are not read: only ``<env>.yaml`` directly
    in it is one; a YAML file of another name or in a subfolder is read only where it has an account and a region."""
    findings = []
    read = {config_dir / f"{name}.yaml" for name in available_environments(config_dir)}
    read.add(config_dir / PIPELINE_FILE)  # the pipeline's own config (config/pipeline_schema.py), read by every synth
    for path in sorted(config_dir.rglob("*")):
        lowered = path.name.lower()
        if path in read or not path.is_file() or not (".yml" in lowered or ".yaml" in lowered):
            continue
        top = path.parent == config_dir
        if not top and not _looks_like_environment(path):
            continue
        stem = path.name.split(".", 1)[0].lower()
        folder = display_path(config_dir)
        target = config_dir / f"{stem}.yaml"
        fix = (
            f"move it out of {folder}/ ({display_path(target)} is the environment {stem})"
            if target in read
            else f"rename it to {display_path(target)} if it is an environment, else move it out of {folder}/"
        )
        findings.append(
            Finding(
                "unread-config-file",
                Level.WARNING,
                f"{display_path(path)}: not read: environments are the <env>.yaml files directly in {folder}/",
                fix,
            )
        )
    return findings


def validate(
    names: Iterable[str] | None = None,
    config_dir: Path = CONFIG_DIR,
    now: datetime | None = None,
    since: str | None = None,
    allow_replacement: bool = False,
    since_required: bool = True,
) -> list[Finding]:
    """Findings for the named environments (all when None); a ``ConfigError`` for a config mistake.
    With ``since`` (a git revision), the edits since then that replace a resource in use (ops/deployed_config.py)."""
    now = now or datetime.now(UTC)
    platform = load_platform(list(names) if names is not None else None, config_dir)
    findings: list[Finding] = unread_file_findings(config_dir)
    for env in platform.selected_environments:
        shown = display_path(config_dir / f"{env.name}.yaml")
        findings.extend(clock_findings(env, shown, now))
        findings.extend(placeholder_findings(env, shown))
        findings.extend(
            change_findings(
                env, config_dir / f"{env.name}.yaml", shown, since, allow_replacement, required=since_required
            )
        )
    return findings

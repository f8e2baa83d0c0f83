"""Who and where: the credentials' account, the region's opt-in status, the CDK bootstrap stack."""

from __future__ import annotations

import json
from pathlib import Path

from botocore.exceptions import ClientError

from config.schema import Environment
from ops.findings import Finding, Level
from ops.preflight.aws import Aws, error_code

#: The bootstrap stack and version parameter of CDK's default synthesizer (qualifier hnb659fds).
TOOLKIT_STACK = "CDKToolkit"
BOOTSTRAP_VERSION_PARAMETER = "/cdk-bootstrap/hnb659fds/version"
#: Regions that need no opt-in, and regions the account opted in to.
_ENABLED = {"opt-in-not-required", "opted-in"}


def check_account(env: Environment, aws: Aws) -> list[Finding]:
    """The credentials belong to the config's account (every other check reads that account)."""
    identity = aws.client("sts").get_caller_identity()
    actual = identity["Account"]
    if actual != env.account:
        return [
            Finding(
                "account",
                Level.ERROR,
                f"the credentials ({identity['Arn']}) are for account {actual}, but {env.name} deploys to {env.account}",
                f'use credentials for account {env.account}, or set account: "{actual}" in config/{env.name}.yaml',
            )
        ]
    return [Finding("account", Level.INFO, f"credentials are for account {actual} ({identity['Arn']})")]


def check_region(env: Environment, aws: Aws) -> list[Finding]:
    """The region is enabled for the account (an opt-in region must be enabled first)."""
    try:
        regions = aws.client("ec2").describe_regions(AllRegions=True)["Regions"]
    except ClientError as err:
        if error_code(err) not in ("OptInRequired", "AuthFailure"):
            raise
        return [
            Finding(
                "region",
                Level.ERROR,
                f"EC2 in {env.region} refuses the account ({error_code(err)}): the region is not enabled",
                f"enable it (aws account enable-region --region-name {env.region}) and wait until it is ENABLED",
            )
        ]
    status = next((r.get("OptInStatus", "") for r in regions if r["RegionName"] == env.region), None)
    if status is None:
        return [
            Finding("region", Level.ERROR, f"{env.region} is not a region of this partition", "use an existing region")
        ]
    if status not in _ENABLED:
        return [
            Finding(
                "region",
                Level.ERROR,
                f"{env.region} is {status} for account {env.account}",
                f"enable it (aws account enable-region --region-name {env.region}) and wait until it is ENABLED",
            )
        ]
    return [Finding("region", Level.INFO, f"{env.region} is enabled ({status})")]


def required_bootstrap_version(assembly: Path) -> int | None:
    """The bootstrap version the synthesized assembly declares (``requiresBootstrapStackVersion`` of its
    stacks and asset manifests in ``manifest.json``; the CLI refuses to deploy below it); None without one."""
    manifest = assembly / "manifest.json"
    if not manifest.is_file():
        return None
    artifacts = json.loads(manifest.read_text(encoding="utf-8")).get("artifacts", {})
    versions = [
        a.get("properties", {}).get("requiresBootstrapStackVersion") for a in artifacts.values() if isinstance(a, dict)
    ]
    versions = [v for v in versions if isinstance(v, int)]
    return max(versions) if versions else None


def check_bootstrap(env: Environment, aws: Aws, assembly: Path) -> list[Finding]:
    """The CDKToolkit stack exists and its version parameter is at least what the assembly requires."""
    bootstrap = f"npx cdk bootstrap aws://{env.account}/{env.region}"
    try:
        stack = aws.client("cloudformation").describe_stacks(StackName=TOOLKIT_STACK)["Stacks"][0]
    except ClientError as err:
        if error_code(err) != "ValidationError":
            raise
        return [
            Finding(
                "cdk-bootstrap",
                Level.ERROR,
                f"no {TOOLKIT_STACK} stack in {env.region}: the account is not bootstrapped",
                f"run {bootstrap}",
            )
        ]
    if stack["StackStatus"].endswith("_FAILED") or stack["StackStatus"].startswith("ROLLBACK"):
        return [
            Finding(
                "cdk-bootstrap",
                Level.ERROR,
                f"{TOOLKIT_STACK} is {stack['StackStatus']}",
                f"fix the stack's failure in the CloudFormation console, then run {bootstrap}",
            )
        ]
    try:
        version = int(aws.client("ssm").get_parameter(Name=BOOTSTRAP_VERSION_PARAMETER)["Parameter"]["Value"])
    except ClientError as err:
        if error_code(err) != "ParameterNotFound":
            raise
        return [
            Finding(
                "cdk-bootstrap",
                Level.ERROR,
                f"{TOOLKIT_STACK} exists but {BOOTSTRAP_VERSION_PARAMETER} does not (the templates read it)",
                f"run {bootstrap} with the project's CLI",
            )
        ]
    required = required_bootstrap_version(assembly)
    if required is None:
        return [
            Finding(
                "cdk-bootstrap",
                Level.WARNING,
                f"bootstrap version {version}; no synthesized assembly at {assembly} to compare it with",
                f"run make synth ENV={env.name}, then preflight again",
            )
        ]
    if version < required:
        return [
            Finding(
                "cdk-bootstrap",
                Level.ERROR,
                f"bootstrap version {version} is below the {required} the synthesized templates require",
                f"run {bootstrap} with the project's CLI (node_modules/.bin/cdk)",
            )
        ]
    return [Finding("cdk-bootstrap", Level.INFO, f"bootstrap version {version} (the templates require {required})")]

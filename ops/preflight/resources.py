"""What the templates resolve at deploy and what the stateful stacks create: the AMI parameters,
the FSx for Lustre storage quota, NAT gateways and Elastic IP addresses."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from config.naming import ResourceNames
from config.network import EgressMode
from config.schema import Environment
from config.upgrades import LAST_RELEASE_RETAINING_IT, LEGACY_LOGICAL_ID
from ops.findings import Finding, Level
from ops.golden_ami import bootstrap_ami_finding, describe_ami
from ops.preflight.aws import Aws, error_code

#: NAT gateways per Availability Zone (service vpc) and EC2-VPC Elastic IPs (service ec2).
NAT_PER_AZ_QUOTA = ("vpc", "L-FE5A380F")
EIP_QUOTA = ("ec2", "L-0263D0A3")


def _parameter(aws: Aws, name: str) -> str | None:
    try:
        return aws.client("ssm").get_parameter(Name=name)["Parameter"]["Value"]
    except ClientError as err:
        if error_code(err) != "ParameterNotFound":
            raise
        return None


def _stack_exists(aws: Aws, name: str) -> bool:
    try:
        stacks = aws.client("cloudformation").describe_stacks(StackName=name)["Stacks"]
    except ClientError as err:
        if error_code(err) != "ValidationError":
            raise
        return False
    return any(s["StackStatus"] != "DELETE_COMPLETE" for s in stacks)


def _legacy_parameter_finding(env: Environment, aws: Aws, image_stack: str) -> Finding | None:
    """An ERROR when the deployed Image stack still holds the released AMI parameter resource without Retain:
    deploying this release would remove it, and CloudFormation would delete the parameter the fleets launch from."""
    body = aws.client("cloudformation").get_template(StackName=image_stack, TemplateStage="Original")["TemplateBody"]
    template = body if isinstance(body, dict) else json.loads(body)
    legacy = template.get("Resources", {}).get(LEGACY_LOGICAL_ID)
    if legacy is None or legacy.get("DeletionPolicy") == "Retain":
        return None
    names = ResourceNames.of(env)
    return Finding(
        "ami-parameters",
        Level.ERROR,
        f"{image_stack} holds {names.ami_parameter} as {LEGACY_LOGICAL_ID} without DeletionPolicy Retain (a release "
        "before 42266c5): this release removes that resource, and CloudFormation would delete the parameter",
        f"deploy release {LAST_RELEASE_RETAINING_IT} first (git checkout {LAST_RELEASE_RETAINING_IT} && make deploy "
        f"ENV={env.name}), then this one",
    )


def check_ami_parameters(env: Environment, aws: Aws) -> list[Finding]:
    """The public AMI parameters the config names exist; the fleets' AMI parameter exists once the
    Image stack has seeded it (it does so on its first deploy, before the Fleets stack reads it)."""
    names = ResourceNames.of(env)
    findings = []
    public = {"image.bootstrap_ami_parameter": env.image.bootstrap_ami_parameter}
    if env.image.build:
        public["image.parent_image_parameter"] = env.image.parent_image_parameter
    for field, name in public.items():
        value = _parameter(aws, name)
        if value is None:
            findings.append(
                Finding(
                    "ami-parameters",
                    Level.ERROR,
                    f"{field}: {name} does not exist in {env.region}",
                    f"set {field} in config/{env.name}.yaml to a public parameter of {env.region} "
                    "(aws ssm get-parameters-by-path --path /aws/service/deeplearning/ami)",
                )
            )
        else:
            findings.append(Finding("ami-parameters", Level.INFO, f"{field}: {name} = {value}"))
    latest = _parameter(aws, names.ami_parameter)
    image_stack = names.stack_name("Image")
    legacy = _legacy_parameter_finding(env, aws, image_stack) if _stack_exists(aws, image_stack) else None
    findings += [legacy] if legacy else []
    if latest is not None:
        findings.append(Finding("ami-parameters", Level.INFO, f"{names.ami_parameter} = {latest}"))
        bootstrap = bootstrap_ami_finding(env, latest, describe_ami(aws.client("ec2"), latest), "ami-parameters")
        findings += [bootstrap] if bootstrap else []
    elif _stack_exists(aws, image_stack):
        findings.append(
            Finding(
                "ami-parameters",
                Level.ERROR,
                f"{names.ami_parameter} is missing although {image_stack} exists (it seeds it only on create); "
                "the Fleets stack cannot resolve it",
                "put the last AMI id back: aws ssm put-parameter --data-type aws:ec2:image --type String "
                f"--name {names.ami_parameter} --value ami-...",
            )
        )
    else:
        findings.append(
            Finding(
                "ami-parameters",
                Level.INFO,
                f"{names.ami_parameter} does not exist yet: {image_stack} creates it on its first deploy, "
                "before the Fleets stack reads it",
            )
        )
    return findings


def _ours(tags: list[dict[str, str]], env: Environment) -> bool:
    """Whether a resource carries this environment's cost-allocation tags (a redeploy replaces it, not adds)."""
    values = {t["Key"]: t["Value"] for t in tags or []}
    return values.get("Project") == env.tags["Project"] and values.get("Environment") == env.name


def _lustre_quota(name: str, deployment_type: str) -> bool:
    lowered = name.lower()
    kind = "scratch" if deployment_type.startswith("SCRATCH") else "persistent"
    return "lustre" in lowered and "storage capacity" in lowered and kind in lowered and "hdd" not in lowered


def check_fsx_quota(env: Environment, aws: Aws) -> list[Finding]:
    """The account's FSx for Lustre storage quota of this deployment type covers this file system plus the
    Lustre file systems of others already there."""
    fs = env.storage.file_system
    kind = str(fs.deployment_type)
    quotas = aws.quotas_named("fsx", lambda n: _lustre_quota(n, kind))
    if not quotas:
        return [
            Finding(
                "fsx-quota",
                Level.WARNING,
                f"no FSx for Lustre storage capacity quota for {kind} found in Service Quotas (fsx)",
                "check the FSx for Lustre quotas in the Service Quotas console, or suppress fsx-quota",
            )
        ]
    others = [
        f
        for f in aws.pages("fsx", "describe_file_systems", "FileSystems")
        if f.get("FileSystemType") == "LUSTRE" and not _ours(f.get("Tags", []), env)
    ]
    used = sum(int(f.get("StorageCapacity", 0)) for f in others)
    need = used + fs.storage_capacity_gib
    findings = []
    for q in quotas:
        if need > q["Value"]:
            findings.append(
                Finding(
                    "fsx-quota",
                    Level.ERROR,
                    f"'{q['QuotaName']}' ({q['QuotaCode']}) is {q['Value']:g} GiB; {len(others)} other Lustre file "
                    f"system(s) use {used} and storage.file_system needs {fs.storage_capacity_gib}",
                    f"request {q['QuotaCode']} >= {need} in Service Quotas (fsx), or lower storage_capacity_gib",
                )
            )
        else:
            findings.append(
                Finding(
                    "fsx-quota",
                    Level.INFO,
                    f"'{q['QuotaName']}' ({q['QuotaCode']}): {q['Value']:g} GiB cover {used} in use + {fs.storage_capacity_gib}",
                )
            )
    return findings


def _nat_zones(aws: Aws, env: Environment) -> dict[str, int]:
    """NAT gateways (pending or available) of others per zone."""
    gateways = [
        g
        for g in aws.pages("ec2", "describe_nat_gateways", "NatGateways")
        if g.get("State") in ("pending", "available") and not _ours(g.get("Tags", []), env)
    ]
    subnets: dict[str, Any] = {}
    ids = sorted({g["SubnetId"] for g in gateways})
    if ids:
        subnets = {s["SubnetId"]: s for s in aws.pages("ec2", "describe_subnets", "Subnets", SubnetIds=ids)}
    counts: dict[str, int] = {}
    for g in gateways:
        zone = subnets.get(g["SubnetId"], {}).get("AvailabilityZone", "")
        counts[zone] = counts.get(zone, 0) + 1
    return counts


def check_nat_eip_quotas(env: Environment, aws: Aws) -> list[Finding]:
    """With egress nat: one NAT gateway per zone in the first ``nat_gateways`` zones, each with an Elastic IP;
    the per-zone NAT quota and the Elastic IP quota cover them next to what others already hold."""
    if env.network.egress is not EgressMode.NAT:
        return [Finding("nat-eip-quotas", Level.INFO, "egress isolated: no NAT gateway, no Elastic IP")]
    count = env.network.nat_gateways
    findings = []
    nat_quota = aws.quota(*NAT_PER_AZ_QUOTA) or 0.0
    others = _nat_zones(aws, env)
    for zone in env.availability_zones[:count]:
        if others.get(zone, 0) + 1 > nat_quota:
            findings.append(
                Finding(
                    "nat-eip-quotas",
                    Level.ERROR,
                    f"{zone} holds {others.get(zone, 0)} NAT gateway(s) of others; 'NAT gateways per Availability "
                    f"Zone' ({NAT_PER_AZ_QUOTA[1]}) is {nat_quota:g}",
                    f"request {NAT_PER_AZ_QUOTA[1]} >= {others.get(zone, 0) + 1} in Service Quotas (vpc), or remove unused NAT gateways",
                )
            )
    eip_quota = aws.quota(*EIP_QUOTA) or 0.0
    addresses = [a for a in aws.client("ec2").describe_addresses()["Addresses"] if not _ours(a.get("Tags", []), env)]
    need = len(addresses) + count
    if need > eip_quota:
        findings.append(
            Finding(
                "nat-eip-quotas",
                Level.ERROR,
                f"{len(addresses)} Elastic IP(s) of others + {count} for the NAT gateways exceed 'EC2-VPC Elastic IPs' "
                f"({EIP_QUOTA[1]}) = {eip_quota:g}",
                f"request {EIP_QUOTA[1]} >= {need} in Service Quotas (ec2), or release unused Elastic IPs",
            )
        )
    if not findings:
        findings.append(
            Finding(
                "nat-eip-quotas",
                Level.INFO,
                f"{count} NAT gateway(s) fit {nat_quota:g} per zone; {need} Elastic IPs fit {eip_quota:g}",
            )
        )
    return findings

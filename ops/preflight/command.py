"""``gpu-platform preflight --env E``: run every check against the account, print the findings, exit 0/1/2."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import boto3
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from config.errors import ConfigError
from config.loader import CONFIG_DIR, load_environment
from config.preflight import CHECK_NAMES
from config.schema import Environment
from ops.findings import Finding, Level, exit_code
from ops.preflight import capacity, identity, pcs, quotas, reservations, resources
from ops.preflight.aws import NO_CREDENTIALS, Aws, describe_failure, error_code

ROOT = Path(__file__).resolve().parents[2]
Check = Callable[[Environment, Aws], list[Finding]]
#: Checks whose ERROR stops the run: every later call would read the wrong account or a closed region.
GATES = ("account", "region")
#: AWS's answers to credentials it does not accept.
_REJECTED = {"ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId", "UnrecognizedClientException"}
#: What a check needs to read; printed with a check that was denied.
READ_ACCESS = (
    "sts:GetCallerIdentity, ec2:Describe*, cloudformation:DescribeStacks/GetTemplate, ssm:GetParameter, "
    "servicequotas:Get*/List*, fsx:DescribeFileSystems, pcs:ListClusters/ListTagsForResource"
)


class CredentialsProblem(Exception):
    """The checks cannot run with these credentials; the text is the one line printed (exit 2)."""


def checks(env: Environment, assembly: Path | None) -> dict[str, Check]:
    """Every check by name, in the order of ``config.preflight.CHECK_NAMES``."""
    assembly = assembly or ROOT / "cdk.out" / f"assembly-{env.name}"
    table: dict[str, Check] = {
        "account": identity.check_account,
        "region": identity.check_region,
        "cdk-bootstrap": partial(identity.check_bootstrap, assembly=assembly),
        "instance-offerings": capacity.check_offerings,
        "efa-support": capacity.check_efa,
        "vcpu-quotas": quotas.check_vcpu_quotas,
        "capacity-reservations": reservations.check_reservations,
        "capacity-blocks": reservations.check_blocks,
        "ami-parameters": resources.check_ami_parameters,
        "fsx-quota": resources.check_fsx_quota,
        "nat-eip-quotas": resources.check_nat_eip_quotas,
        "pcs": pcs.check_pcs,
    }
    return {name: table[name] for name in CHECK_NAMES}


def _run_one(name: str, check: Check, env: Environment, aws: Aws) -> list[Finding]:
    try:
        return check(env, aws)
    except (NoCredentialsError, PartialCredentialsError):
        raise CredentialsProblem(NO_CREDENTIALS) from None
    except ClientError as err:
        if error_code(err) in _REJECTED:
            raise CredentialsProblem(
                f"AWS rejected the credentials in {env.region} ({describe_failure(err)}); fix: refresh them "
                f"(aws sso login, or new keys), or enable {env.region} for the account if it is an opt-in region"
            ) from None
        return [Finding(name, Level.UNCHECKED, f"could not run: {describe_failure(err)}", f"allow {READ_ACCESS}")]
    except BotoCoreError as err:
        return [
            Finding(name, Level.UNCHECKED, f"could not run: {describe_failure(err)}", "check network access to AWS")
        ]


def run_checks(env: Environment, aws: Aws, assembly: Path | None = None) -> list[Finding]:
    """Every check's findings, WARNINGs of suppressed checks turned INFO; a gate that failed skips the rest,
    and so does an account check that could not run (the others would read an account nobody confirmed)."""
    findings: list[Finding] = []
    todo = list(checks(env, assembly).items())
    for index, (name, check) in enumerate(todo):
        found = _run_one(name, check, env, aws)
        findings += [_suppressed(f) if name in env.preflight.suppress else f for f in found]
        rest = [n for n, _ in todo[index + 1 :]]
        if name in GATES and any(f.level is Level.ERROR for f in found):
            findings.append(Finding(name, Level.INFO, f"skipped until {name} passes: {', '.join(rest)}"))
            break
        if name == "account" and any(f.level is Level.UNCHECKED for f in found):
            why = "not run: the account check could not run, so whose account would be read is unknown"
            findings += [Finding(n, Level.UNCHECKED, why, found[0].fix) for n in rest]
            break
    return findings


def checked_nothing(findings: list[Finding]) -> bool:
    """True when checks could not run and none but the account check (which any credentials answer) did."""
    ran = {f.check for f in findings if f.level is not Level.UNCHECKED}
    return any(f.level is Level.UNCHECKED for f in findings) and not ran - {"account"}


def _suppressed(finding: Finding) -> Finding:
    if finding.level is not Level.WARNING:
        return finding
    return Finding(finding.check, Level.INFO, f"{finding.message} (WARNING suppressed in config)", finding.fix)


_STYLE = {Level.ERROR: "bold red", Level.WARNING: "yellow", Level.UNCHECKED: "magenta", Level.INFO: "green"}


def render(env: Environment, findings: list[Finding], console: Console) -> None:
    table = Table(title=f"preflight {env.name} (account {env.account}, {env.region})", show_lines=False)
    for column in ("check", "level", "finding", "fix"):
        table.add_column(column, overflow="fold")
    for f in findings:
        table.add_row(f.check, f"[{_STYLE[f.level]}]{f.level.value}[/]", escape(f.message), escape(f.fix))
    console.print(table)
    counts = {level: sum(f.level is level for f in findings) for level in Level}
    console.print(
        f"{counts[Level.ERROR]} error(s), {counts[Level.WARNING]} warning(s), {counts[Level.UNCHECKED]} could not "
        f"run, {counts[Level.INFO]} info"
    )


def preflight_command(
    env: str,
    json_out: bool,
    config_dir: Path | None = None,
    session: boto3.session.Session | None = None,
    *,
    strict: bool = False,
    assembly: Path | None = None,
    aws: Aws | None = None,
) -> int:
    """Run the preflight checks of ``env``; 0 ok, 1 findings (ERROR, or with ``strict`` a WARNING or a check that
    could not run), 2 a config or credentials problem, or no check could run (one line on stderr). ``aws``
    replaces the clients made from ``session``."""
    try:
        environment = load_environment(env, config_dir or CONFIG_DIR)
    except ConfigError as err:
        print("\n".join(err.lines), file=sys.stderr)
        return 2
    try:
        aws = aws or Aws(session or boto3.session.Session(region_name=environment.region))
        if aws.session.get_credentials() is None:
            raise CredentialsProblem(NO_CREDENTIALS)
        findings = run_checks(environment, aws, assembly)
    except CredentialsProblem as err:
        print(str(err), file=sys.stderr)
        return 2
    except BotoCoreError as err:  # e.g. AWS_PROFILE names no profile
        print(f"AWS configuration: {describe_failure(err)}; fix: {NO_CREDENTIALS.split(': ', 1)[1]}", file=sys.stderr)
        return 2
    if json_out:
        print(json.dumps([{**f.__dict__, "level": f.level.value} for f in findings], indent=2))
    else:
        render(environment, findings, Console())
    if checked_nothing(findings):
        first = next(f for f in findings if f.level is Level.UNCHECKED)
        count = sum(f.level is Level.UNCHECKED for f in findings)
        print(
            f"preflight {environment.name}: nothing was checked: {count} check(s) could not run, e.g. {first.check}: "
            f"{first.message}; fix: {first.fix}",
            file=sys.stderr,
        )
        return 2
    return exit_code(findings, strict)

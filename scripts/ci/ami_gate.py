#!/usr/bin/env python3
"""The pipeline's AMI gate: an environment is deployed only with the golden AMI an earlier fabric check ran on.

    scripts/ci/ami_gate.py tested REPORT...
    scripts/ci/ami_gate.py check ENV --tested-in TESTED_ENV [--tested NAME] [--config-dir DIR]

``tested`` (scripts/ci/fabric_check.sh, after every fleet passed) reads the JSON reports of ``gpu-platform job
fabric-test`` and prints the name of the AMI their nodes were booted from: the value the FabricCheck step exports
as ``FABRIC_AMI_NAME``. Without a node to test (every fleet idle) or without a name for the AMI, it prints
``not tested: <why>``, which no AMI can be named (AMI names have no ``:``), so the gate fails closed. Fleets
booted from AMIs of different names exit 2.

``check`` (scripts/ci/ami_gate.sh, a pre-step of ENV's deploy) reads ENV's AMI parameter
(``/imagebuilder/gpu-platform/<env>/ami/latest``), asks EC2 for that AMI's name and compares it with ``--tested``
(default: ``TESTED_AMI_NAME``, the FabricCheck step's exported variable). By name, not id: the building account
copies each AMI into every receiving account, and each copy has an id of its own but the build's name. Exit 0
the AMI is the one tested, 1 it is not (or nothing was tested, or the parameter is missing), 2 the gate could
not run (config, credentials, AWS). Each outcome is one line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a file, the script still finds the config package

from config import ConfigError, load_environment  # noqa: E402
from config.loader import CONFIG_DIR  # noqa: E402
from config.naming import ResourceNames  # noqa: E402
from config.pipeline_schema import ami_gate_role_name  # noqa: E402

#: What ``tested`` prints instead of a name when the fabric check tested no AMI (":" is never in an AMI name).
NOT_TESTED = "not tested: "
#: The FabricCheck step's exported variable, as the AmiGate step receives it.
TESTED_VARIABLE = "TESTED_AMI_NAME"


class GateError(Exception):
    """One line; ``code`` the exit status (1 refused, 2 could not run)."""

    def __init__(self, line: str, code: int = 1) -> None:
        super().__init__(line)
        self.code = code


# --- what the fabric check tested -------------------------------------------------------------------------------


def _read_report(path: Path) -> dict[str, Any] | None:
    """A fabric-test JSON report; None for an empty file (a fleet with fewer than two nodes prints none)."""
    text = path.read_text(encoding="utf-8").strip()
    if not text:
        return None
    try:
        report = json.loads(text)
    except json.JSONDecodeError as err:
        raise GateError(f"{path}: not a fabric-test JSON report ({err.msg}, line {err.lineno})", code=2) from None
    if not isinstance(report, dict):
        raise GateError(f"{path}: not a fabric-test JSON report (a JSON object expected)", code=2)
    return report


def fabric_ami(reports: Sequence[dict[str, Any]]) -> str:
    """The name of the one AMI the reports' nodes were booted from, or ``not tested: <why>``."""
    names: dict[str, str] = {}
    for report in reports:
        fleet, ami = str(report.get("fleet", "?")), report.get("ami") or {}
        if not ami.get("name"):
            return f"{NOT_TESTED}fleet {fleet} ran on {ami.get('id') or 'an AMI'} that EC2 gives no name"
        names[fleet] = str(ami["name"])
    if not names:
        return f"{NOT_TESTED}no training fleet had two nodes to test"
    if len(set(names.values())) > 1:
        runs = "; ".join(f"{fleet}: {name}" for fleet, name in sorted(names.items()))
        raise GateError(
            f"the training fleets ran on different AMIs ({runs}); the check vouches for one image; fix: let the "
            "instance refreshes finish, then rerun the fabric check",
            code=2,
        )
    return next(iter(names.values()))


# --- the gate -----------------------------------------------------------------------------------------------------


def _parameter_value(ssm: Any, parameter: str, env: str) -> str:
    try:
        return str(ssm.get_parameter(Name=parameter)["Parameter"]["Value"])
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") != "ParameterNotFound":
            raise
    raise GateError(
        f"{env}'s AMI parameter {parameter} does not exist, so its AMI cannot be compared; fix: deploy {env} once "
        f"(make deploy ENV={env}: its Image stack creates the parameter), then retry this action"
    )


def _image_name(ec2: Any, image_id: str, parameter: str, env: str) -> str:
    images = ec2.describe_images(Filters=[{"Name": "image-id", "Values": [image_id]}]).get("Images", [])
    if not images or not images[0].get("Name"):
        raise GateError(
            f"{env}'s AMI parameter {parameter} holds {image_id}, which EC2 does not describe; fix: put an existing "
            f"AMI back (aws ssm get-parameter-history --name {parameter}; docs/operations.md: Roll back)"
        )
    return str(images[0]["Name"])


def check(ssm: Any, ec2: Any, *, env: str, parameter: str, tested: str, tested_in: str) -> str:
    """The line that lets ``env`` deploy, or a ``GateError`` that says why not and what to do."""
    if not tested.strip():
        raise GateError(
            f"no AMI name from {tested_in}'s fabric check ({TESTED_VARIABLE} is empty); {env} is not deployed on "
            f"an AMI nothing tested; fix: run the pipeline through {tested_in}: its FabricCheck step exports the AMI"
        )
    if tested.startswith(NOT_TESTED):
        raise GateError(
            f"{tested_in}'s fabric check tested no AMI ({tested.removeprefix(NOT_TESTED)}); {env} is not deployed "
            f"on an AMI nothing tested; fix: scale {tested_in}'s training fleet to at least 2 nodes, then rerun "
            f"the pipeline (Release change)"
        )
    image_id = _parameter_value(ssm, parameter, env)
    name = _image_name(ec2, image_id, parameter, env)
    if name != tested:
        raise GateError(
            f"{env}'s golden AMI {name} ({image_id}) is not the one {tested_in}'s fabric check ran ({tested}); "
            f"fix: rerun the pipeline (Release change) once {tested_in}'s training nodes run {name}, or put {env}'s "
            f"copy of {tested} back in {parameter} (docs/operations.md: Roll back)"
        )
    return f"{env}'s golden AMI {name} ({image_id}) is the one {tested_in}'s fabric check ran"


def run_check(env: str, tested_in: str, tested: str, config_dir: Path, session: Any = None) -> str:
    """``check`` with ``env``'s parameter, in its region, through ``session`` (default: the environment's
    credentials, the profile ami_gate.sh writes)."""
    try:
        environment = load_environment(env, config_dir)
    except ConfigError as err:
        raise GateError("; ".join(err.lines), code=2) from None
    session = session or boto3.session.Session(region_name=environment.region)
    parameter = ResourceNames.of(environment).ami_parameter
    try:
        ssm, ec2 = session.client("ssm"), session.client("ec2")
        return check(ssm, ec2, env=env, parameter=parameter, tested=tested, tested_in=tested_in)
    except (BotoCoreError, ClientError) as err:
        raise GateError(
            f"AWS: {' '.join(str(err).split())}; fix: the gate runs as {ami_gate_role_name(env)} in {env}'s "
            f"account {environment.account} (ssm:GetParameter on {parameter}, ec2:DescribeImages): deploy {env}'s "
            f"Fleets stack with {env} in ami_gate of config/pipeline/pipeline.yaml (make deploy ENV={env})",
            code=2,
        ) from None


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    tested = commands.add_parser("tested", help="the AMI name the fabric-test reports tested")
    tested.add_argument("reports", nargs="*", type=Path, help="fabric-test --json outputs (an empty file: idle)")
    gate = commands.add_parser("check", help="refuse ENV's deploy unless its AMI is the one tested")
    gate.add_argument("env", help="the environment about to be deployed")
    gate.add_argument("--tested-in", required=True, help="the environment whose fabric check ran")
    gate.add_argument("--tested", default=None, help=f"the AMI name it ran on (default: ${TESTED_VARIABLE})")
    gate.add_argument("--config-dir", type=Path, default=CONFIG_DIR, help="folder of the <env>.yaml files")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _arguments(argv)
    try:
        if args.command == "tested":
            reports = [r for r in (_read_report(p) for p in args.reports) if r is not None]
            print(fabric_ami(reports))
        else:
            tested = args.tested if args.tested is not None else os.environ.get(TESTED_VARIABLE, "")
            print(run_check(args.env, args.tested_in, tested, args.config_dir))
    except GateError as err:
        print(f"ami gate: {err}", file=sys.stderr)
        return err.code
    except OSError as err:
        print(f"ami gate: {err.filename}: {err.strerror}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

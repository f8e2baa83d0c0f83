#!/usr/bin/env python3
"""Verify a deployed environment through the AWS API: the pipeline's post-deploy check.

A successful ``cdk deploy`` only says CloudFormation finished; it does not say the
trail is logging, no alarm fired, or the AMI parameter the fleets launch from
exists. A pipeline stage runs this after deploying an environment, so a
promotion stops on a broken environment rather than carrying it forward:

    scripts/check_environment.py dev
    scripts/check_environment.py prod --region us-west-2 --json

The expected state comes from ``config/<env>.yaml`` (``config.load_environment``)
and the names from ``config.naming.ResourceNames`` (the AMI parameter included:
``/imagebuilder/gpu-platform/<env>/ami/latest``); see ``scripts/env_check/`` for the
steps (expectations, AWS reads, judging, report).
Each check prints ``PASS|FAIL <check>: <detail>``; the exit status is 0 when
every check passes and 1 otherwise. A problem that stops the checks from
running at all (a config error, no credentials, the wrong account, access
denied, throttling after retries) prints one line on stderr and exits 2.

The role that runs the check needs read access only: sts:GetCallerIdentity,
cloudformation:DescribeStacks, autoscaling:DescribeAutoScalingGroups,
cloudwatch:DescribeAlarms, ssm:GetParameter, fsx:DescribeFileSystems,
cloudtrail:GetTrailStatus.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import boto3

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a file, the script still finds the config and scripts packages

from config import ConfigError, available_environments, load_environment  # noqa: E402
from config.loader import CONFIG_DIR  # noqa: E402
from scripts.env_check.aws import CheckError, open_session, verify_account  # noqa: E402
from scripts.env_check.expectations import expectations_for  # noqa: E402
from scripts.env_check.judge import run_checks  # noqa: E402
from scripts.env_check.report import print_error, print_report  # noqa: E402


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("env", help="environment name (config/<env>.yaml)")
    parser.add_argument("--region", help="region to check (default: the environment's region)")
    parser.add_argument("--config-dir", type=Path, default=CONFIG_DIR, help="folder of environment files")
    parser.add_argument("--json", action="store_true", help="print a machine-readable report")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None, *, session: boto3.Session | None = None) -> int:
    """Exit status: 0 all checks pass, 1 some check fails, 2 the checks could not run."""
    args = parse_args(argv)
    try:
        env = load_environment(args.env, args.config_dir)
        expected = expectations_for(env, region=args.region, other_environments=available_environments(args.config_dir))
        session = session or open_session(expected.region)
        verify_account(session, expected.account, expected.environment)
        results = run_checks(session, expected)
    except ConfigError as err:
        return print_error(err.lines, args.env, args.json)
    except CheckError as err:
        return print_error([f"error: {err}"], args.env, args.json)
    print_report(expected, results, args.json)
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())

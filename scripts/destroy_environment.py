#!/usr/bin/env python3
"""Tear down one environment: stop what writes to its buckets, empty them, then ``cdk destroy`` its stacks.

The plan comes from the synthesized cloud assembly (``cdk.out/assembly-<env>``, made by ``make synth
ENV=<env>``): every S3 bucket CloudFormation would delete (DeletionPolicy Delete) is emptied, every
version and delete marker, since CloudFormation deletes no bucket that holds objects; the trail stops
logging, the load balancers stop access logging and those buckets stop server access logging first, so that
nothing new lands in them while they are emptied. Then ``cdk destroy --app <assembly> '<env>/*' --force``
removes the stacks, and what stays by design (DeletionPolicy Retain, and what no template owns) is listed
with how to delete it by hand.

Log delivery is eventually consistent: a file written before the writer stopped can still arrive after its
bucket was emptied, and CloudFormation then fails to delete that bucket. Emptying lists a bucket again until a
listing finds it empty, and when ``cdk destroy`` fails while a bucket it should have deleted holds objects
again, the script empties it once more and runs ``cdk destroy`` again, at most ``DESTROY_ATTEMPTS`` times.

An environment that protects its stateful resources (``protect_stateful_resources: true``, as staging
and prod do) is refused unless ``--allow-prod`` is given; then its stacks' termination protection is
turned off first. Without ``--yes`` the plan is printed and the environment's name must be typed.

Exit codes: 0 destroyed, 1 not confirmed or a step failed (run it again: every step can be repeated),
2 usage, config, assembly or credentials error (one line).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a file, the script still finds the config package

import boto3  # noqa: E402
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError  # noqa: E402

from config.errors import ConfigError  # noqa: E402
from config.loader import CONFIG_DIR, display_path, load_environment  # noqa: E402
from config.naming import ResourceNames  # noqa: E402

#: How to remove by hand what CloudFormation leaves behind, by resource type (NAME: its physical id).
BY_HAND = {
    "AWS::S3::Bucket": "empty every version, then: aws s3api delete-bucket --bucket NAME",
    "AWS::KMS::Key": "once nothing encrypted with it is needed: aws kms schedule-key-deletion --key-id NAME",
    "AWS::Logs::LogGroup": "aws logs delete-log-group --log-group-name NAME",
    "AWS::FSx::FileSystem": "aws fsx delete-file-system --file-system-id NAME",
    "AWS::SSM::Parameter": "aws ssm delete-parameter --name NAME",
    "AWS::SNS::Topic": "aws sns delete-topic --topic-arn NAME",
}


#: ``cdk destroy`` runs, each after emptying again the buckets a late log delivery refilled.
DESTROY_ATTEMPTS = 3
#: Listings of one bucket while emptying it: objects that arrive during a pass are deleted by the next.
EMPTY_PASSES = 5
#: Load balancers (their physical id is their ARN) and the attribute that turns their access logs off.
LOAD_BALANCER = "AWS::ElasticLoadBalancingV2::LoadBalancer"
ACCESS_LOGS_OFF = [{"Key": "access_logs.s3.enabled", "Value": "false"}]


class TeardownError(Exception):
    """The teardown cannot start; its text is the one line printed."""


class StepFailed(TeardownError):
    """A step of the teardown failed; running the script again repeats it."""


@dataclass(frozen=True)
class Resource:
    stack: str
    logical_id: str
    type: str
    name: str | None = None  # a name the template fixes (BucketName, TrailName), else the physical id once known


@dataclass
class Plan:
    env: str
    assembly: Path
    stacks: list[str]
    buckets: list[Resource] = field(default_factory=list)  # emptied, then deleted with their stack
    trails: list[Resource] = field(default_factory=list)
    load_balancers: list[Resource] = field(default_factory=list)  # access logging off first
    retained: list[Resource] = field(default_factory=list)


def plan_for(assembly: Path, env: str) -> Plan:
    """What the assembly's templates say: stacks, buckets CloudFormation deletes, trails, retained resources."""
    manifest_path = assembly / f"assembly-{env}" / "manifest.json"
    if not manifest_path.is_file():
        raise TeardownError(f"{manifest_path}: not found; fix: run make synth ENV={env} first")
    artifacts = json.loads(manifest_path.read_text())["artifacts"].values()
    stacks = [a for a in artifacts if a["type"] == "aws:cloudformation:stack"]
    plan = Plan(env=env, assembly=assembly, stacks=sorted(a["properties"]["stackName"] for a in stacks))
    for artifact in stacks:
        stack = artifact["properties"]["stackName"]
        template = json.loads((manifest_path.parent / artifact["properties"]["templateFile"]).read_text())
        for logical_id, resource in sorted(template.get("Resources", {}).items()):
            kind, props = resource["Type"], resource.get("Properties", {})
            fixed = props.get("BucketName") or props.get("TrailName")
            found = Resource(stack, logical_id, kind, fixed if isinstance(fixed, str) else None)
            if resource.get("DeletionPolicy", "Delete") != "Delete":
                plan.retained.append(found)
            elif kind == "AWS::S3::Bucket":
                plan.buckets.append(found)
            elif kind == "AWS::CloudTrail::Trail":
                plan.trails.append(found)
            elif kind == LOAD_BALANCER:
                plan.load_balancers.append(found)
    return plan


def physical_ids(cloudformation: Any, stacks: Sequence[str]) -> dict[tuple[str, str], str]:
    """(stack, logical id) -> physical id, for the stacks that are deployed."""
    ids: dict[tuple[str, str], str] = {}
    for stack in stacks:
        try:
            pages = cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack)
            for page in pages:
                for r in page["StackResourceSummaries"]:
                    if r.get("PhysicalResourceId"):
                        ids[(stack, r["LogicalResourceId"])] = r["PhysicalResourceId"]
        except ClientError as err:
            if "does not exist" not in str(err):
                raise
    return ids


def resolved(resource: Resource, ids: dict[tuple[str, str], str]) -> str | None:
    return resource.name or ids.get((resource.stack, resource.logical_id))


def empty_bucket(s3: Any, bucket: str) -> int:
    """Delete every object version and delete marker of ``bucket``, listing it again until a listing finds
    nothing (at most ``EMPTY_PASSES`` listings); returns how many were deleted."""
    deleted = 0
    for _ in range(EMPTY_PASSES):
        found = _delete_listed(s3, bucket)
        if not found:
            return deleted
        deleted += found
    raise StepFailed(
        f"s3://{bucket}: objects kept arriving over {EMPTY_PASSES} listings; fix: find what still writes to it "
        "(a trail, a load balancer, server access logging of another bucket), stop it, then run this again"
    )


def _delete_listed(s3: Any, bucket: str) -> int:
    """One pass: delete what one listing of ``bucket`` shows; returns how many versions and markers."""
    deleted = 0
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        keys = [
            {"Key": v["Key"], "VersionId": v["VersionId"]}
            for v in page.get("Versions", []) + page.get("DeleteMarkers", [])
        ]
        for start in range(0, len(keys), 1000):  # DeleteObjects takes up to 1000 keys
            answer = s3.delete_objects(Bucket=bucket, Delete={"Objects": keys[start : start + 1000], "Quiet": True})
            if answer.get("Errors"):
                first = answer["Errors"][0]
                raise StepFailed(
                    f"s3://{bucket}: {first['Key']} not deleted ({first['Code']}: {first['Message']}); "
                    "fix: remove what protects it (object lock, a bucket policy), then run this again"
                )
            deleted += len(keys[start : start + 1000])
    return deleted


def refilled(s3: Any, buckets: Sequence[str]) -> list[str]:
    """The buckets of ``buckets`` that still exist and hold an object version or delete marker."""
    found = []
    for bucket in buckets:
        try:
            listing = s3.list_object_versions(Bucket=bucket, MaxKeys=1)
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") == "NoSuchBucket":
                continue
            raise
        if listing.get("Versions") or listing.get("DeleteMarkers"):
            found.append(bucket)
    return found


def stop_access_logs(elbv2: Any, arn: str) -> bool:
    """Turn off the load balancer's access logs; False if the load balancer is already gone."""
    try:
        elbv2.modify_load_balancer_attributes(LoadBalancerArn=arn, Attributes=ACCESS_LOGS_OFF)
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") == "LoadBalancerNotFound":
            return False
        raise
    return True


def prepare(plan: Plan, session: Any, *, unprotect: bool, say: Any = print) -> list[str]:
    """Everything before ``cdk destroy``: termination protection off (``unprotect``), trails stopped, load
    balancer and server access logging off, the buckets emptied. Returns the buckets it emptied."""
    cloudformation = session.client("cloudformation")
    ids = physical_ids(cloudformation, plan.stacks)
    deployed = sorted({stack for stack, _ in ids})
    if unprotect:
        for stack in deployed:
            cloudformation.update_termination_protection(EnableTerminationProtection=False, StackName=stack)
            say(f"termination protection off: {stack}")
    cloudtrail, s3 = session.client("cloudtrail"), session.client("s3")
    for trail in plan.trails:
        name = resolved(trail, ids)
        if name and trail.stack in deployed:
            cloudtrail.stop_logging(Name=name)
            say(f"trail stopped: {name}")
    # A load balancer writes its access logs every 5 minutes until told to stop (and, its guide says, must stop
    # before its bucket is deleted, or a bucket of the same name in another account could receive them).
    elbv2 = session.client("elbv2")
    for load_balancer in plan.load_balancers:
        arn = resolved(load_balancer, ids)
        if arn and load_balancer.stack in deployed and stop_access_logs(elbv2, arn):
            say(f"access logging off: {arn.rsplit(':', 1)[-1]}")
    buckets = [name for b in plan.buckets if b.stack in deployed and (name := resolved(b, ids))]
    for bucket in buckets:
        s3.put_bucket_logging(Bucket=bucket, BucketLoggingStatus={})
    for bucket in buckets:
        say(f"emptied: s3://{bucket} ({empty_bucket(s3, bucket)} versions and delete markers)")
    return buckets


def cdk_destroy(command: Sequence[str]) -> int:
    """Run the CDK CLI; its exit code."""
    return subprocess.run(list(command), cwd=ROOT, check=False).returncode


def destroy(command: Sequence[str], session: Any, buckets: Sequence[str], say: Any = print) -> int:
    """``cdk destroy``, again after emptying once more any of ``buckets`` that a late delivery refilled (the
    stack that owns it then failed to delete it), at most ``DESTROY_ATTEMPTS`` runs; the last exit code."""
    s3 = session.client("s3")
    code = 0
    for attempt in range(1, DESTROY_ATTEMPTS + 1):
        say("running: " + " ".join(command))
        code = cdk_destroy(command)
        if code == 0:
            return 0
        late = refilled(s3, buckets)
        if not late or attempt == DESTROY_ATTEMPTS:
            break
        for bucket in late:
            say(f"late delivery: s3://{bucket} held objects again; emptied ({empty_bucket(s3, bucket)} more)")
    return code


def leftovers(plan: Plan, names: ResourceNames, ids: dict[tuple[str, str], str]) -> list[str]:
    """What stays after the destroy, one line each with how to delete it (docs/operations.md: Tearing down an environment)."""
    lines, seen = [], set()
    for r in plan.retained:
        name = resolved(r, ids) or f"<physical id of {r.logical_id}>"
        how = BY_HAND.get(r.type, "delete it with its service's console or CLI (no stack owns it any more)")
        lines.append(f"{r.stack} {r.type} {name}: {how.replace('NAME', name)}")
        seen.add(name)
    if names.ami_parameter not in seen:
        lines.append(
            f"{names.ami_parameter} (written by Image Builder, no template owns it): "
            f"aws ssm delete-parameter --name {names.ami_parameter}"
        )
    lines += [
        "the golden AMIs and their snapshots: aws ec2 deregister-image, then aws ec2 delete-snapshot, per AMI",
        f"log groups Lambda made for the providers (/aws/lambda/{plan.env}-*): aws logs delete-log-group",
    ]
    return lines


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        epilog="example: make synth ENV=dev && scripts/destroy_environment.py dev",
    )
    parser.add_argument("env", help="environment name (config/<env>.yaml)")
    parser.add_argument("--yes", action="store_true", help="do not ask for the environment's name")
    parser.add_argument("--allow-prod", action="store_true", help="destroy an environment that protects its data")
    parser.add_argument("--assembly", type=Path, default=ROOT / "cdk.out", help="cloud assembly (default: cdk.out)")
    parser.add_argument("--cdk", default=str(ROOT / "node_modules" / ".bin" / "cdk"), help="the CDK CLI to run")
    parser.add_argument("--config-dir", type=Path, default=CONFIG_DIR, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None, session: Any = None) -> int:
    args = parse_args(argv)
    try:
        env = load_environment(args.env, args.config_dir)
        shown = display_path(args.config_dir / f"{env.name}.yaml")
        if env.protect_stateful_resources and not args.allow_prod:
            raise TeardownError(
                f"{shown}: protect_stateful_resources: {env.name} protects its data (termination protection, "
                "retained buckets, file system and keys); fix: pass --allow-prod to destroy it all the same"
            )
        plan = plan_for(args.assembly, env.name)
    except (ConfigError, TeardownError) as err:
        print(err, file=sys.stderr)
        return 2
    names = ResourceNames.of(env)
    print(f"{env.name} ({env.account}, {env.region}): destroy {', '.join(plan.stacks)}")
    print("empty first: " + (", ".join(b.name or f"{b.stack}/{b.logical_id}" for b in plan.buckets) or "nothing"))
    if not args.yes:
        if not sys.stdin.isatty():
            print(f"{env.name}: not confirmed; fix: run it in a terminal, or pass --yes", file=sys.stderr)
            return 2
        if input(f"type {env.name} to destroy it: ").strip() != env.name:
            print("not confirmed: nothing done")
            return 1
    try:
        session = session or boto3.session.Session(region_name=env.region)
        account = session.client("sts").get_caller_identity()["Account"]
        if account != env.account:
            raise TeardownError(
                f"{shown}: account: the credentials are for {account}, not {env.account}; fix: use credentials "
                f"of account {env.account}"
            )
        ids = physical_ids(session.client("cloudformation"), plan.stacks)
        emptied = prepare(plan, session, unprotect=args.allow_prod)
        command = [args.cdk, "--no-notices", "destroy", "--app", str(args.assembly), f"{env.name}/*", "--force"]
        code = destroy(command, session, emptied)
    except (NoCredentialsError, PartialCredentialsError):
        print(
            "no AWS credentials: set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY "
            "(the shipped configs use placeholder account ids: set yours in config/<env>.yaml)",
            file=sys.stderr,
        )
        return 2
    except TeardownError as err:
        print(err, file=sys.stderr)
        return 1 if isinstance(err, StepFailed) else 2
    except (BotoCoreError, ClientError) as err:
        print(f"AWS: {' '.join(str(err).split())}; fix: correct what AWS reports, then run this again", file=sys.stderr)
        return 1
    except OSError as err:
        print(f"{args.cdk}: {err.strerror}; fix: run make setup (installs the pinned CDK CLI)", file=sys.stderr)
        return 2
    if code != 0:
        print(f"cdk destroy failed (exit {code}); fix: see its output, then run this again", file=sys.stderr)
        return 1
    print("left behind by design, and how to delete it:")
    for line in leftovers(plan, names, ids):
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

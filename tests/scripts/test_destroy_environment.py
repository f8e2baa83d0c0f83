"""scripts/destroy_environment.py: the refusal, the plan from the assembly, the teardown against moto and a
fake CDK CLI (a script that records its arguments, or in process a stand-in for CloudFormation that deletes no
bucket holding objects); what writes to the buckets stops before they are emptied, and a log delivered after
the emptying is emptied again before the destroy is run again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

import scripts.destroy_environment as destroy_script
from config.naming import ResourceNames
from scripts.destroy_environment import DESTROY_ATTEMPTS, EMPTY_PASSES, StepFailed, empty_bucket, main, plan_for
from tests.synth import TEST_CONFIG_DIR, Synth

ROOT = Path(__file__).resolve().parents[2]
ACCOUNT, REGION = "111111111111", "us-east-1"  # tests/fixtures/config/dev.yaml
DATA = f"gpu-platform-dev-data-{ACCOUNT}-{REGION}"
TRAIL = "gpu-platform-dev-trail"

SECURITY = {
    "Resources": {
        "AccessLogs": {"Type": "AWS::S3::Bucket", "DeletionPolicy": "Delete", "Properties": {}},
        "Trail": {"Type": "AWS::CloudTrail::Trail", "Properties": {"TrailName": TRAIL, "IsLogging": True}},
    }
}
STORAGE = {
    "Resources": {
        "Data": {"Type": "AWS::S3::Bucket", "DeletionPolicy": "Delete", "Properties": {"BucketName": DATA}},
        "Kept": {"Type": "AWS::S3::Bucket", "DeletionPolicy": "Retain", "Properties": {"BucketName": "kept-bucket"}},
    }
}
#: A served fleet's load balancer (its physical id is its ARN); it writes its access logs to the access-log bucket.
FLEETS = {
    "Resources": {
        "ServiceLoadBalancer": {
            "Type": "AWS::ElasticLoadBalancingV2::LoadBalancer",
            "Properties": {"Scheme": "internal", "Subnets": ["SUBNET-A", "SUBNET-B"]},
        }
    }
}
STACKS = {"dev-Security": SECURITY, "dev-Storage": STORAGE, "dev-Fleets": FLEETS}


def fake_cdk(tmp_path: Path, code: int = 0) -> tuple[Path, Path]:
    record = tmp_path / "cdk-args.json"
    cdk = tmp_path / "cdk"
    cdk.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(record)!r}, 'w').write(json.dumps(sys.argv[1:]))\nsys.exit({code})\n"
    )
    cdk.chmod(0o755)
    return cdk, record


def assembly(tmp_path: Path) -> Path:
    """A cloud assembly of three of dev's stacks, as `cdk synth` lays it out."""
    folder = tmp_path / "cdk.out" / "assembly-dev"
    folder.mkdir(parents=True)
    artifacts = {}
    for stack, template in STACKS.items():
        (folder / f"{stack}.template.json").write_text(json.dumps(template))
        artifacts[stack] = {
            "type": "aws:cloudformation:stack",
            "properties": {"stackName": stack, "templateFile": f"{stack}.template.json"},
        }
    (folder / "manifest.json").write_text(json.dumps({"artifacts": artifacts}))
    return folder.parent


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch):
    for key, value in {"AWS_ACCESS_KEY_ID": "t", "AWS_SECRET_ACCESS_KEY": "t", "MOTO_ACCOUNT_ID": ACCOUNT}.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        yield boto3.session.Session(region_name=REGION)


def deploy(session: boto3.session.Session) -> str:
    """The three stacks in moto's CloudFormation (moto makes no trail: CloudTrail makes it here, as the stack
    would; nor does it set load balancer attributes: they are set here), a logging trail, a load balancer
    writing its access logs, versioned objects with a delete marker; returns the access-log bucket's name."""
    cloudformation = session.client("cloudformation")
    security = {"Resources": {"AccessLogs": SECURITY["Resources"]["AccessLogs"]}}
    cloudformation.create_stack(StackName="dev-Security", TemplateBody=json.dumps(security))
    cloudformation.create_stack(StackName="dev-Storage", TemplateBody=json.dumps(STORAGE))
    logs = cloudformation.describe_stack_resource(StackName="dev-Security", LogicalResourceId="AccessLogs")[
        "StackResourceDetail"
    ]["PhysicalResourceId"]
    ec2 = session.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=f"{REGION}{zone}")["Subnet"][
            "SubnetId"
        ]
        for i, zone in ((1, "a"), (2, "b"))
    ]
    fleets = json.loads(
        json.dumps(FLEETS).replace('"SUBNET-A"', json.dumps(subnets[0])).replace('"SUBNET-B"', json.dumps(subnets[1]))
    )
    cloudformation.create_stack(StackName="dev-Fleets", TemplateBody=json.dumps(fleets))
    session.client("elbv2").modify_load_balancer_attributes(
        LoadBalancerArn=load_balancer_arn(session),
        Attributes=[
            {"Key": "access_logs.s3.enabled", "Value": "true"},
            {"Key": "access_logs.s3.bucket", "Value": logs},
            {"Key": "access_logs.s3.prefix", "Value": "service-inference"},
        ],
    )
    cloudtrail = session.client("cloudtrail")
    cloudtrail.create_trail(Name=TRAIL, S3BucketName=logs)
    cloudtrail.start_logging(Name=TRAIL)
    s3 = session.client("s3")
    s3.put_bucket_versioning(Bucket=DATA, VersioningConfiguration={"Status": "Enabled"})
    s3.put_bucket_policy(  # what lets S3 server access logging deliver to a bucket
        Bucket=logs,
        Policy=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": {"Service": "logging.s3.amazonaws.com"},
                        "Action": "s3:PutObject",
                        "Resource": f"arn:aws:s3:::{logs}/*",
                    }
                ],
            }
        ),
    )
    s3.put_bucket_logging(
        Bucket=DATA, BucketLoggingStatus={"LoggingEnabled": {"TargetBucket": logs, "TargetPrefix": "data-bucket/"}}
    )
    for body in (b"v1", b"v2"):
        s3.put_object(Bucket=DATA, Key="checkpoints/step-1.pt", Body=body)
    s3.delete_object(Bucket=DATA, Key="checkpoints/step-1.pt")  # a delete marker on top of two versions
    s3.put_object(Bucket=logs, Key="data-bucket/2026-01-01", Body=b"log")
    s3.put_object(Bucket="kept-bucket", Key="keep-me", Body=b"x")
    return logs


def load_balancer_arn(session: boto3.session.Session) -> str:
    return session.client("cloudformation").describe_stack_resource(
        StackName="dev-Fleets", LogicalResourceId="ServiceLoadBalancer"
    )["StackResourceDetail"]["PhysicalResourceId"]


def access_logging(session: boto3.session.Session) -> str | None:
    attributes = session.client("elbv2").describe_load_balancer_attributes(LoadBalancerArn=load_balancer_arn(session))
    return {a["Key"]: a["Value"] for a in attributes["Attributes"]}.get("access_logs.s3.enabled")


def log_delivery(session: boto3.session.Session, logs: str) -> None:
    """An access log file the load balancer wrote before it stopped, arriving now (delivery is eventually
    consistent: Access logs for your Application Load Balancer)."""
    session.client("s3").put_object(
        Bucket=logs, Key="service-inference/AWSLogs/111111111111/elasticloadbalancing/late.log.gz", Body=b"log"
    )


def bucket_exists(session: boto3.session.Session, bucket: str) -> bool:
    return bucket in {b["Name"] for b in session.client("s3").list_buckets()["Buckets"]}


class CloudFormation:
    """Stands in for `cdk destroy` in process: deletes the assembly's Delete-policy buckets as CloudFormation
    would, none that holds objects (its exit code is then 1), after ``before`` ran (a late log delivery)."""

    def __init__(self, session: boto3.session.Session, buckets: list[str], before: Any = None) -> None:
        self.session, self.buckets, self.before, self.runs = session, buckets, before, 0

    def __call__(self, command: Any) -> int:
        self.runs += 1
        if self.before is not None:
            self.before(self.runs)
        s3 = self.session.client("s3")
        code = 0
        for bucket in self.buckets:
            if not bucket_exists(self.session, bucket):
                continue
            listing = s3.list_object_versions(Bucket=bucket)
            if listing.get("Versions") or listing.get("DeleteMarkers"):
                code = 1  # DELETE_FAILED: The bucket you tried to delete is not empty
            else:
                s3.delete_bucket(Bucket=bucket)
        return code


def call_order(session: boto3.session.Session) -> list[str]:
    """The API operations the session's clients make, in order (botocore's before-call event)."""
    calls: list[str] = []
    session.events.register("before-call.*.*", lambda model, **_: calls.append(model.name))
    return calls


def test_teardown_stops_writers_empties_buckets_then_runs_cdk_destroy(aws, tmp_path, capsys):
    logs = deploy(aws)
    cdk, record = fake_cdk(tmp_path)
    out_dir = assembly(tmp_path)
    calls = call_order(aws)

    code = main(
        ["dev", "--yes", "--assembly", str(out_dir), "--cdk", str(cdk), "--config-dir", str(TEST_CONFIG_DIR)],
        session=aws,
    )

    out = capsys.readouterr().out
    assert code == 0
    assert aws.client("cloudtrail").get_trail_status(Name=TRAIL)["IsLogging"] is False
    assert access_logging(aws) == "false"
    # Every writer stops before the first delete: the trail, the load balancer, server access logging.
    first_delete = calls.index("DeleteObjects")
    for stop in ("StopLogging", "ModifyLoadBalancerAttributes", "PutBucketLogging"):
        assert calls.index(stop) < first_delete, (stop, calls)
    assert f"access logging off: {load_balancer_arn(aws).rsplit(':', 1)[-1]}" in out
    s3 = aws.client("s3")
    assert "LoggingEnabled" not in s3.get_bucket_logging(Bucket=DATA)
    for bucket in (DATA, logs):
        versions = s3.list_object_versions(Bucket=bucket)
        assert versions.get("Versions", []) == [] and versions.get("DeleteMarkers", []) == []
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="kept-bucket")["Contents"]] == ["keep-me"]
    assert json.loads(record.read_text()) == ["--no-notices", "destroy", "--app", str(out_dir), "dev/*", "--force"]
    assert f"emptied: s3://{DATA} (3 versions and delete markers)" in out
    assert "dev-Storage AWS::S3::Bucket kept-bucket: empty every version, then: aws s3api delete-bucket" in out
    assert "aws ssm delete-parameter --name /imagebuilder/gpu-platform/dev/ami/latest" in out


def test_failed_cdk_destroy_exits_1(aws, tmp_path, capsys):
    deploy(aws)
    cdk, _ = fake_cdk(tmp_path, code=3)
    args = ["dev", "--yes", "--assembly", str(assembly(tmp_path)), "--cdk", str(cdk)]
    assert main([*args, "--config-dir", str(TEST_CONFIG_DIR)]) == 1
    assert "cdk destroy failed (exit 3)" in capsys.readouterr().err


def test_protected_environment_refused_without_allow_prod(tmp_path, capsys):
    cdk, record = fake_cdk(tmp_path)
    args = ["prod", "--yes", "--assembly", str(tmp_path), "--cdk", str(cdk), "--config-dir", str(TEST_CONFIG_DIR)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "protect_stateful_resources" in err and "fix: pass --allow-prod" in err
    assert not record.exists()


def test_credentials_of_another_account_touch_nothing(aws, tmp_path, capsys, monkeypatch):
    deploy(aws)
    monkeypatch.setenv("MOTO_ACCOUNT_ID", "222222222222")
    cdk, record = fake_cdk(tmp_path)
    args = ["dev", "--yes", "--assembly", str(assembly(tmp_path)), "--cdk", str(cdk)]
    assert main([*args, "--config-dir", str(TEST_CONFIG_DIR)]) == 2
    assert "the credentials are for 222222222222, not 111111111111" in capsys.readouterr().err
    assert not record.exists()


def test_missing_assembly_is_one_line(tmp_path, capsys):
    assert main(["dev", "--yes", "--assembly", str(tmp_path), "--config-dir", str(TEST_CONFIG_DIR)]) == 2
    assert (
        capsys.readouterr().err
        == f"{tmp_path}/assembly-dev/manifest.json: not found; fix: run make synth ENV=dev first\n"
    )


def test_plan_of_the_synthesized_environments(synth: Synth) -> None:
    dev = plan_for(synth.outdir, "dev")
    names = ResourceNames.of(synth.environments["dev"])
    assert dev.stacks == sorted(f"dev-{s}" for s in ("Fleets", "Image", "Monitoring", "Network", "Security", "Storage"))
    emptied = {(b.stack, b.name) for b in dev.buckets}
    assert ("dev-Storage", names.data_bucket) in emptied
    assert ("dev-Image", f"gpu-platform-dev-image-logs-{names.account}-{names.region}") in emptied
    assert {b.stack for b in dev.buckets} == {"dev-Security", "dev-Storage", "dev-Image"}  # trail and access logs too
    assert [t.name for t in dev.trails] == [names.trail_name]
    assert "AWS::KMS::Key" in {r.type for r in dev.retained}  # the AMI key outlives the stack

    prod = plan_for(synth.outdir, "prod")
    prod_data = ResourceNames.of(synth.environments["prod"]).data_bucket
    assert prod_data in {r.name for r in prod.retained}
    assert prod_data not in {b.name for b in prod.buckets}
    assert "AWS::FSx::FileSystem" in {r.type for r in prod.retained}


def test_help_prints_usage_and_does_nothing(tmp_path):
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "destroy_environment.py"), "--help"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert run.returncode == 0 and run.stdout.startswith("usage: destroy_environment.py")
    assert "--allow-prod" in run.stdout and list(tmp_path.iterdir()) == []


def test_a_log_delivered_after_the_emptying_is_emptied_again_before_the_destroy_runs_again(
    aws, tmp_path, capsys, monkeypatch
):
    logs = deploy(aws)
    # The first destroy meets a log file the load balancer delivered after the emptying: CloudFormation cannot
    # delete the access-log bucket; the script empties it again and runs the destroy once more.
    cloudformation = CloudFormation(aws, [DATA, logs], before=lambda run: run == 1 and log_delivery(aws, logs))
    monkeypatch.setattr(destroy_script, "cdk_destroy", cloudformation)
    args = ["dev", "--yes", "--assembly", str(assembly(tmp_path)), "--config-dir", str(TEST_CONFIG_DIR)]

    assert main(args, session=aws) == 0

    out = capsys.readouterr().out
    assert cloudformation.runs == 2
    assert f"late delivery: s3://{logs} held objects again; emptied (1 more)" in out
    assert out.count("running: ") == 2
    assert not bucket_exists(aws, logs) and not bucket_exists(aws, DATA)
    assert bucket_exists(aws, "kept-bucket")


def test_deliveries_that_never_stop_end_after_a_bounded_number_of_destroys(aws, tmp_path, capsys, monkeypatch):
    logs = deploy(aws)
    cloudformation = CloudFormation(aws, [DATA, logs], before=lambda run: log_delivery(aws, logs))
    monkeypatch.setattr(destroy_script, "cdk_destroy", cloudformation)
    args = ["dev", "--yes", "--assembly", str(assembly(tmp_path)), "--config-dir", str(TEST_CONFIG_DIR)]

    assert main(args, session=aws) == 1

    captured = capsys.readouterr()
    assert cloudformation.runs == DESTROY_ATTEMPTS
    assert captured.out.count("late delivery: ") == DESTROY_ATTEMPTS - 1
    assert "cdk destroy failed (exit 1); fix: see its output, then run this again" in captured.err


def test_a_destroy_that_fails_for_another_reason_is_not_run_again(aws, tmp_path, capsys, monkeypatch):
    logs = deploy(aws)
    runs: list[Any] = []
    monkeypatch.setattr(destroy_script, "cdk_destroy", lambda command: runs.append(command) or 3)
    args = ["dev", "--yes", "--assembly", str(assembly(tmp_path)), "--config-dir", str(TEST_CONFIG_DIR)]

    assert main(args, session=aws) == 1

    assert len(runs) == 1 and bucket_exists(aws, logs)  # nothing refilled: its output says what failed
    assert "cdk destroy failed (exit 3)" in capsys.readouterr().err


def test_a_load_balancer_already_deleted_is_passed_over(aws, tmp_path, capsys):
    deploy(aws)
    aws.client("elbv2").delete_load_balancer(LoadBalancerArn=load_balancer_arn(aws))  # a destroy that stopped halfway
    cdk, _ = fake_cdk(tmp_path)
    args = ["dev", "--yes", "--assembly", str(assembly(tmp_path)), "--cdk", str(cdk)]

    assert main([*args, "--config-dir", str(TEST_CONFIG_DIR)], session=aws) == 0
    assert "access logging off" not in capsys.readouterr().out


class Arriving:
    """An S3 client through which ``count`` objects arrive in ``bucket``, one after each DeleteObjects call."""

    def __init__(self, s3: Any, bucket: str, count: int) -> None:
        self.s3, self.bucket, self.left = s3, bucket, count

    def __getattr__(self, name: str) -> Any:
        return getattr(self.s3, name)

    def delete_objects(self, **kwargs: Any) -> Any:
        answer = self.s3.delete_objects(**kwargs)
        if self.left:
            self.left -= 1
            self.s3.put_object(Bucket=self.bucket, Key=f"arrived-{self.left}", Body=b"log")
        return answer


def test_emptying_lists_again_until_nothing_is_left(aws):
    logs = deploy(aws)
    s3 = aws.client("s3")

    there = len(s3.list_object_versions(Bucket=logs).get("Versions", []))
    assert empty_bucket(Arriving(s3, logs, count=2), logs) == there + 2  # and the two that arrived meanwhile
    assert s3.list_object_versions(Bucket=logs).get("Versions", []) == []

    s3.put_object(Bucket=logs, Key="again", Body=b"log")
    with pytest.raises(StepFailed, match=f"objects kept arriving over {EMPTY_PASSES} listings"):
        empty_bucket(Arriving(s3, logs, count=EMPTY_PASSES), logs)


def test_the_plan_turns_off_every_load_balancer_of_the_synthesized_environment(synth: Synth) -> None:
    dev = plan_for(synth.outdir, "dev")
    served = [f for f in synth.environments["dev"].fleets if f.service is not None]
    assert served and len(dev.load_balancers) == len(served)
    assert {b.stack for b in dev.load_balancers} == {"dev-Fleets"}

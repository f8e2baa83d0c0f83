"""scripts/destroy_environment.py: the refusal, the plan from the assembly, the teardown against moto and a
fake CDK CLI (a script that records its arguments)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from config.naming import ResourceNames
from scripts.destroy_environment import main, plan_for
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
    """A cloud assembly of two of dev's stacks, as `cdk synth` lays it out."""
    folder = tmp_path / "cdk.out" / "assembly-dev"
    folder.mkdir(parents=True)
    artifacts = {}
    for stack, template in (("dev-Security", SECURITY), ("dev-Storage", STORAGE)):
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
    """The two stacks in moto's CloudFormation (moto makes no trail: CloudTrail makes it here, as the stack
    would), a logging trail, versioned objects with a delete marker; returns the access-log bucket's name."""
    cloudformation = session.client("cloudformation")
    security = {"Resources": {"AccessLogs": SECURITY["Resources"]["AccessLogs"]}}
    cloudformation.create_stack(StackName="dev-Security", TemplateBody=json.dumps(security))
    cloudformation.create_stack(StackName="dev-Storage", TemplateBody=json.dumps(STORAGE))
    logs = cloudformation.describe_stack_resource(StackName="dev-Security", LogicalResourceId="AccessLogs")[
        "StackResourceDetail"
    ]["PhysicalResourceId"]
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


def test_teardown_stops_writers_empties_buckets_then_runs_cdk_destroy(aws, tmp_path, capsys):
    logs = deploy(aws)
    cdk, record = fake_cdk(tmp_path)
    out_dir = assembly(tmp_path)

    code = main(["dev", "--yes", "--assembly", str(out_dir), "--cdk", str(cdk), "--config-dir", str(TEST_CONFIG_DIR)])

    out = capsys.readouterr().out
    assert code == 0
    assert aws.client("cloudtrail").get_trail_status(Name=TRAIL)["IsLogging"] is False
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

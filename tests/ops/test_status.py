"""``gpu-platform status`` against moto: a deployed fleet's group, instances, GPU metric, alarms and notices.

The account moto answers for is the test config's (MOTO_ACCOUNT_ID). Two states moto cannot reach through
its API are set on its EC2 backend, as EC2 would set them: a Spot request marked for termination (the
interruption notice) and an instance launched into a Capacity Block (``InstanceLifecycle``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto.ec2.models import ec2_backends

from ops.status_command import NO_CREDENTIALS, status_command
from tests.ops.helpers import moto_session
from tests.synth import SLURM_DIR, TEST_CONFIG_DIR

ACCOUNT = "111111111111"  # tests/fixtures/config/dev.yaml
REGION = "us-east-1"
GROUP = "gpu-platform-dev-inference"
TRAINING_GROUP = "gpu-platform-dev-training"
AMI_PARAMETER = "/imagebuilder/gpu-platform/dev/ami/latest"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch):
    with moto_session(monkeypatch, account=ACCOUNT, region=REGION) as session:
        yield session


def inference(status: dict) -> dict:
    (fleet,) = [f for f in status["fleets"] if f["name"] == "inference"]
    return fleet


def run(capsys: pytest.CaptureFixture[str], session=None, env: str = "dev") -> tuple[int, dict, str]:
    code = status_command(env, json_out=True, config_dir=TEST_CONFIG_DIR, session=session)
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out else {}), err


def deploy_fleet(session: boto3.session.Session) -> dict[str, str]:
    """The inference fleet's group with two On-Demand nodes on an old AMI, a Spot node, the AMI parameter
    holding a newer AMI, and the training fleet's group at 0 nodes; returns the ids."""
    ec2 = session.client("ec2")
    old_ami, new_ami = (ec2.register_image(Name=name, RootDeviceName="/dev/xvda")["ImageId"] for name in ("old", "new"))
    vpc = ec2.create_vpc(CidrBlock="10.10.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.10.0.0/20", AvailabilityZone="us-east-1a")["Subnet"]
    template = ec2.create_launch_template(
        LaunchTemplateName="inference", LaunchTemplateData={"ImageId": old_ami, "InstanceType": "g4dn.xlarge"}
    )["LaunchTemplate"]["LaunchTemplateId"]
    autoscaling = session.client("autoscaling")
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=GROUP,
        LaunchTemplate={"LaunchTemplateId": template, "Version": "$Latest"},
        MinSize=1,
        MaxSize=4,
        DesiredCapacity=2,
        VPCZoneIdentifier=subnet["SubnetId"],
    )
    on_demand = sorted(
        i["InstanceId"] for i in autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"][0]["Instances"]
    )
    spot = ec2.request_spot_instances(
        LaunchSpecification={
            "ImageId": new_ami,
            "InstanceType": "g4dn.2xlarge",
            "SubnetId": subnet["SubnetId"],
        }
    )["SpotInstanceRequests"][0]
    autoscaling.attach_instances(InstanceIds=[spot["InstanceId"]], AutoScalingGroupName=GROUP)
    session.client("ssm").put_parameter(Name=AMI_PARAMETER, Value=new_ami, Type="String")
    # dev's training fleet, idle at 0 nodes until a job needs it.
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=TRAINING_GROUP,
        LaunchTemplate={"LaunchTemplateId": template, "Version": "$Latest"},
        MinSize=0,
        MaxSize=2,
        DesiredCapacity=0,
        VPCZoneIdentifier=subnet["SubnetId"],
    )
    return {"old_ami": old_ami, "new_ami": new_ami, "a": on_demand[0], "b": on_demand[1], "spot": spot["InstanceId"]}


def test_healthy_fleet_reports_counts_markets_ami_and_gpu_use(aws, capsys):
    ids = deploy_fleet(aws)
    now = datetime.now(UTC)
    aws.client("cloudwatch").put_metric_data(
        Namespace="GpuPlatform/dev",
        MetricData=[
            {
                "MetricName": "nvidia_smi_utilization_gpu",
                "Dimensions": [{"Name": "AutoScalingGroupName", "Value": GROUP}],
                "Timestamp": now - timedelta(minutes=minutes),
                "Value": value,
            }
            for minutes, value in ((3, 40.0), (8, 80.0), (40, 100.0))  # the last one is outside the window
        ],
    )

    code, status, err = run(capsys, aws)

    assert (code, err) == (0, "")
    assert [f["name"] for f in status["fleets"]] == ["training", "inference"]  # the config's order
    training = status["fleets"][0]
    assert (training["deployed"], training["desired"], training["in_service"], training["instances"]) == (
        True,
        0,
        0,
        [],
    )
    fleet = inference(status)
    assert (fleet["name"], fleet["group_name"], fleet["deployed"]) == ("inference", GROUP, True)
    assert (fleet["minimum"], fleet["desired"], fleet["maximum"]) == (1, 3, 4)  # attaching raised desired
    assert (fleet["in_service"], fleet["pending"]) == (3, 0)
    assert (fleet["gpu_utilization_avg"], fleet["gpu_utilization_max"]) == (60.0, 80.0)
    instances = {i["instance_id"]: i for i in fleet["instances"]}
    assert instances[ids["spot"]]["market"] == "Spot"
    assert instances[ids["spot"]]["instance_type"] == "g4dn.2xlarge"
    assert instances[ids["spot"]]["ami_is_latest"] is True
    assert instances[ids["a"]]["market"] == "On-Demand"
    assert instances[ids["a"]]["ami_is_latest"] is False
    assert all(i["zone"] == "us-east-1a" and i["health"] == "Healthy" for i in instances.values())
    assert all(0 <= i["uptime_s"] < 600 for i in instances.values())
    assert status["latest_ami"] == ids["new_ami"]
    assert status["golden_ami"] is True  # registered in the environment's own account
    assert status["dashboard_url"] == (
        "https://us-east-1.console.aws.amazon.com/cloudwatch/home?region=us-east-1#dashboards/dashboard/gpu-platform-dev"
    )
    # The two nodes on the old AMI are INFO: the rollout replaces them; nothing fails the command.
    assert sorted((f["check"], f["level"]) for f in status["findings"]) == [("ami", "INFO"), ("ami", "INFO")]


def test_before_the_first_golden_ami_status_says_so_and_how_to_build_one(aws, capsys):
    ids = deploy_fleet(aws)
    # The Image stack seeded the parameter with the public Deep Learning AMI: EC2 reports AWS's account as owner.
    ec2_backends[ACCOUNT][REGION].amis[ids["new_ami"]].owner_id = "898082745236"

    code, status, err = run(capsys, aws)

    assert (code, err) == (0, "")  # a warning: the fleets work on the bootstrap AMI
    assert status["golden_ami"] is False
    (finding,) = [f for f in status["findings"] if f["level"] == "WARNING"]
    assert finding["check"] == "ami"
    assert finding["message"].startswith(f"no golden AMI yet: {AMI_PARAMETER} holds {ids['new_ami']} (")
    pipeline = f"arn:aws:imagebuilder:{REGION}:{ACCOUNT}:image-pipeline/gpu-platform-dev-gpu-node"
    assert finding["fix"] == (
        f"build one (about an hour): aws imagebuilder start-image-pipeline-execution --image-pipeline-arn {pipeline}"
    )


def test_notice_capacity_block_unhealthy_node_and_alarm_fail_the_command(aws, capsys):
    ids = deploy_fleet(aws)
    backend = ec2_backends[ACCOUNT][REGION]
    (request,) = backend.spot_instance_requests.values()
    request._status_code = "marked-for-termination"  # EC2 decided to reclaim it: the two-minute notice
    backend.get_instance(ids["b"]).lifecycle = "capacity-block"
    aws.client("autoscaling").set_instance_health(InstanceId=ids["a"], HealthStatus="Unhealthy")
    cloudwatch = aws.client("cloudwatch")
    for name in (
        "gpu-platform-dev-inference-health-check-failed",
        "gpu-platform-staging-inference-health-check-failed",
    ):
        cloudwatch.put_metric_alarm(
            AlarmName=name,
            Namespace="AWS/AutoScaling",
            MetricName="GroupInServiceInstances",
            Statistic="Minimum",
            Period=60,
            EvaluationPeriods=1,
            Threshold=1,
            ComparisonOperator="LessThanThreshold",
        )
        cloudwatch.set_alarm_state(AlarmName=name, StateValue="ALARM", StateReason="Threshold Crossed: 1 datapoint")

    code, status, err = run(capsys, aws)

    assert (code, err) == (1, "")
    instances = {i["instance_id"]: i for i in inference(status)["instances"]}
    assert instances[ids["spot"]]["interruption"] == "marked-for-termination"
    assert instances[ids["b"]]["market"] == "Capacity Block"
    assert instances[ids["a"]]["health"] == "Unhealthy"
    assert inference(status)["gpu_utilization_avg"] is None  # no metric published
    assert [a["name"] for a in status["alarms"]] == ["gpu-platform-dev-inference-health-check-failed"]
    found = {(f["check"], f["level"]) for f in status["findings"]}
    assert {("spot-notice", "WARNING"), ("health", "ERROR"), ("alarm", "ERROR")} <= found
    notice = next(f for f in status["findings"] if f["check"] == "spot-notice")
    assert ids["spot"] in notice["message"] and notice["fix"]


def test_environment_not_deployed(aws, capsys):
    code, status, err = run(capsys, aws)
    assert (code, err) == (1, "")
    assert status["fleets"] == [
        {
            "name": name,
            "group_name": group,
            "deployed": False,
            "desired": 0,
            "minimum": 0,
            "maximum": 0,
            "in_service": 0,
            "pending": 0,
            "gpu_utilization_avg": None,
            "gpu_utilization_max": None,
            "instances": [],
        }
        for name, group in (("training", TRAINING_GROUP), ("inference", GROUP))
    ]
    assert {(f["check"], f["level"]) for f in status["findings"]} == {("fleet", "ERROR"), ("ami", "WARNING")}


def test_table_output_for_people(aws, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    ids = deploy_fleet(aws)
    code = status_command("dev", json_out=False, config_dir=TEST_CONFIG_DIR, session=aws)
    out = capsys.readouterr().out
    assert code == 0
    assert ids["spot"] in out and "inference" in out and "dashboards/dashboard/gpu-platform-dev" in out


def test_credentials_of_another_account_exit_2(aws, capsys, monkeypatch):
    monkeypatch.setenv("MOTO_ACCOUNT_ID", "222222222222")
    code, status, err = run(capsys, aws)
    assert (code, status) == (2, {})
    assert err.count("\n") == 1
    assert "account 222222222222, not 111111111111" in err and "fix:" in err


def test_no_credentials_one_line_exit_2(capsys, monkeypatch, tmp_path):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    code, status, err = run(capsys)
    assert (code, status) == (2, {})
    assert err == NO_CREDENTIALS + "\n"


def test_config_error_exit_2(capsys, tmp_path):
    (tmp_path / "dev.yaml").write_text("name: dev\naccount: 1\n")
    code = status_command("dev", json_out=True, config_dir=tmp_path)
    err = capsys.readouterr().err
    assert code == 2
    assert err.splitlines() and all(line.startswith(f"{tmp_path}/dev.yaml: ") for line in err.splitlines())
    assert "fix:" in err and "Traceback" not in err


def test_a_slurm_fleet_is_not_looked_for_as_an_auto_scaling_group(capsys, monkeypatch):
    """PCS launches a Slurm fleet's nodes: no group to find, so no 'not found' error for it (its jobs: job list)."""
    with moto_session(monkeypatch, account="444444444444", region=REGION) as session:
        code = status_command("hpc", json_out=True, config_dir=SLURM_DIR, session=session)
    status = json.loads(capsys.readouterr().out)
    assert [f["name"] for f in status["fleets"]] == ["inference"]  # the Auto Scaling fleet only
    assert code == 1 and all("training" not in f["message"] for f in status["findings"])

"""scripts/check_environment.py (and its steps in scripts/env_check/) against a moto-deployed environment
(and botocore's Stubber where moto cannot).

A healthy environment is built once per test in moto: the two stacks from a
minimal template, a fleet's Auto Scaling group, an alarm in OK, the AMI
parameter, a logging trail. Each failure test breaks one thing and expects
exactly one FAIL line. moto 5.2.5 reports no Lifecycle for FSx file systems and
never throttles or refuses a caller, so those paths use a Stubber.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
import yaml
from botocore.stub import Stubber
from moto import mock_aws
from moto.cloudformation.models import cloudformation_backends

from config import load_environment
from config.fleets import Fleet
from config.naming import ResourceNames
from scripts.env_check import aws, judge
from scripts.env_check.expectations import FleetExpectation, expectations_for, fleet_expectations
from tests.synth import TEST_CONFIG_DIR

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "scripts" / "check_environment.py"
ACCOUNT = "123456789012"  # moto's default account
REGION = "us-east-1"
AMI = "ami-0123456789abcdef0"
TEMPLATE = json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}})

#: The test suite's dev config is the template, so the tests follow the schema as it grows.
DEV_CONFIG = yaml.safe_load((TEST_CONFIG_DIR / "dev.yaml").read_text(encoding="utf-8"))
FILE_SYSTEM = {
    "FileSystemId": "fs-0123456789abcdef0",
    "Lifecycle": "AVAILABLE",
    "Tags": [{"Key": "Name", "Value": "gpu-platform-dev-lustre"}],
}

HEALTHY = [
    "PASS stacks: dev-Fleets CREATE_COMPLETE, dev-Image CREATE_COMPLETE, dev-Monitoring CREATE_COMPLETE, "
    "dev-Network CREATE_COMPLETE, dev-Security CREATE_COMPLETE, dev-Storage CREATE_COMPLETE",
    "PASS fleets: gpu-platform-dev-train min 1 max 4 desired 1",
    "PASS alarms: 0 of 1 alarm(s) named gpu-platform-dev-* in ALARM",
    f"PASS ami-parameter: /imagebuilder/gpu-platform/dev/ami/latest = {AMI} (aws:ec2:image)",
    "PASS file-systems: fs-0123456789abcdef0 AVAILABLE",
    "PASS trail: gpu-platform-dev-trail is logging",
]


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_environment", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def write_env(config_dir: Path, name: str, account: str = ACCOUNT) -> None:
    """config/dev.yaml as environment ``name`` in ``account``, with one fleet ``train`` of capacity 1..4."""
    data = copy.deepcopy(DEV_CONFIG) | {"name": name, "account": account}
    data["tags"]["Environment"] = name
    inference = next(f for f in data["fleets"] if f["name"] == "inference")  # its scaling and schedules
    data["fleets"] = [inference | {"name": "train", "capacity": {"min": 1, "max": 4, "desired": 1}}]
    (config_dir / f"{name}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    """dev in moto's account, and dev-2, whose resources share dev's name prefixes but are not dev's."""
    write_env(tmp_path, "dev")
    write_env(tmp_path, "dev-2")
    return tmp_path


@pytest.fixture
def fake_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)


@pytest.fixture
def session(fake_credentials: None) -> Iterator[boto3.Session]:
    with mock_aws():
        yield boto3.Session(region_name=REGION)


def set_stack_status(name: str, status: str) -> None:
    """moto finishes every operation it accepts; a failed deploy's final state is set on its model."""
    backend = cloudformation_backends[ACCOUNT][REGION]
    next(s for s in backend.stacks.values() if s.name == name).status = status


@pytest.fixture
def deployed(script: ModuleType, session: boto3.Session, monkeypatch: pytest.MonkeyPatch) -> None:
    """A healthy dev environment, beside dev-2's and another app's broken resources."""
    # moto's FSx reports no Lifecycle: the one call that lists file systems answers an AVAILABLE one.
    monkeypatch.setattr(aws, "list_file_systems", lambda _: [FILE_SYSTEM])
    cfn = session.client("cloudformation")
    for name in (
        "dev-Security",
        "dev-Network",
        "dev-Storage",
        "dev-Image",
        "dev-Fleets",
        "dev-Monitoring",
        "dev-2-Network",
    ):
        cfn.create_stack(StackName=name, TemplateBody=TEMPLATE)
    set_stack_status("dev-2-Network", "UPDATE_ROLLBACK_COMPLETE")

    # moto validates neither the launch template's image nor the parameter's value: no image to create.
    session.client("ec2").create_launch_template(LaunchTemplateName="train", LaunchTemplateData={"ImageId": AMI})
    for group, size in (("gpu-platform-dev-train", 1), ("gpu-platform-dev-2-train", 0)):
        session.client("autoscaling").create_auto_scaling_group(
            AutoScalingGroupName=group,
            LaunchTemplate={"LaunchTemplateName": "train", "Version": "$Latest"},
            MinSize=size,
            MaxSize=4,
            DesiredCapacity=size,
            AvailabilityZones=[f"{REGION}a"],
        )

    session.client("ssm").put_parameter(
        Name="/imagebuilder/gpu-platform/dev/ami/latest", Value=AMI, Type="String", DataType="aws:ec2:image"
    )

    cw = session.client("cloudwatch")
    for alarm in ("gpu-platform-dev-gpu-temperature", "gpu-platform-dev-2-gpu-temperature", "other-app-errors"):
        cw.put_metric_alarm(
            AlarmName=alarm,
            Namespace="GpuPlatform/dev",
            MetricName="nvidia_smi_temperature_gpu",
            Statistic="Maximum",
            Period=60,
            EvaluationPeriods=1,
            Threshold=85,
            ComparisonOperator="GreaterThanThreshold",
        )
        state = "OK" if alarm.startswith("gpu-platform-dev-gpu") else "ALARM"
        cw.set_alarm_state(AlarmName=alarm, StateValue=state, StateReason="test")

    session.client("s3").create_bucket(Bucket="gpu-platform-dev-trail-logs")
    trail = session.client("cloudtrail")
    trail.create_trail(Name="gpu-platform-dev-trail", S3BucketName="gpu-platform-dev-trail-logs")
    trail.start_logging(Name="gpu-platform-dev-trail")


def run_main(
    script: ModuleType, config_dir: Path, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    code = script.main(["dev", "--config-dir", str(config_dir), *args])
    out, err = capsys.readouterr()
    return code, out, err


# --- a healthy environment ------------------------------------------------------------------------------------


def test_a_healthy_environment_passes_every_check(script, config_dir, deployed, capsys) -> None:
    code, out, err = run_main(script, config_dir, capsys)
    assert (code, err) == (0, "")
    assert out.splitlines() == HEALTHY


def test_json_report_is_machine_readable(script, config_dir, deployed, capsys) -> None:
    code, out, _ = run_main(script, config_dir, capsys, "--json")
    report = json.loads(out)
    assert code == 0
    assert {k: report[k] for k in ("environment", "account", "region", "passed")} == {
        "environment": "dev",
        "account": ACCOUNT,
        "region": REGION,
        "passed": True,
    }
    assert [c["check"] for c in report["checks"]] == [
        "stacks",
        "fleets",
        "alarms",
        "ami-parameter",
        "file-systems",
        "trail",
    ]
    assert all(c["passed"] for c in report["checks"])


def test_resources_of_an_environment_extending_the_name_count_when_it_has_no_config(
    script, config_dir, deployed, capsys
) -> None:
    """dev-2's stack and alarm are excluded only because config/dev-2.yaml says they are dev-2's."""
    (config_dir / "dev-2.yaml").unlink()
    code, out, _ = run_main(script, config_dir, capsys)
    assert code == 1
    assert "FAIL stacks: dev-2-Network UPDATE_ROLLBACK_COMPLETE" in out.splitlines()
    assert "FAIL fleets: gpu-platform-dev-2-train is not a fleet in the config" in out.splitlines()
    assert (
        "FAIL alarms: 1 of 2 alarm(s) named gpu-platform-dev-* in ALARM: gpu-platform-dev-2-gpu-temperature"
        in out.splitlines()
    )


# --- one thing broken at a time -------------------------------------------------------------------------------


def _delete_parameter(session: boto3.Session) -> None:
    session.client("ssm").delete_parameter(Name="/imagebuilder/gpu-platform/dev/ami/latest")


def _text_parameter(session: boto3.Session) -> None:
    _delete_parameter(session)
    session.client("ssm").put_parameter(
        Name="/imagebuilder/gpu-platform/dev/ami/latest", Value="ami-0123456789abcdef0", Type="String", DataType="text"
    )


BREAKAGES: dict[str, tuple[Callable[[boto3.Session], Any], str]] = {
    "rolled-back update": (
        lambda s: set_stack_status("dev-Network", "UPDATE_ROLLBACK_COMPLETE"),
        "FAIL stacks: dev-Network UPDATE_ROLLBACK_COMPLETE",
    ),
    "missing stack": (
        lambda s: s.client("cloudformation").delete_stack(StackName="dev-Security"),
        "FAIL stacks: dev-Security missing",
    ),
    "extra stack still deploying": (
        lambda s: (
            s.client("cloudformation").create_stack(StackName="dev-Fleet", TemplateBody=TEMPLATE),
            set_stack_status("dev-Fleet", "UPDATE_IN_PROGRESS"),
        ),
        "FAIL stacks: dev-Fleet UPDATE_IN_PROGRESS",
    ),
    "fleet resized by hand": (
        lambda s: s.client("autoscaling").update_auto_scaling_group(
            AutoScalingGroupName="gpu-platform-dev-train", MaxSize=8
        ),
        "FAIL fleets: gpu-platform-dev-train min 1 max 8 desired 1, expected min 1 max 4 or scheduled min 0 max 4 or scheduled min 1",  # dev: nights-off, mornings-on
    ),
    "fleet group missing": (
        lambda s: s.client("autoscaling").delete_auto_scaling_group(
            AutoScalingGroupName="gpu-platform-dev-train", ForceDelete=True
        ),
        "FAIL fleets: gpu-platform-dev-train missing",
    ),
    "alarm firing": (
        lambda s: s.client("cloudwatch").set_alarm_state(
            AlarmName="gpu-platform-dev-gpu-temperature", StateValue="ALARM", StateReason="85 C"
        ),
        "FAIL alarms: 1 of 1 alarm(s) named gpu-platform-dev-* in ALARM: gpu-platform-dev-gpu-temperature",
    ),
    "parameter missing": (
        _delete_parameter,
        "FAIL ami-parameter: /imagebuilder/gpu-platform/dev/ami/latest missing: the fleet stack cannot resolve its "
        "AMI; fix: put the last AMI id back (docs/operations.md, Upgrading a deployed environment)",
    ),
    "parameter of type text": (
        _text_parameter,
        "FAIL ami-parameter: /imagebuilder/gpu-platform/dev/ami/latest has data type text, expected aws:ec2:image",
    ),
    "trail stopped": (
        lambda s: s.client("cloudtrail").stop_logging(Name="gpu-platform-dev-trail"),
        "FAIL trail: gpu-platform-dev-trail is not logging",
    ),
    "trail missing": (
        lambda s: s.client("cloudtrail").delete_trail(Name="gpu-platform-dev-trail"),
        "FAIL trail: gpu-platform-dev-trail missing",
    ),
}


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_one_broken_thing_gives_one_fail_line_and_exit_1(
    script, config_dir, deployed, session, capsys, breakage
) -> None:
    breaker, expected_line = BREAKAGES[breakage]
    breaker(session)
    code, out, err = run_main(script, config_dir, capsys)
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert [line for line in lines if line.startswith("FAIL")] == [expected_line]
    check = expected_line.split()[1]
    assert [line for line in lines if not line.startswith(f"FAIL {check}")] == [
        line for line in HEALTHY if not line.startswith(f"PASS {check}")
    ]


def test_json_report_of_a_failure(script, config_dir, deployed, session, capsys) -> None:
    session.client("cloudtrail").stop_logging(Name="gpu-platform-dev-trail")
    code, out, _ = run_main(script, config_dir, capsys, "--json")
    report = json.loads(out)
    assert (code, report["passed"]) == (1, False)
    assert report["checks"][-1] == {
        "check": "trail",
        "passed": False,
        "detail": "gpu-platform-dev-trail is not logging",
    }


# --- fleets: the expectations protocol ------------------------------------------------------------------------


@pytest.fixture
def expected(script, config_dir) -> Any:
    return expectations_for(load_environment("dev", config_dir), other_environments=["dev", "dev-2"])


def test_fleet_expectations_come_from_the_fleets_section(config_dir) -> None:
    """dev's fleet scales by steps and has a night schedule (min 0 max 4 desired 0): its desired
    capacity is whatever scaling made it, its bounds the configured ones or the schedule's."""
    env = load_environment("dev", config_dir)
    assert fleet_expectations(env.fleets, ResourceNames.of(env)) == (
        FleetExpectation("gpu-platform-dev-train", 1, 4, None, scheduled=((0, 4), (1, None))),
    )


def _fleet(name: str, low: int, high: int, desired: int | None, **more: Any) -> Fleet:
    """A validated fleet of the config schema (one g4dn type, one zone) with ``more`` fields."""
    capacity = {"min": low, "max": high} | ({"desired": desired} if desired is not None else {})
    return Fleet.model_validate(
        {
            "name": name,
            "role": "inference",
            "instance_types": ["g4dn.xlarge"],
            "availability_zones": ["us-east-1a"],
            "capacity": capacity,
            **more,
        }
    )


def _schedule(name: str, **sizes: int) -> dict[str, Any]:
    return {"name": name, "cron": "0 8 * * 1-5", **sizes}


BLOCK = {"id": "cr-0123456789abcdef0", "start": "2026-12-01T11:30:00Z", "end": "2026-12-08T11:30:00Z"}


@pytest.mark.parametrize(
    ("fleet", "expectation"),
    [
        pytest.param(_fleet("infer", 0, 8, None), ("gpu-platform-dev-infer", 0, 8, None), id="no-desired"),
        pytest.param(_fleet("infer", 1, 8, 2), ("gpu-platform-dev-infer", 1, 8, 2), id="fixed-size"),
        pytest.param(
            _fleet("infer", 1, 8, 2, scaling={"target_tracking": {"gpu_utilization_percent": 70}}),
            ("gpu-platform-dev-infer", 1, 8, None),
            id="target-tracking-moves-desired",
        ),
        pytest.param(
            _fleet("infer", 1, 8, 2, scaling={"step": {}}),
            ("gpu-platform-dev-infer", 1, 8, None),
            id="step-scaling-moves-desired",
        ),
        pytest.param(
            _fleet("infer", 1, 8, 2, scaling={"schedules": [_schedule("cap", max=2), _schedule("floor", min=3)]}),
            ("gpu-platform-dev-infer", 1, 8, None, ((None, 2), (3, None))),
            id="schedules",
        ),
        pytest.param(
            _fleet("block", 4, 4, None, capacity_block=BLOCK),
            ("gpu-platform-dev-block", 0, 0, None, ((4, 4),)),
            id="capacity-block",
        ),
    ],
)
def test_fleet_expectation_per_kind_of_fleet(config_dir, fleet, expectation) -> None:
    names = ResourceNames.of(load_environment("dev", config_dir))
    assert fleet_expectations([fleet], names) == (FleetExpectation(*expectation),)


@pytest.mark.parametrize(
    ("sizes", "allowed"),
    [
        ((1, 4, 3), True),  # scaled out
        ((0, 4, 0), True),  # the night schedule
        ((0, 4, 5), False),  # desired above max: Auto Scaling refuses it, and so does the check
        ((0, 8, 0), False),  # max set by hand
        ((2, 4, 2), False),  # min set by hand
    ],
)
def test_a_scaled_and_scheduled_fleet_allows_what_scaling_and_schedules_do(sizes, allowed) -> None:
    expectation = FleetExpectation("g", 1, 4, None, scheduled=((0, 4),))
    assert expectation.allows(*sizes) is allowed


@pytest.mark.parametrize(
    ("fleets", "line"),
    [
        (
            [("gpu-platform-dev-train", 1, 4, 1)],
            "PASS fleets: gpu-platform-dev-train min 1 max 4 desired 1",
        ),
        (
            [("gpu-platform-dev-train", 1, 4, None)],
            "PASS fleets: gpu-platform-dev-train min 1 max 4 desired 1",
        ),
        (
            [("gpu-platform-dev-train", 0, 4, 0)],
            "FAIL fleets: gpu-platform-dev-train min 1 max 4 desired 1, expected min 0 max 4 desired 0",
        ),
        (
            [("gpu-platform-dev-train", 1, 8, None), ("gpu-platform-dev-infer", 1, 1, 1)],
            "FAIL fleets: gpu-platform-dev-train min 1 max 4 desired 1, expected min 1 max 8; "
            "gpu-platform-dev-infer missing",
        ),
        ([], "FAIL fleets: gpu-platform-dev-train is not a fleet in the config"),
    ],
)
def test_fleet_capacity_against_expectations(expected, deployed, session, fleets, line) -> None:
    expected = replace(expected, fleets=tuple(FleetExpectation(*f) for f in fleets))
    assert judge.check_fleets(session, expected).line() == line


def test_no_fleets_configured_and_none_deployed(expected, session) -> None:
    result = judge.check_fleets(session, replace(expected, fleets=()))
    assert result.line() == "PASS fleets: no fleets configured and no groups found"


# --- FSx, through a Stubber (moto reports no Lifecycle) -------------------------------------------------------


def stubbed_session(responses: dict[str, list[tuple[str, Any]]]) -> tuple[boto3.Session, list[Stubber]]:
    """A session whose clients answer from ``responses``: service -> [(operation, response or (code, message))]."""
    session = boto3.Session(region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")  # noqa: S106 - fake
    clients, stubbers = {}, []
    for service, calls in responses.items():
        client = session.client(service)
        stubber = Stubber(client)
        for operation, answer in calls:
            if isinstance(answer, tuple):
                code, message = answer
                stubber.add_client_error(operation, service_error_code=code, service_message=message)
            else:
                stubber.add_response(operation, answer)
        stubber.activate()
        clients[service], stubbers = client, [*stubbers, stubber]
    session.client = lambda service, **_: clients[service]  # type: ignore[method-assign]
    return session, stubbers


def file_system(fs_id: str, lifecycle: str, tags: dict[str, str], **extra: Any) -> dict[str, Any]:
    return {
        "FileSystemId": fs_id,
        "FileSystemType": "LUSTRE",
        "Lifecycle": lifecycle,
        "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
        **extra,
    }


DEV_TAGS = {"Environment": "dev", "Project": "gpu-platform"}


@pytest.mark.parametrize(
    ("file_systems", "line"),
    [
        (
            [
                file_system("fs-0aaaaaaaaaaaaaaaa", "AVAILABLE", DEV_TAGS),
                file_system("fs-0bbbbbbbbbbbbbbba", "AVAILABLE", {"Name": "gpu-platform-dev-scratch"}),
                file_system("fs-0ccccccccccccccca", "FAILED", {"Environment": "prod", "Project": "gpu-platform"}),
                file_system("fs-0ddddddddddddddda", "FAILED", {"Environment": "dev", "Project": "another-app"}),
                file_system("fs-0eeeeeeeeeeeeeeea", "FAILED", {"Name": "gpu-platform-dev-2-scratch"}),
            ],
            "PASS file-systems: fs-0aaaaaaaaaaaaaaaa AVAILABLE, fs-0bbbbbbbbbbbbbbba AVAILABLE",
        ),
        (
            [
                file_system("fs-0aaaaaaaaaaaaaaaa", "AVAILABLE", DEV_TAGS),
                file_system(
                    "fs-0bbbbbbbbbbbbbbba",
                    "FAILED",
                    DEV_TAGS,
                    FailureDetails={"Message": "subnet has no free addresses"},
                ),
                file_system("fs-0ccccccccccccccca", "CREATING", DEV_TAGS),
            ],
            "FAIL file-systems: fs-0bbbbbbbbbbbbbbba FAILED (subnet has no free addresses); fs-0ccccccccccccccca CREATING",
        ),
    ],
)
def test_file_systems_of_the_environment_must_be_available(expected, file_systems, line) -> None:
    session, stubbers = stubbed_session({"fsx": [("describe_file_systems", {"FileSystems": file_systems})]})
    assert judge.check_file_systems(session, expected).line() == line
    for stubber in stubbers:
        stubber.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("declared", "line"),
    [
        (
            True,
            "FAIL file-systems: no file system tagged Environment=dev, Project=gpu-platform or named "
            "gpu-platform-dev-*, but the config declares storage.file_system",
        ),
        (
            False,
            "PASS file-systems: no file system tagged Environment=dev, Project=gpu-platform or named gpu-platform-dev-*",
        ),
    ],
)
def test_no_file_system_fails_only_where_the_config_declares_one(expected, declared, line) -> None:
    session, _ = stubbed_session({"fsx": [("describe_file_systems", {"FileSystems": []})]})
    assert judge.check_file_systems(session, replace(expected, file_system_expected=declared)).line() == line


def test_expectations_follow_the_config(expected) -> None:
    assert expected.required_stacks == (
        "dev-Security",
        "dev-Network",
        "dev-Storage",
        "dev-Image",
        "dev-Fleets",
        "dev-Monitoring",
    )
    assert expected.file_system_expected
    assert expected.foreign_prefixes == ("dev-2-", "gpu-platform-dev-2-")
    assert (expected.ami_parameter, expected.trail_name) == (
        "/imagebuilder/gpu-platform/dev/ami/latest",
        "gpu-platform-dev-trail",
    )


def test_a_stack_reason_stays_on_one_line(expected) -> None:
    stacks = [
        {"StackName": name, "StackStatus": "CREATE_COMPLETE", "CreationTime": "2026-01-01T00:00:00Z"}
        for name in expected.required_stacks
    ]
    stacks[0] |= {
        "StackStatus": "UPDATE_ROLLBACK_FAILED",
        "StackStatusReason": "The following resource(s) failed:\n[Key]",
    }
    session, _ = stubbed_session({"cloudformation": [("describe_stacks", {"Stacks": stacks})]})
    assert judge.check_stacks(session, expected).line() == (
        "FAIL stacks: dev-Security UPDATE_ROLLBACK_FAILED (The following resource(s) failed: [Key])"
    )


# --- errors: one line, exit 2 ---------------------------------------------------------------------------------


def test_throttling_gives_one_line_and_exit_2(script, config_dir, capsys) -> None:
    session, _ = stubbed_session(
        {
            "sts": [("get_caller_identity", {"Account": ACCOUNT, "Arn": "arn:aws:iam::123456789012:user/ci"})],
            "cloudformation": [("describe_stacks", ("Throttling", "Rate exceeded"))],
        }
    )
    code = script.main(["dev", "--config-dir", str(config_dir)], session=session)
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "error: stacks: DescribeStacks failed (Throttling: Rate exceeded) after retries; "
        "fix: run the check again in a few minutes"
    ]


def test_access_denied_in_a_check_is_an_error_not_a_fail(expected) -> None:
    session, _ = stubbed_session(
        {"cloudwatch": [("describe_alarms", ("AccessDenied", "not authorized to perform cloudwatch:DescribeAlarms"))]}
    )
    with pytest.raises(aws.CheckError) as caught:
        judge.check_alarms(session, expected)
    assert str(caught.value) == (
        "alarms: DescribeAlarms failed (AccessDenied: not authorized to perform cloudwatch:DescribeAlarms); "
        "fix: give the role that runs the check read access (listed in scripts/check_environment.py)"
    )


def test_credentials_of_another_account_give_one_line_and_exit_2(script, config_dir, session, capsys) -> None:
    write_env(config_dir, "dev", account="111111111111")
    code, out, err = run_main(script, config_dir, capsys, "--json")
    assert code == 2
    line = (
        "error: credentials: they are for account 123456789012, but dev is deployed to 111111111111; "
        "fix: use credentials for account 111111111111"
    )
    assert err.splitlines() == [line]
    assert json.loads(out) == {"environment": "dev", "passed": False, "error": line}


def test_a_config_error_gives_one_line_and_exit_2(script, config_dir, capsys) -> None:
    code = script.main(["qa", "--config-dir", str(config_dir)])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"{config_dir / 'qa.yaml'}: file not found; fix: create it, or choose an existing environment (dev, dev-2)"
    ]


def no_credentials_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return env | {
        "AWS_CONFIG_FILE": str(tmp_path / "no-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }


NO_CREDENTIALS = (
    "error: credentials: no AWS credentials found; "
    "fix: configure credentials (AWS_PROFILE, environment variables or a role)"
)


def test_no_credentials_gives_one_line_and_exit_2(script, config_dir, tmp_path, monkeypatch, capsys) -> None:
    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
    for key, value in no_credentials_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    code, out, err = run_main(script, config_dir, capsys)
    assert (code, out, err.splitlines()) == (2, "", [NO_CREDENTIALS])


def test_a_missing_profile_gives_one_line_and_exit_2(script, config_dir, tmp_path, monkeypatch, capsys) -> None:
    for key, value in no_credentials_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_PROFILE", "ci-deployer")
    code, out, err = run_main(script, config_dir, capsys)
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "error: credentials: The config profile (ci-deployer) could not be found; "
        "fix: set AWS_PROFILE to a profile of ~/.aws/config, or unset it"
    ]


def test_as_a_command_without_credentials(config_dir, tmp_path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "dev", "--config-dir", str(config_dir)],
        env=no_credentials_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert (done.returncode, done.stdout, done.stderr.splitlines()) == (2, "", [NO_CREDENTIALS])

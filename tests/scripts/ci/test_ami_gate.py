"""scripts/ci/ami_gate.py against moto (SSM and EC2 of prod's account): the deploy goes on only when prod's golden
AMI has the name of the AMI staging's fabric check ran on, and every refusal is one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from scripts.ci import ami_gate
from scripts.ci.ami_gate import NOT_TESTED, GateError, check, fabric_ami, main
from tests.ops.helpers import config_dir, moto_session

PROD, REGION = "333333333333", "us-east-1"  # tests/fixtures/config/prod.yaml
PARAMETER = "/imagebuilder/gpu-platform/prod/ami/latest"
TESTED = "gpu-platform-dev-gpu-node-2026-03-01T12-00-00Z"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch):
    with moto_session(monkeypatch, account=PROD, region=REGION) as session:
        yield session


def golden(session: boto3.session.Session, name: str) -> str:
    """Prod's copy of an AMI named ``name``, its id in prod's AMI parameter (as the distribution writes it)."""
    image = session.client("ec2").register_image(Name=name, RootDeviceName="/dev/sda1")["ImageId"]
    session.client("ssm").put_parameter(
        Name=PARAMETER, Value=image, Type="String", DataType="aws:ec2:image", Overwrite=True
    )
    return image


def gate(session: boto3.session.Session, tested: str) -> str:
    ssm, ec2 = session.client("ssm"), session.client("ec2")
    return check(ssm, ec2, env="prod", parameter=PARAMETER, tested=tested, tested_in="staging")


def refusal(session: boto3.session.Session, tested: str) -> GateError:
    with pytest.raises(GateError) as info:
        gate(session, tested)
    assert "\n" not in str(info.value)
    return info.value


# --- the comparison -----------------------------------------------------------------------------------------------


def test_the_ami_staging_tested_passes(aws) -> None:
    image = golden(aws, TESTED)
    assert gate(aws, TESTED) == f"prod's golden AMI {TESTED} ({image}) is the one staging's fabric check ran"


def test_another_ami_is_refused_with_both_names(aws) -> None:
    image = golden(aws, "gpu-platform-dev-gpu-node-2026-03-08T12-00-00Z")
    error = refusal(aws, TESTED)
    assert error.code == 1
    assert str(error) == (
        f"prod's golden AMI gpu-platform-dev-gpu-node-2026-03-08T12-00-00Z ({image}) is not the one staging's fabric "
        f"check ran ({TESTED}); fix: rerun the pipeline (Release change) once staging's training nodes run "
        f"gpu-platform-dev-gpu-node-2026-03-08T12-00-00Z, or put prod's copy of {TESTED} back in {PARAMETER} "
        "(docs/operations.md: Roll back)"
    )


def test_a_missing_parameter_is_refused(aws) -> None:
    error = refusal(aws, TESTED)
    assert error.code == 1
    assert str(error) == (
        f"prod's AMI parameter {PARAMETER} does not exist, so its AMI cannot be compared; fix: deploy prod once "
        "(make deploy ENV=prod: its Image stack creates the parameter), then retry this action"
    )


def test_a_parameter_whose_ami_is_gone_is_refused(aws) -> None:
    image = golden(aws, TESTED)
    aws.client("ec2").deregister_image(ImageId=image)
    assert str(refusal(aws, TESTED)).startswith(f"prod's AMI parameter {PARAMETER} holds {image}, which EC2 does not")


@pytest.mark.parametrize(
    ("tested", "line"),
    [
        pytest.param(
            f"{NOT_TESTED}no training fleet had two nodes to test",
            "staging's fabric check tested no AMI (no training fleet had two nodes to test); prod is not deployed on "
            "an AMI nothing tested; fix: scale staging's training fleet to at least 2 nodes, then rerun the pipeline "
            "(Release change)",
            id="check-ran-on-no-node",
        ),
        pytest.param(
            "",
            "no AMI name from staging's fabric check (TESTED_AMI_NAME is empty); prod is not deployed on an AMI "
            "nothing tested; fix: run the pipeline through staging: its FabricCheck step exports the AMI",
            id="nothing-exported",
        ),
    ],
)
def test_nothing_tested_fails_closed(aws, tested: str, line: str) -> None:
    golden(aws, TESTED)
    error = refusal(aws, tested)
    assert (error.code, str(error)) == (1, line)


# --- what the fabric check exports ------------------------------------------------------------------------------


def _report(fleet: str, name: str | None) -> dict[str, Any]:
    return {"fleet": fleet, "ami": {"id": "ami-0abc", "name": name}}


def test_the_tested_ami_is_the_one_the_fleets_that_ran_share() -> None:
    assert fabric_ami([_report("training", TESTED), _report("big", TESTED)]) == TESTED
    assert fabric_ami([]) == f"{NOT_TESTED}no training fleet had two nodes to test"
    assert (
        fabric_ami([_report("training", None)]) == f"{NOT_TESTED}fleet training ran on ami-0abc that EC2 gives no name"
    )
    with pytest.raises(GateError) as info:
        fabric_ami([_report("a", TESTED), _report("b", "older")])
    assert info.value.code == 2 and f"(a: {TESTED}; b: older)" in str(info.value)


def test_no_ami_name_can_pass_for_not_tested() -> None:
    """AMI names are letters, digits, spaces and ( ) [ ] . / - ' @ _ (EC2's CreateImage): never a colon."""
    assert ":" in NOT_TESTED


# --- the command line ---------------------------------------------------------------------------------------------


def test_check_reads_the_parameter_of_the_environment_in_its_region(aws, tmp_path, capsys, monkeypatch) -> None:
    golden(aws, TESTED)
    monkeypatch.setenv("TESTED_AMI_NAME", TESTED)
    folder = config_dir(tmp_path)
    assert main(["check", "prod", "--tested-in", "staging", "--config-dir", str(folder)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"prod's golden AMI {TESTED} (ami-") and err == ""
    assert main(["check", "prod", "--tested-in", "staging", "--tested", "older", "--config-dir", str(folder)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"ami gate: prod's golden AMI {TESTED} (ami-")


def test_an_aws_error_is_one_line_with_the_role_to_deploy(tmp_path, capsys, monkeypatch) -> None:
    class Denied:
        def client(self, service: str) -> Any:
            return self

        def get_parameter(self, **_: Any) -> Any:
            error = {"Error": {"Code": "AccessDenied", "Message": "not authorized to perform sts:AssumeRole"}}
            raise ClientError(error, "AssumeRole")

    original = ami_gate.run_check
    monkeypatch.setattr(ami_gate, "run_check", lambda *a: original(*a, session=Denied()))
    code = main(
        ["check", "prod", "--tested-in", "staging", "--tested", TESTED, "--config-dir", str(config_dir(tmp_path))]
    )
    (line,) = capsys.readouterr().err.splitlines()
    assert code == 2
    assert line.startswith("ami gate: AWS: An error occurred (AccessDenied) when calling the AssumeRole operation")
    assert "gpu-platform-prod-ami-gate in prod's account 333333333333" in line


@pytest.mark.parametrize(
    ("argv", "start"),
    [
        (["check", "qa", "--tested-in", "staging"], "ami gate: "),
        (["tested", "/nonexistent/report.json"], "ami gate: /nonexistent/report.json: No such file or directory"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys, argv: list[str], start: str) -> None:
    if argv[0] == "check":
        argv += ["--config-dir", str(config_dir(tmp_path))]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(start) and "Traceback" not in line


def test_a_report_that_is_not_json_is_one_line(tmp_path: Path, capsys) -> None:
    report = tmp_path / "report.json"
    report.write_text("fleet training: 1 InService\n")
    assert main(["tested", str(report)]) == 2
    assert capsys.readouterr().err == f"ami gate: {report}: not a fabric-test JSON report (Expecting value, line 1)\n"

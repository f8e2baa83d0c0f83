"""``gpu-platform job`` on a Slurm fleet of tests/fixtures/config/slurm/hpc.yaml: the login node found through PCS
(a botocore Stubber: moto has no PCS) and EC2 (moto), the scripts sent to it with AWS-RunShellScript (moto's
SSM, the login node's answers played by ``FakeLogin`` from what the real Slurm printed, fixtures/slurm/)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto.ssm.models import SimpleSystemManagerBackend

from config import load_environment
from ops.job.context import JobError
from ops.job.slurm import CHUNK_BYTES
from ops.job.slurm_cli import check_ssm_run
from ops.job.slurm_login import caller_name
from ops.preflight.aws import Aws
from tests.ops.helpers import moto_session, run_cli
from tests.synth import SLURM_DIR, TEST_CONFIG_DIR

CONFIG_DIR = SLURM_DIR
ACCOUNT, REGION, ENV = "444444444444", "us-east-1", "hpc"
FIXTURES = Path(__file__).with_name("fixtures") / "slurm"
CLUSTER = {"name": "hpc", "id": "pcs_cluster01", "arn": f"arn:aws:pcs:{REGION}:{ACCOUNT}:cluster/pcs_cluster01"}
LOGIN_GROUP, TRAINING_GROUP = "pcs_login0001", "pcs_train0001"
WHEN = "2026-01-05T10:00:00Z"
#: A GPU job in accounting: 2 nodes of 8 GPUs for 1.5 hours (the recorded line with a GPU node's AllocTRES).
GPU_JOB = (
    "17|bert-base|alice|vision|training|RUNNING|0:0|2026-01-05T10:00:00|2026-01-05T10:00:03|01:30:00|5400|2|"
    "training-1,training-2|billing=192,cpu=192,gres/gpu=16,mem=2000G,node=2|/fsx/jobs/bert-base\n"
)


def recorded(name: str) -> str:
    return str(json.loads((FIXTURES / f"{name}.json").read_text())["stdout"])


class FakeLogin:
    """The login node's answers to the commands' scripts, by the Slurm command each runs."""

    def __init__(self) -> None:
        self.scripts: list[list[str]] = []
        self.status = GPU_JOB
        self.later: list[tuple[str, str]] = []  # (status, file) after each status read of a followed job
        self.file = "step 1 loss 2.5\nstep 2 lo"

    def answer(self, lines: list[str]) -> str:
        self.scripts.append(lines)
        script = "\n".join(lines)
        if "sbatch --parsable" in script:
            return "17\n"
        if "tail -c" in script:
            offset = int(re.search(r"tail -c \+(\d+)", script).group(1)) - 1  # type: ignore[union-attr]
            return f"size {len(self.file)}\n{self.file[offset : offset + CHUNK_BYTES]}"
        if "--allusers" in script:
            return recorded("sacct_list") + GPU_JOB
        if "scancel" in script:
            return recorded("scancel")
        status = self.status
        if self.later:
            self.status, self.file = self.later.pop(0)
        return status


@pytest.fixture
def login(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLogin]:
    fake = FakeLogin()
    send = SimpleSystemManagerBackend.send_command

    def send_command(backend: SimpleSystemManagerBackend, **kwargs: Any) -> Any:
        command = send(backend, **kwargs)
        assert kwargs["document_name"] == "AWS-RunShellScript", kwargs
        command.invocations = [i for i in command.invocations if i["InstanceId"] in kwargs["instance_ids"]]
        out = fake.answer(command.parameters["commands"])
        for invocation in command.invocations:
            invocation.update(Status="Success", StatusDetails="Success", ResponseCode=0, StandardOutputContent=out)
        return command

    monkeypatch.setattr(SimpleSystemManagerBackend, "send_command", send_command)
    monkeypatch.setattr("ops.job.remote.time.sleep", lambda _s: None)
    with moto_session(monkeypatch, account=ACCOUNT, region=REGION) as session:
        _nodes(session)
        _pcs(monkeypatch)
        yield fake


def _nodes(session: boto3.session.Session) -> None:
    """A running login node, a running compute node of the training queue, and a stopped login node."""
    ec2 = session.client("ec2")
    for group, count in ((LOGIN_GROUP, 1), (TRAINING_GROUP, 1), (LOGIN_GROUP, 1)):
        tags = [{"ResourceType": "instance", "Tags": [{"Key": "aws:pcs:compute-node-group-id", "Value": group}]}]
        ec2.run_instances(ImageId="ami-12c6146b", MinCount=count, MaxCount=count, TagSpecifications=tags)
    reservations = ec2.describe_instances()["Reservations"]
    ec2.stop_instances(InstanceIds=[reservations[-1]["Instances"][0]["InstanceId"]])


def _pcs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each command's PCS client: answers one look-up of the login node group, parameters checked by the model."""
    real = Aws.client

    def client(aws: Aws, service: str) -> Any:
        if service != "pcs" or "pcs" in aws._clients:
            return real(aws, service)
        pcs = boto3.session.Session(region_name=REGION).client("pcs")
        stub = Stubber(pcs)
        cluster = {"clusterIdentifier": CLUSTER["id"]}
        summary = {"createdAt": WHEN, "modifiedAt": WHEN, "status": "ACTIVE"}
        stub.add_response("list_clusters", {"clusters": [{**CLUSTER, **summary}]}, {})
        stub.add_response("list_tags_for_resource", {"tags": {"Project": "gpu-platform", "Environment": ENV}})
        groups = [
            {"name": g, "id": g, "arn": g, "clusterId": CLUSTER["id"], **summary} for g in (LOGIN_GROUP, TRAINING_GROUP)
        ]
        stub.add_response("list_compute_node_groups", {"computeNodeGroups": groups}, cluster)
        queue = {"name": "training", "id": "pcs_queue001", "arn": "q", "clusterId": CLUSTER["id"], **summary}
        stub.add_response("list_queues", {"queues": [queue]}, cluster)
        configs = [{"computeNodeGroupId": TRAINING_GROUP}]
        stub.add_response(
            "get_queue", {"queue": {**queue, "computeNodeGroupConfigurations": configs}},
            {**cluster, "queueIdentifier": "pcs_queue001"},
        )  # fmt: skip
        stub.activate()
        aws._clients["pcs"] = pcs
        return pcs

    monkeypatch.setattr(Aws, "client", client)


def job(capsys: pytest.CaptureFixture[str], subcommand: str, *args: str) -> tuple[int, str, str]:
    return run_cli(capsys, "job", subcommand, "--env", ENV, "--config-dir", str(CONFIG_DIR), *args)


def test_run_submits_the_template_as_the_user_to_the_fleets_partition(login: FakeLogin, capsys) -> None:
    code, out, err = job(
        capsys, "run", "--fleet", "training", "--nodes", "2", "--name", "bert-base", "--as-user", "alice",
        "--", "python3", "/fsx/code/train_ddp.py", "--steps", "2000",
    )  # fmt: skip
    assert (code, out) == (0, "17\n"), err
    assert "submitting to Slurm partition training as alice (account vision)" in err
    (lines,) = login.scripts
    version = load_environment(ENV, CONFIG_DIR).slurm.slurm_version  # type: ignore[union-attr]
    assert lines[:2] == [
        "set -euo pipefail",
        f"export PATH=/opt/aws/pcs/scheduler/slurm-{version}/bin:/usr/local/bin:/usr/bin:/bin",
    ]
    assert lines[2:] == [
        "runuser -u alice -- mkdir -p /fsx/jobs/bert-base",
        "runuser -u alice -- sbatch --parsable --partition=training --account=vision --nodes=2 --job-name=bert-base "
        "--chdir=/fsx/jobs/bert-base --output=/fsx/jobs/bert-base/%x-%j.out "
        "--export=ALL,TRAIN_SCRIPT=/fsx/code/train_ddp.py /opt/gpu-platform/examples/train_ddp.sbatch --steps 2000",
    ]


def test_status_shows_the_gpu_hours_from_accounting(login: FakeLogin, capsys, monkeypatch) -> None:
    code, out, err = job(capsys, "status", "17", "--as-user", "alice", "--json")
    assert code == 0, err
    (row,) = json.loads(out)["nodes"]
    assert (row["state"], row["nodes"], row["gpus"], row["gpu_hours"], row["account"]) == (
        "RUNNING", "training-1,training-2", 16, 24.0, "vision",
    )  # fmt: skip
    assert login.scripts[-1][-1].startswith("runuser -u alice -- sacct --parsable2 --noheader -X --format=JobID,")
    monkeypatch.setenv("COLUMNS", "120")
    code, out, _ = job(capsys, "status", "17", "--as-user", "alice")
    header, row = (line.split() for line in out.splitlines() if "GPU-hours" in line or "RUNNING" in line)
    assert header == ["nodes", "state", "exit", "code", "started", "at", "(UTC)", "elapsed", "GPUs", "GPU-hours"]
    assert row == ["training-1,training-2", "RUNNING", "-", "2026-01-05", "10:00:03", "01:30:00", "16", "24.00"]


def test_status_of_a_failed_job_exits_1(login: FakeLogin, capsys) -> None:
    login.status = GPU_JOB.replace("|RUNNING|0:0|", "|FAILED|1:0|")
    code, out, _ = job(capsys, "status", "17", "--as-user", "alice", "--json")
    (row,) = json.loads(out)["nodes"]
    assert (code, row["state"], row["result"], row["exit_code"]) == (1, "FAILED", "failed", 1)


def test_cancel_runs_scancel_as_the_user_and_reads_the_state_after(login: FakeLogin, capsys) -> None:
    code, out, err = job(capsys, "cancel", "2", "--as-user", "bob", "--json")
    assert code == 0, err
    assert json.loads(out)["nodes"][0]["state"] == "CANCELLED"
    assert login.scripts[-1][2] == "runuser -u bob -- scancel 2"
    login.status = GPU_JOB  # scancel answered, the job still running: exit 1, as a node left running
    login.answer = lambda lines: GPU_JOB  # type: ignore[method-assign]
    assert job(capsys, "cancel", "17", "--as-user", "alice")[0] == 1


def test_list_has_the_slurm_jobs_newest_first(login: FakeLogin, capsys) -> None:
    code, out, err = job(capsys, "list", "--as-user", "alice", "--json")
    assert code == 0, err
    listed = json.loads(out)
    assert [j["job"] for j in listed][-1] == "17"  # started 2026-01-05, before the recorded job
    assert listed[0]["job"] == "1" and listed[0]["status"] == "COMPLETED" and listed[0]["instance_ids"] == ["a,b"]
    assert listed[-1]["parameters"]["GpuHours"] == "24.00"


def test_logs_prints_the_output_file_line_by_line(login: FakeLogin, capsys) -> None:
    code, out, err = job(capsys, "logs", "17", "--as-user", "alice")
    assert (code, out) == (0, "step 1 loss 2.5\nstep 2 lo\n"), err
    assert "runuser -u alice -- tail -c +1 /fsx/jobs/bert-base/bert-base-17.out" in login.scripts[-1][-1]


def test_logs_follow_reads_in_pieces_until_the_job_has_ended(login: FakeLogin, capsys) -> None:
    first = "".join(f"line {i:05d}\n" for i in range(2000))  # 22,000 bytes: two reads
    login.file = first + "epoch 1 do"
    ended = GPU_JOB.replace("|RUNNING|", "|COMPLETED|")
    login.later = [(GPU_JOB, login.file), (ended, first + "epoch 1 done\nepoch 2 done\n")]
    code, out, err = job(capsys, "logs", "17", "--as-user", "alice", "--follow")
    assert code == 0, err
    assert out == first + "epoch 1 done\nepoch 2 done\n"
    reads = [lines[-1] for lines in login.scripts if "tail -c" in lines[-1]]
    assert [re.search(r"tail -c (\+\d+)", r).group(1) for r in reads] == ["+1", "+16001", "+22011", "+22027"]  # type: ignore[union-attr]


def test_no_running_login_node_is_one_line_with_the_fix(login: FakeLogin, capsys) -> None:
    ec2 = boto3.session.Session(region_name=REGION).client("ec2")
    tagged = [{"Name": "tag:aws:pcs:compute-node-group-id", "Values": [LOGIN_GROUP]}]
    ids = [i["InstanceId"] for r in ec2.describe_instances(Filters=tagged)["Reservations"] for i in r["Instances"]]
    ec2.stop_instances(InstanceIds=ids)
    code, out, err = job(capsys, "status", "17", "--as-user", "alice")
    assert (code, out, login.scripts) == (2, "", []) and err.count("\n") == 1
    assert (
        f"no running login node in PCS cluster {CLUSTER['id']} (compute node groups in no queue: {LOGIN_GROUP})" in err
    )
    assert "fix: wait until PCS has started it" in err


def test_without_accounting_the_reading_commands_say_so(login: FakeLogin, capsys, tmp_path: Path) -> None:
    text = (CONFIG_DIR / "hpc.yaml").read_text().replace("accounting: true", "accounting: false")
    (tmp_path / "hpc.yaml").write_text(text)
    for argv in (("status", "17"), ("list",), ("logs", "17"), ("cancel", "17")):
        code, out, err = run_cli(capsys, "job", *argv, "--env", ENV, "--config-dir", str(tmp_path), "--as-user", "bob")
        assert (code, out) == (2, "") and "slurm.accounting is false" in err and "fix: set slurm.accounting" in err
    assert login.scripts == []


def test_the_caller_is_mapped_to_a_user_or_told_to_pass_as_user(login: FakeLogin, capsys) -> None:
    code, out, err = job(capsys, "status", "17")  # moto's caller is arn:aws:sts::...:user/moto
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert "'moto' is not a user of" in err and "fix: pass --as-user" in err
    assert caller_name("arn:aws:sts::1:assumed-role/AWSReservedSSO_Train_1a/Alice@example.com") == "alice"
    assert caller_name("arn:aws:iam::1:user/bob") == "bob"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("status", "17", "--as-user", "mallory"), "--as-user: 'mallory' is not a user of"),
        (("run", "--fleet", "training", "--", "bash", "x.sh"), "is not 'python3 SCRIPT.py ARGS'"),
        (("run", "--fleet", "training", "--resume", "17"), "--resume: on a Slurm fleet Slurm requeues the job"),
        (("run", "--fleet", "inference", "--", "python3", "a.py"), "inference fleet, jobs run on training"),
    ],
)
def test_mistakes_are_one_line_before_any_credentials(
    capsys, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, argv: tuple[str, ...], expected: str
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    code, out, err = job(capsys, *argv)
    assert (code, out) == (2, "") and err.count("\n") == 1 and expected in err, err


def test_the_ssm_path_takes_no_user_and_no_name_of_digits_in_a_slurm_environment(capsys, monkeypatch) -> None:
    slurm_env: Any = SimpleNamespace(name=ENV, slurm=object())
    with pytest.raises(JobError, match="'123' is digits only, which in hpc names a Slurm job; fix: add a letter"):
        check_ssm_run(slurm_env, None, "training", "123")
    with pytest.raises(JobError, match="--as-user: training is not a Slurm fleet"):
        check_ssm_run(slurm_env, "alice", "training", None)
    check_ssm_run(slurm_env, None, "training", "bert-123")
    check_ssm_run(SimpleNamespace(name="staging", slurm=None), None, "training", "123")
    code, out, err = run_cli(
        capsys, "job", "status", "x", "--env", "staging", "--config-dir", str(TEST_CONFIG_DIR), "--as-user", "alice"
    )
    assert (code, out) == (2, "") and "has no slurm section, and only Slurm jobs run as a user" in err

"""``gpu-platform job list|status|cancel|logs`` against moto: the job document's command history, the nodes'
answers, the job's log streams; more than 50 nodes; credentials and account problems."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from ops.job.context import open_context
from ops.job.history import launches
from ops.job.remote import comment_for, send
from tests.ops.helpers import run_cli
from tests.ops.job.fakes import ENV, STARTED_AT, FakeNodes, deploy
from tests.synth import TEST_CONFIG_DIR

JOBS_GROUP = "/gpu-platform/staging/jobs"


def job(capsys: pytest.CaptureFixture[str], subcommand: str, *args: str) -> tuple[int, str, str]:
    return run_cli(capsys, "job", subcommand, "--env", ENV, "--config-dir", str(TEST_CONFIG_DIR), *args)


def start(capsys: pytest.CaptureFixture[str], name: str, *extra: str) -> None:
    code, _, err = job(capsys, "run", "--fleet", "training", "--name", name, *extra, "--", "python3", "train.py")
    assert code == 0, err


def test_list_groups_the_start_commands_by_job(aws, nodes: FakeNodes, capsys) -> None:
    _, (a, b) = deploy(aws, 2)
    start(capsys, "first", "--nodes", "1")
    start(capsys, "second")
    assert job(capsys, "cancel", "second")[0] == 0
    code, _, err = job(capsys, "run", "--fleet", "training", "--resume", "second")  # a second launch
    assert code == 0, err

    code, out, err = job(capsys, "list", "--json")

    assert code == 0, err
    listed = json.loads(out)
    assert [j["job"] for j in listed] == ["second", "first"]  # newest first
    second, first = listed
    assert (second["launches"], first["launches"]) == (2, 1)
    assert (second["instance_ids"], first["instance_ids"]) == ([a, b], [a])
    assert first["parameters"]["Command"] == "python3 train.py" and first["parameters"]["Nodes"] == "1"
    code, out, _ = job(capsys, "list")
    assert code == 0 and "first" in out and "second" in out and "python3 train.py" in out


def test_list_without_jobs(aws, nodes, capsys) -> None:
    assert job(capsys, "list") == (0, "no jobs\n", "")


def test_status_reads_each_nodes_unit_from_the_runners_json_line(aws, nodes: FakeNodes, capsys) -> None:
    _, (a, b) = deploy(aws, 2)
    start(capsys, "bert")
    nodes.set_state(b, "bert", "failed", "exit-code", 1)

    code, out, err = job(capsys, "status", "bert", "--json")

    assert code == 1, err  # a node failed
    by_node = {n["instance_id"]: n for n in json.loads(out)["nodes"]}
    assert by_node[a] == {
        "job": "bert",
        "instance_id": a,
        "unit": "gpu-job-bert.service",
        "state": "active",
        "result": None,
        "exit_code": None,
        "started_at": STARTED_AT,
    }
    assert (by_node[b]["state"], by_node[b]["result"], by_node[b]["exit_code"]) == ("failed", "exit-code", 1)
    code, out, _ = job(capsys, "status", "bert")
    assert code == 1 and a in out and "failed" in out and "exit-code" in out


def test_status_of_a_node_that_is_gone_comes_from_ec2(aws, nodes: FakeNodes, capsys) -> None:
    fleet, (a, b) = deploy(aws, 2)
    start(capsys, "bert")
    aws.client("ec2").terminate_instances(InstanceIds=[a])
    code, out, _ = job(capsys, "status", "bert", "--json")
    states = {n["instance_id"]: (n["state"], n["result"]) for n in json.loads(out)["nodes"]}
    assert code == 1 and states == {a: ("unknown", "node terminated"), b: ("active", None)}
    assert fleet.commands("status")[-1]["InstanceIds"] == [b]  # SendCommand only to a running node


def test_cancel_stops_the_job_on_its_nodes(aws, nodes: FakeNodes, capsys) -> None:
    fleet, (a, b) = deploy(aws, 2)
    start(capsys, "bert")
    code, out, err = job(capsys, "cancel", "bert", "--json")
    assert code == 0, err
    (stop,) = fleet.commands("stop")
    assert sorted(stop["InstanceIds"]) == [a, b]
    assert {n["state"] for n in json.loads(out)["nodes"]} == {"inactive"}
    assert {nodes.report("bert", i)["state"] for i in (a, b)} == {"inactive"}


def test_cancel_succeeds_past_a_node_that_is_gone_and_fails_where_the_job_stays(
    aws, nodes: FakeNodes, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet, (a, b) = deploy(aws, 2)
    start(capsys, "bert")
    aws.client("ec2").terminate_instances(InstanceIds=[a])
    code, out, _ = job(capsys, "cancel", "bert", "--json")
    assert code == 0 and fleet.commands("stop")[-1]["InstanceIds"] == [b]
    assert {n["instance_id"]: n["state"] for n in json.loads(out)["nodes"]} == {a: "unknown", b: "inactive"}
    start(capsys, "gpt")
    monkeypatch.setattr(FakeNodes, "run", lambda _self, _i, _p: ("Failed", 1, "", "systemctl: unit hangs"))
    code, out, _ = job(capsys, "cancel", "gpt", "--json")  # the stop failed on b: the job may still run there
    (node,) = json.loads(out)["nodes"]
    assert code == 1 and (node["state"], node["result"]) == ("unknown", "Failed (exit 1): systemctl: unit hangs")


def test_a_job_of_more_than_50_nodes_takes_several_commands_and_stays_one_launch(aws, nodes) -> None:
    context = open_context(ENV, TEST_CONFIG_DIR)
    ids = [f"i-{n:017x}" for n in range(1, 121)]
    parameters = {"Action": "start", "JobId": "big", "Nodes": "120", "Command": "true"}
    sent = send(context, ids, parameters, "big")
    assert len(set(sent.values())) == 3  # 50 + 50 + 20
    (launch,) = launches(context)["big"]
    assert launch.instance_ids == tuple(ids) and launch.nodes == 120


def test_the_comment_fits_sendcommands_100_characters() -> None:
    long = "j" * 128
    assert comment_for("bert") == "gpu-platform job bert"
    assert len(comment_for(long)) == 100 and comment_for(long).startswith("gpu-platform job jjj")


def put(aws, stream: str, *lines: tuple[int, str]) -> None:
    client = aws.client("logs")
    if not client.describe_log_streams(logGroupName=JOBS_GROUP, logStreamNamePrefix=stream)["logStreams"]:
        client.create_log_stream(logGroupName=JOBS_GROUP, logStreamName=stream)
    client.put_log_events(
        logGroupName=JOBS_GROUP, logStreamName=stream, logEvents=[{"timestamp": t, "message": m} for t, m in lines]
    )


def test_logs_prints_the_jobs_streams_in_time_order(aws, nodes, capsys) -> None:
    _, (a, b) = deploy(aws, 2)
    start(capsys, "bert")
    aws.client("logs").create_log_group(logGroupName=JOBS_GROUP)
    now = int(time.time() * 1000)
    put(aws, f"bert/{a}", (now, "step 1 loss 2.3"), (now + 2000, "step 2 loss 2.1"))
    put(aws, f"bert/{b}", (now + 1000, "rank 8 ready"))
    put(aws, f"bert2/{a}", (now, "another job"))  # a name that starts like the job's

    code, out, err = job(capsys, "logs", "bert")

    assert code == 0, err
    lines = out.splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [
        f"{a} step 1 loss 2.3",
        f"{b} rank 8 ready",
        f"{a} step 2 loss 2.1",
    ]
    assert lines[0].split(" ")[0] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now / 1000))


def test_logs_follow_prints_new_lines_until_no_node_runs_the_job(
    aws, nodes: FakeNodes, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, (a, b) = deploy(aws, 2)
    start(capsys, "bert")
    aws.client("logs").create_log_group(logGroupName=JOBS_GROUP)
    now = int(time.time() * 1000)
    put(aws, f"bert/{a}", (now, "epoch 1"))
    polls: list[float] = []

    def later(seconds: float) -> None:  # the job writes between two polls, then ends on both nodes
        polls.append(seconds)
        if len(polls) == 2:
            put(aws, f"bert/{b}", (now + 5000, "epoch 2"), (now + 6000, "done"))
            for node in (a, b):
                nodes.set_state(node, "bert", "inactive", "success", 0)

    monkeypatch.setattr("ops.job.logs.time.sleep", later)
    code, out, err = job(capsys, "logs", "bert", "--follow")

    assert code == 0, err
    assert [line.split(" ", 1)[1] for line in out.splitlines()] == [f"{a} epoch 1", f"{b} epoch 2", f"{b} done"]
    assert len(polls) >= 2


def test_logs_follow_reads_a_nodes_older_events_shipped_after_another_nodes_newer_ones(
    aws, nodes: FakeNodes, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, (a, b) = deploy(aws, 2)
    start(capsys, "bert")
    aws.client("logs").create_log_group(logGroupName=JOBS_GROUP)
    now = int(time.time() * 1000)
    put(aws, f"bert/{a}", (now, "a: epoch 1"), (now + 9000, "a: epoch 2"))
    polls: list[float] = []

    def later(seconds: float) -> None:
        polls.append(seconds)
        if len(polls) == 1:  # b's shipper was behind: its lines, older than a's last one, arrive now
            put(aws, f"bert/{b}", (now + 3000, "b: epoch 1"), (now + 8000, "b: epoch 2"))
        if len(polls) == 2:  # one more line of a, and a line of b older than the window, then the job ends
            put(aws, f"bert/{a}", (now + 9000, "a: done"))
            put(aws, f"bert/{b}", (now + 9000 - 61_000, "b: a line from before the window"))
            for node in (a, b):
                nodes.set_state(node, "bert", "inactive", "success", 0)

    monkeypatch.setattr("ops.job.logs.time.sleep", later)
    code, out, err = job(capsys, "logs", "bert", "--follow")

    assert code == 0, err
    assert [line.split(" ", 2)[2] for line in out.splitlines()] == [
        "a: epoch 1",
        "a: epoch 2",
        "b: epoch 1",
        "b: epoch 2",
        "a: done",  # the same millisecond as a line already printed, yet a new event: printed once
    ]  # the line that arrived more than LATE_EVENTS_MS behind the newest is left to `job logs` without --follow


def test_logs_without_the_log_group_names_the_stack(aws, nodes, capsys) -> None:
    code, out, err = job(capsys, "logs", "bert")
    assert (code, out) == (2, "")
    assert err == (
        f"log group {JOBS_GROUP} not found in us-east-1; fix: deploy the environment's staging-Security stack "
        "(it creates the group)\n"
    )


@pytest.mark.parametrize("command", [["list"], ["status", "bert"], ["run", "--fleet", "training", "--", "true"]])
def test_without_credentials_a_job_command_says_what_to_set(
    command: list[str], tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ops.cli import NO_CREDENTIALS

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name in ("AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"):
        monkeypatch.setenv(name, str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert job(capsys, *command) == (2, "", NO_CREDENTIALS + "\n")


def test_credentials_of_another_account_are_refused(aws, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOTO_ACCOUNT_ID", "999999999999")
    code, _, err = job(capsys, "list")
    assert code == 2 and "account: the credentials are for account 999999999999, not 222222222222; fix: " in err


def test_access_denied_names_the_permissions(aws, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.exceptions import ClientError

    def denied(*_: Any, **__: Any) -> Any:
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not allowed"}}, "ListCommands")

    monkeypatch.setattr("ops.job.history.start_commands", denied)
    code, _, err = job(capsys, "list")
    assert code == 2 and err.startswith("AWS: ListCommands failed (AccessDeniedException: not allowed); fix: ")
    assert "ssm:SendCommand" in err and err.count("\n") == 1


@pytest.mark.parametrize("command", ["run", "list", "status", "cancel", "logs"])
def test_every_job_subcommand_has_help_with_an_example(command: str, capsys) -> None:
    code, out, _ = run_cli(capsys, "job", command, "--help")
    assert code == 0 and f"Example: gpu-platform job {command}" in out

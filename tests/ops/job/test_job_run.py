"""``gpu-platform job run`` against moto: from the fleet's group to SendCommand on the chosen nodes, with the
job document's parameters, through the nodes' answers to the printed job id; resume; the refusals."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from tests.ops.helpers import config_dir, run_cli
from tests.ops.job.fakes import DOCUMENT, ENV, GROUP, PLACEMENT_GROUP, FakeNodes, deploy
from tests.synth import TEST_CONFIG_DIR

ARGV = ["python3", "train.py", "--lr", "0.1", "--note", "it's a test; rm -rf /"]


def job_run(capsys: pytest.CaptureFixture[str], *args: str, folder: Path = TEST_CONFIG_DIR) -> tuple[int, str, str]:
    return run_cli(capsys, "job", "run", "--env", ENV, "--fleet", "training", "--config-dir", str(folder), *args)


def parameters(command: dict[str, Any]) -> dict[str, str]:
    return {name: values[0] for name, values in command["Parameters"].items()}


def test_run_starts_torchrun_on_the_healthy_nodes_of_the_placement_group(aws, nodes: FakeNodes, capsys) -> None:
    fleet, (a, b) = deploy(aws, 2)
    sick = fleet.launch()
    aws.client("autoscaling").set_instance_health(InstanceId=sick, HealthStatus="Unhealthy")
    stray = fleet.launch(placement_group=None)

    code, out, err = job_run(capsys, "--", *ARGV)

    assert code == 0, err
    job_id = out.strip()
    assert out == job_id + "\n"  # the id alone on stdout, for JOB=$(gpu-platform job run ...)
    assert re.fullmatch(r"training-\d{8}-\d{6}-[0-9a-f]{4}", job_id)
    (command,) = fleet.commands()
    assert command["DocumentName"] == DOCUMENT
    assert sorted(command["InstanceIds"]) == [a, b]
    assert command["Comment"] == f"gpu-platform job {job_id}"
    rendezvous = min(a, b)
    assert parameters(command) == {
        "Action": "start",
        "JobId": job_id,
        "Nodes": "2",
        "ProcsPerNode": "8",  # p4d.24xlarge: 8 GPUs in config/catalog/gpu_instances.csv
        "RendezvousEndpoint": f"{fleet.ip(rendezvous)}:29400",
        "WorkingDirectory": f"/fsx/jobs/{job_id}",
        "MaxRestarts": "3",
        "Command": shlex.join(ARGV),
    }
    assert shlex.split(parameters(command)["Command"]) == ARGV  # what the runner splits back
    assert {nodes.report(job_id, i)["state"] for i in (a, b)} == {"active"}
    assert f"left out {sick}: InService, Unhealthy" in err
    assert f"left out {stray}: outside the placement group {PLACEMENT_GROUP} (in none)" in err
    assert "Traceback" not in err


def test_nodes_name_workdir_and_the_jobs_section_reach_the_document(aws, nodes, capsys, tmp_path) -> None:
    def jobs(doc: dict[str, Any]) -> None:
        doc["jobs"] = {"rendezvous_port": 29500, "max_restarts": 7}
        doc["fleets"][0]["capacity"]["max"] = 4

    fleet, ids = deploy(aws, 3)
    folder = config_dir(tmp_path, ENV, jobs)
    code, out, err = job_run(capsys, "--nodes", "2", "--name", "bert.v2_run", "--workdir", "/fsx/exp/bert", "python3",
                             "train.py", folder=folder)  # fmt: skip
    assert (code, out) == (0, "bert.v2_run\n"), err
    (command,) = fleet.commands()
    assert sorted(command["InstanceIds"]) == ids[:2]  # lowest instance ids first
    p = parameters(command)
    assert (p["Nodes"], p["MaxRestarts"], p["WorkingDirectory"]) == ("2", "7", "/fsx/exp/bert")
    assert p["RendezvousEndpoint"] == f"{fleet.ip(ids[0])}:29500"
    assert p["Command"] == "python3 train.py"  # no -- needed: options stop at the first argument


def test_an_instance_id_order_makes_the_rendezvous_the_lowest_id(aws, nodes, capsys) -> None:
    fleet, ids = deploy(aws, 2)
    code, _, err = job_run(capsys, "--", "true")
    assert code == 0, err
    endpoint = parameters(fleet.commands()[0])["RendezvousEndpoint"]
    assert endpoint == f"{fleet.ip(min(ids))}:29400" and endpoint != f"{fleet.ip(max(ids))}:29400"


def test_too_few_nodes_says_how_many_and_how_to_get_more(aws, nodes, capsys) -> None:
    fleet, _ = deploy(aws, 1)
    fleet.launch(placement_group=None)
    code, out, err = job_run(capsys, "--nodes", "2", "--", "true")
    assert (code, out) == (1, "")
    assert err.count("\n") == 1
    assert err.startswith("fleet training: 1 node InService and Healthy, the job needs 2 (left out: ")
    assert f"aws autoscaling set-desired-capacity --auto-scaling-group-name {GROUP} --desired-capacity 2" in err
    code, _, err = job_run(capsys, "--nodes", "3", "--", "true")  # staging: capacity.max 2, known without AWS
    assert code == 2 and "fix: raise fleets[training].capacity.max to at least 3 and deploy" in err
    assert fleet.commands() == []  # nothing was sent


def test_an_undeployed_fleet_names_the_stack(aws, nodes, capsys) -> None:
    code, _, err = job_run(capsys, "--", "true")
    assert code == 2 and err == (
        f"Auto Scaling group {GROUP} not found in 222222222222 us-east-1; fix: deploy the environment "
        "(staging-Fleets)\n"
    )


@pytest.mark.parametrize(
    ("fleet", "expected"),
    [
        (
            "inference",
            "fleets: inference is an inference fleet, jobs run on training fleets; fix: use one of: training",
        ),
        ("trainig", "fleets: no fleet named 'trainig'; fix: use a training fleet of the file (training)"),
    ],
)
def test_a_fleet_that_is_not_a_training_fleet_is_refused(aws, nodes, capsys, fleet: str, expected: str) -> None:
    code, out, err = run_cli(capsys, "job", "run", "--env", ENV, "--fleet", fleet, "--config-dir", str(TEST_CONFIG_DIR),
                             "--", "true")  # fmt: skip
    assert (code, out) == (2, "")
    assert err.endswith(f"staging.yaml: {expected}\n") and err.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--name", "-bad", "--", "true"], "--name: '-bad' is not a job name; fix: 1-128 characters"),
        (["--name", "a/b", "--", "true"], "--name: 'a/b' is not a job name"),
        (["--workdir", "/home/me", "--", "true"], "--workdir: '/home/me' is not below /fsx; fix: "),
        ([], "no command; fix: give the job's command after --"),
        (["--", "python3", "-c", "print(1)\nprint(2)"], "the command holds a line break; fix: "),
        (["--", "x" * 4097], "the command is 4097 characters, the job document takes at most 4096"),
    ],
)
def test_bad_input_is_one_line_before_anything_is_sent(aws, nodes, capsys, args: list[str], expected: str) -> None:
    fleet, _ = deploy(aws, 1)
    code, out, err = job_run(capsys, *args)
    assert (code, out) == (2, "") and err.startswith(expected) and err.count("\n") == 1
    assert fleet.commands() == []


@pytest.mark.parametrize(
    ("first", "second", "procs"),
    [
        ("g6.xlarge", "g6.2xlarge", "1"),  # dev's training fleet: one L4 each (config/catalog/gpu_instances.csv)
        ("p4d.24xlarge", "p4de.24xlarge", "8"),  # eight A100 each, 40 and 80 GiB
    ],
)
def test_nodes_of_types_with_the_same_gpu_count_run_one_job(aws, nodes, capsys, first, second, procs) -> None:
    fleet, _ = deploy(aws, 0)
    pair = sorted([fleet.launch(first), fleet.launch(second)])
    code, out, err = job_run(capsys, "--", "true")
    assert code == 0, err
    (command,) = fleet.commands()
    assert sorted(command["InstanceIds"]) == pair
    assert (parameters(command)["Nodes"], parameters(command)["ProcsPerNode"]) == ("2", procs)
    assert {nodes.report(out.strip(), i)["state"] for i in pair} == {"active"}


def test_nodes_whose_types_have_different_gpu_counts_are_refused(aws, nodes, capsys) -> None:
    fleet, _ = deploy(aws, 1)
    fleet.launch("g5.12xlarge")
    code, out, err = job_run(capsys, "--", "true")
    assert (code, out) == (1, "")
    assert err == (
        "the chosen nodes' instance types have different GPU counts (g5.12xlarge: 4 GPUs, 1 node; p4d.24xlarge: "
        "8 GPUs, 1 node); torchrun starts the same number of processes on every node; fix: keep instance types "
        "of one GPU count in the fleet's instance_types (or replace the odd nodes: aws autoscaling "
        "terminate-instance-in-auto-scaling-group)\n"
    )
    assert fleet.commands() == []


def test_a_node_that_fails_to_start_stops_the_job_on_the_others(aws, nodes: FakeNodes, capsys) -> None:
    fleet, (a, b) = deploy(aws, 2)
    nodes.refuse.add(b)
    code, out, err = job_run(capsys, "--name", "j1", "--", "true")
    assert (code, out) == (1, "")
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"job j1 did not start on {b}: Failed (exit 1): refused: nvidia-smi reports no GPU; ")
    assert f"stopped it on {a}; fix: remove the cause, then gpu-platform job run --env staging --fleet training " \
           "--resume j1" in line  # fmt: skip
    (stop,) = fleet.commands("stop")
    assert stop["InstanceIds"] == [a] and parameters(stop) == {"Action": "stop", "JobId": "j1"}
    assert nodes.report("j1", a)["state"] == "inactive"


def test_run_polls_each_node_until_its_invocation_ends(aws, nodes: FakeNodes, capsys) -> None:
    deploy(aws, 2)
    nodes.polls_in_progress = 3
    code, out, err = job_run(capsys, "--name", "slow", "--", "true")
    assert (code, out) == (0, "slow\n"), err
    assert sorted(nodes.polled.values()) == [4, 4]  # three InProgress answers, then Success
    assert err.count(" Success unit active") == 2


def test_resume_relaunches_the_job_on_the_nodes_healthy_now(aws, nodes: FakeNodes, capsys) -> None:
    fleet, (a, b) = deploy(aws, 2)
    assert job_run(capsys, "--name", "bert", "--workdir", "/fsx/exp/bert", "--", *ARGV)[0] == 0
    # a's Spot capacity is reclaimed: the group loses it, torchrun on b gives up, a new node joins.
    aws.client("autoscaling").detach_instances(InstanceIds=[a], AutoScalingGroupName=GROUP,
                                               ShouldDecrementDesiredCapacity=True)  # fmt: skip
    aws.client("ec2").terminate_instances(InstanceIds=[a])
    nodes.set_state(b, "bert", "failed", "exit-code", 1)
    c = fleet.launch()

    code, out, err = job_run(capsys, "--resume", "bert")

    assert (code, out) == (0, "bert\n"), err
    first, again = fleet.commands("start")
    assert sorted(again["InstanceIds"]) == sorted([b, c])
    before, after = parameters(first), parameters(again)
    for kept in ("JobId", "Command", "WorkingDirectory", "ProcsPerNode", "Nodes", "MaxRestarts"):
        assert after[kept] == before[kept]
    assert after["RendezvousEndpoint"] == f"{fleet.ip(min(b, c))}:29400"
    assert "resuming job bert on 2 node(s)" in err
    # Before relaunching, the job's state was asked on its surviving node only (a is terminated).
    (status,) = fleet.commands("status")
    assert status["InstanceIds"] == [b]


def test_resume_is_refused_while_the_job_still_runs(aws, nodes, capsys) -> None:
    fleet, (a, b) = deploy(aws, 2)
    assert job_run(capsys, "--name", "bert", "--", "true")[0] == 0
    code, _, err = job_run(capsys, "--resume", "bert")
    assert code == 1 and err == (
        f"job bert still runs on {a}, {b}; fix: gpu-platform job cancel bert --env staging, then resume it\n"
    )
    assert len(fleet.commands("start")) == 1


def test_resume_takes_nothing_but_the_job(aws, nodes, capsys) -> None:
    code, _, err = job_run(capsys, "--resume", "bert", "--nodes", "2", "--", "python3", "other.py")
    assert code == 2 and err.startswith("--resume reuses the job's command, node count, id and working directory; ")
    assert "leave out COMMAND, --nodes" in err


def test_resume_of_an_unknown_job_says_how_to_list_them(aws, nodes, capsys) -> None:
    deploy(aws, 1)
    code, _, err = job_run(capsys, "--resume", "nope")
    assert code == 2 and err.startswith(f"no job 'nope' among the commands of {DOCUMENT} in us-east-1")
    assert err.rstrip().endswith("fix: see the jobs with gpu-platform job list --env staging")

"""One training job followed from the operator's command to the workers on two nodes and back.

``gpu-platform job run --env dev --fleet training --nodes 2 -- python3 train.py ...`` runs in-process against
moto (the dev training fleet's group: two g6.xlarge nodes in its placement group). Its SendCommand goes to
a stand-in SSM agent on each chosen node, which does what Run Command does with the job document: it looks
the document up by the command's DocumentName (created in moto from the JobDocument construct with dev's
``jobs:`` settings), holds every parameter to its allowedPattern, fills in the defaults, and runs the
document's own shell step with bash, each parameter as ``SSM_<Name>`` (``interpolationType: ENV_VAR``) and
the install prefix mapped to the repo's scripts/node. From there everything is real except systemd and
torchrun: ``jobs.runner start`` -> the stand-in systemd-run -> the supervisor -> the stand-in torchrun -> the
stand-in workers (tests/scripts/node/training_job.py). The runner's JSON line becomes the node's invocation output,
which ``job status`` / ``job cancel`` read; the supervisor ships the job's output through a loopback endpoint
into moto's stream ``<job>/<instance-id>``, which ``job logs`` reads. The second test sends the checkpoint
signal with the real checkpoint-hook.sh and relaunches the job with ``job run --resume``.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.ssm.models import SimpleSystemManagerBackend

from config.catalog import get_instance_type
from config.loader import load_environment
from config.naming import ResourceNames
from gpu_constructs.fleet.job_document import JobDocument
from gpu_constructs.fleet.render.user_data import INSTALL_PREFIX
from tests.gpu_constructs.helpers import bare_stack, only, template
from tests.ops.helpers import run_cli
from tests.ops.job.fakes import Fleet, deploy
from tests.scripts.node.helpers import NODE_DIR, FakeImds
from tests.scripts.node.jobs.support import (
    LOG_GROUP,
    REGION,
    FakeLogs,
    JobNode,
    events,
    job_node_on,
    kill_units,
    run_hook,
)
from tests.scripts.node.training_job import write_worker
from tests.synth import TEST_CONFIG_DIR

pytestmark = pytest.mark.slow  # two nodes' worth of real runner, supervisor and log shipping: about 6 s each

ENV = "dev"
CONFIG = load_environment(ENV, TEST_CONFIG_DIR)
NAMES = ResourceNames.of(CONFIG)
INSTANCE_TYPE = "g6.xlarge"  # dev's training fleet: config/fleets training.instance_types[0]
ARGS = ["--epochs", "1"]


@dataclass
class Cluster:
    fleet: Fleet
    nodes: dict[str, JobNode]  # instance id -> its node, in id order
    logs: FakeLogs
    script: Path  # the user's train.py (the stand-in worker), at the same path on every node
    refused: list[str]  # parameters SendCommand would have refused


def job_document_content() -> dict[str, Any]:
    """The document as the Fleets stack makes it for dev (stacks/fleet_stack.py: JobDocument with env.jobs)."""
    stack = bare_stack()
    JobDocument(
        stack,
        "Jobs",
        document_name=NAMES.job_document,
        rendezvous_port=CONFIG.jobs.rendezvous_port,
        max_restarts=CONFIG.jobs.max_restarts,
    )
    return only(template(stack), "AWS::SSM::Document")[1]["Properties"]["Content"]


def run_document(cluster: Cluster, node: JobNode, name: str, parameters: dict[str, list[str]]) -> tuple:
    """What the SSM agent does with a command of document ``name``: (Status, ResponseCode, stdout, stderr)."""
    document = boto3.client("ssm", region_name=REGION).get_document(Name=name)
    content = json.loads(document["Content"])
    values = {key: spec["default"] for key, spec in content["parameters"].items() if "default" in spec}
    values.update({key: value for key, (value,) in parameters.items()})
    for key, spec in content["parameters"].items():
        if key not in values or not re.fullmatch(spec["allowedPattern"], values[key]):
            cluster.refused.append(key)
    (step,) = content["mainSteps"]
    script = "\n".join(step["inputs"]["runCommand"])
    assert script.count(INSTALL_PREFIX) == 1, script
    env = {
        "PATH": f"{node.bin_dir}:/usr/bin:/bin",
        "FAKE_SYSTEMD_STATE": str(node.state_file),
        **node.settings_env(),
        **node.logs_env(),
        **node.extra_env,
        **{f"SSM_{key}": value for key, value in values.items()},
    }
    done = subprocess.run(["bash", "-c", script.replace(INSTALL_PREFIX, str(NODE_DIR))], env=env, cwd=node.root,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    return ("Success" if done.returncode == 0 else "Failed"), done.returncode, done.stdout, done.stderr


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}
    for key, value in {**env, "MOTO_ACCOUNT_ID": CONFIG.account}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    with mock_aws(), ExitStack() as stack:
        session = boto3.session.Session(region_name=REGION)
        fleet, ids = deploy(session, 2, group=NAMES.asg_name("training"), account=CONFIG.account,
                            instance_type=INSTANCE_TYPE, placement_group=f"{ENV}-training-cluster",
                            document=NAMES.job_document)  # fmt: skip
        session.client("ssm").create_document(
            Name=NAMES.job_document, Content=json.dumps(job_document_content()), DocumentType="Command",
            DocumentFormat="JSON", TargetType="/AWS::EC2::Instance",
        )  # fmt: skip
        logs = stack.enter_context(FakeLogs())
        logs.client.create_log_group(logGroupName=LOG_GROUP)
        nodes = {}
        for instance_id in ids:
            imds = stack.enter_context(FakeImds())
            imds.set("/latest/meta-data/instance-id", instance_id)
            node = nodes[instance_id] = job_node_on(tmp_path / instance_id, imds, logs)
            python3 = node.bin_dir / "python3"  # the node's python3: this interpreter (boto3 and all)
            python3.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
            python3.chmod(0o755)
            stack.callback(kill_units, node)
        script = write_worker(tmp_path).rename(tmp_path / "train.py")
        cluster = Cluster(fleet, nodes, logs, script, [])
        send = SimpleSystemManagerBackend.send_command

        def send_command(backend: SimpleSystemManagerBackend, **kwargs: Any) -> Any:
            requested = list(kwargs["instance_ids"])
            command = send(backend, **kwargs)
            # moto adds every instance of the region to a command sent without Targets; AWS runs the ids given.
            command.instance_ids = requested
            command.invocations = [i for i in command.invocations if i["InstanceId"] in command.instance_ids]
            for invocation in command.invocations:
                node = cluster.nodes[invocation["InstanceId"]]
                status, code, out, err = run_document(cluster, node, kwargs["document_name"], kwargs["parameters"])
                invocation.update(Status=status, StatusDetails=status, ResponseCode=code, StandardOutputContent=out,
                                  StandardErrorContent=err)  # fmt: skip
            return command

        monkeypatch.setattr(SimpleSystemManagerBackend, "send_command", send_command)
        yield cluster


def job(capsys: pytest.CaptureFixture[str], sub: str, *args: str) -> tuple[int, str, str]:
    return run_cli(capsys, "job", sub, "--env", ENV, "--config-dir", str(TEST_CONFIG_DIR), *args)


def parameters(command: dict[str, Any]) -> dict[str, str]:
    return {name: values[0] for name, values in command["Parameters"].items()}


def by_node(out: str) -> dict[str, tuple[str, str | None, int | None]]:
    return {n["instance_id"]: (n["state"], n["result"], n["exit_code"]) for n in json.loads(out)["nodes"]}


def shipped(cluster: Cluster, stream: str) -> list[str]:
    """The stream's messages in moto; none while the supervisor has not made the stream yet."""
    try:
        return cluster.logs.events(stream)
    except ClientError:
        return []


def start_job(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> str:
    """``job run`` of a long job on both nodes; returns its id once a worker trains on each node."""
    for node in cluster.nodes.values():
        node.worker_env(steps=100_000, every=0, step_s=0.05)  # runs until stopped; checkpoints when asked
    code, out, err = job(capsys, "run", "--fleet", "training", "--nodes", "2", "--", "python3", str(cluster.script),
                         *ARGS)  # fmt: skip
    assert code == 0 and "Traceback" not in err, err
    for node in cluster.nodes.values():
        node.wait_for("the node's worker", lambda n=node: events(n, "start"))
    return out.strip()


def test_a_job_runs_from_the_operators_command_to_the_workers_and_back(cluster: Cluster, capsys) -> None:
    job_id = start_job(cluster, capsys)
    a, b = cluster.nodes

    # The command the CLI sent: the dev job document, to the two nodes, with what the operator asked.
    (sent,) = cluster.fleet.commands()
    assert (sent["DocumentName"], sent["InstanceIds"], sent["Comment"]) == (
        NAMES.job_document, [a, b], f"gpu-platform job {job_id}"
    )  # fmt: skip
    gpus = get_instance_type(INSTANCE_TYPE).gpu_count
    endpoint = f"{cluster.fleet.ip(a)}:{CONFIG.jobs.rendezvous_port}"  # the lowest instance id's private IP
    command = ["python3", str(cluster.script), *ARGS]
    assert parameters(sent) == {
        "Action": "start", "JobId": job_id, "Nodes": "2", "ProcsPerNode": str(gpus), "RendezvousEndpoint": endpoint,
        "WorkingDirectory": f"/fsx/jobs/{job_id}", "MaxRestarts": str(CONFIG.jobs.max_restarts),
        "Command": shlex.join(command),
    }  # fmt: skip
    assert cluster.refused == []  # every value within the document's patterns

    # What each node made of it: torchrun's command line, the workers in the working directory (made on Lustre).
    for node in cluster.nodes.values():
        (torchrun,) = node.records(node.torchrun_record)
        assert torchrun["argv"] == [
            "--nnodes", "2", "--nproc-per-node", str(gpus), "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint,
            "--rdzv-id", job_id, "--max-restarts", str(CONFIG.jobs.max_restarts), *command[1:],
        ]  # fmt: skip
        assert [w["cwd"] for w in events(node, "start")] == [str(node.path(f"/fsx/jobs/{job_id}"))] * gpus
        assert events(node, "start")[0]["env"]["GPU_PLATFORM_JOB_SUPERVISED"] == "1"

    # job status: each node's runner answers for its own unit, through the same document.
    code, out, err = job(capsys, "status", job_id, "--json")
    assert code == 0, err
    assert by_node(out) == {a: ("active", "success", None), b: ("active", "success", None)}
    assert parameters(cluster.fleet.commands("status")[-1]) == {"Action": "status", "JobId": job_id}

    # job logs: the workers' lines, shipped by each node's supervisor to <job>/<instance-id>.
    line = f"rank 0: job {job_id} starting at step 0"
    for instance_id in (a, b):
        stream = NAMES.job_log_stream(job_id, instance_id)
        cluster.nodes[a].wait_for(f"{stream} in CloudWatch Logs", lambda s=stream: line in shipped(cluster, s))
    code, out, err = job(capsys, "logs", job_id)
    assert code == 0, err
    assert {i for i in (a, b) if re.search(rf"^\S+Z {i} {re.escape(line)}$", out, re.M)} == {a, b}

    # job cancel: Action=stop through the same step; the runner stops the unit, the workers save and exit.
    code, out, err = job(capsys, "cancel", job_id, "--json")
    assert code == 0, err
    (stop,) = cluster.fleet.commands("stop")
    assert (stop["InstanceIds"], parameters(stop)) == ([a, b], {"Action": "stop", "JobId": job_id})
    assert by_node(out) == {a: ("failed", "exit-code", 1), b: ("failed", "exit-code", 1)}  # torchrun, stopped
    for node in cluster.nodes.values():
        assert [e["event"] for e in node.records(node.worker_record)] == ["start", "checkpoint", "stopped"]
    code, out, _ = job(capsys, "status", job_id, "--json")
    assert code == 1 and by_node(out) == {a: ("failed", "exit-code", 1), b: ("failed", "exit-code", 1)}


def test_the_checkpoint_signal_reaches_the_jobs_workers_and_a_resume_relaunches_the_same_job(
    cluster: Cluster, capsys
) -> None:
    job_id = start_job(cluster, capsys)
    a, b = cluster.nodes
    node = cluster.nodes[a]
    supervisor = (node.pid_dir / f"{job_id}.pid").read_text().strip()
    (worker,) = events(node, "start")

    hook = run_hook(node)  # the node is told to go: the real checkpoint-hook.sh

    assert hook.returncode == 0, hook.stderr
    assert f"job {job_id}: sent SIGUSR1 to pid {supervisor}" in hook.stderr
    (saved,) = events(node, "checkpoint")
    assert saved["pid"] == worker["pid"] and saved["rank"] == 0
    assert f"new checkpoint file: {node.checkpoints / job_id / saved['path']}" in hook.stderr
    assert f"SIGUSR1 received: passed on to the workers [{worker['pid']}]" in node.job_log(job_id)
    assert events(cluster.nodes[b], "checkpoint") == []  # the other node was not asked

    assert job(capsys, "cancel", job_id)[0] == 0  # each worker saves once more on SIGTERM
    last = {i: events(n, "checkpoint")[-1]["step"] for i, n in cluster.nodes.items()}
    assert last[a] >= saved["step"]

    code, out, err = job(capsys, "run", "--fleet", "training", "--resume", job_id)

    assert (code, out) == (0, f"{job_id}\n"), err
    first, again = cluster.fleet.commands("start")
    assert again["InstanceIds"] == [a, b]
    for kept in ("JobId", "Command", "WorkingDirectory", "Nodes", "ProcsPerNode", "MaxRestarts"):
        assert parameters(again)[kept] == parameters(first)[kept], kept
    assert parameters(again)["RendezvousEndpoint"] == f"{cluster.fleet.ip(a)}:{CONFIG.jobs.rendezvous_port}"
    assert cluster.refused == []
    # The relaunched unit (same name, reset-failed) resumes each node's workers from its newest checkpoint.
    for instance_id, n in cluster.nodes.items():
        n.wait_for("the relaunched worker", lambda n=n: len(events(n, "start")) == 2)
        assert events(n, "start")[1]["step"] == last[instance_id]
    assert job(capsys, "cancel", job_id)[0] == 0

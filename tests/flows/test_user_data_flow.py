"""The fleet's user data, rendered as the Fleets stack renders it and run for real (bash): the real
AWS CLI fetches the node scripts from moto's S3 and talks to the lifecycle endpoint, IMDSv2 is the
fake one, and the real bootstrap.sh runs from the unpacked zip. Only the paths under / are moved
under the test's folder (the variables the user data reads for that)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import boto3
import pytest
from aws_cdk import aws_ec2 as ec2
from moto import mock_aws

from gpu_constructs.fleet.node_scripts import EXAMPLES_DIR
from gpu_constructs.fleet.render.node_logs import NODE_LOGS
from gpu_constructs.fleet.render.user_data import FETCH_ATTEMPTS, LOG_DIR, NodeScripts, render_user_data
from tests.flows.user_data_env import S3AndLifecycle, install_aws_cli
from tests.scripts.node.fake_aws import LifecycleFleet
from tests.scripts.node.fake_node import INSTANCE_TYPES, Node, lifecycle_call, new_node, stop_service
from tests.scripts.node.helpers import NODE_DIR, FakeImds, free_port
from tests.synth import build_once

# isort: split
# Importable once tests.scripts.node.helpers has put scripts/node on sys.path.
import layout

BUCKET = "cdk-hnb659fds-assets-111111111111-us-east-1"
KEY = "0123abcd.zip"
EXAMPLES_KEY = "4567cdef.zip"
STANDIN = Path(__file__).resolve().parents[1] / "scripts" / "node" / "serving" / "service_standin.py"


@pytest.fixture(scope="session")
def aws_cli(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CLI unpacked once per test run, whichever xdist workers run these tests (tests/synth.py build_once); its
    first start compiles its modules into that folder, for every later start of any worker."""
    return build_once(pytestconfig, tmp_path_factory, "awscli", install_aws_cli) / "aws"


def scripts_zip(folder: Path = NODE_DIR) -> bytes:
    """scripts/node (or examples/) as the stack's asset zips it (no caches, no README)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.name != "README.md":
                archive.write(path, path.relative_to(folder).as_posix())
    return buffer.getvalue()


@dataclass
class Boot:
    node: Node
    aws: S3AndLifecycle
    script: Path
    node_env: dict[str, str]

    def render(self, service_json: str | None = None) -> None:
        """The user data as the Fleets stack renders it, into ``script``."""
        user_data = ec2.UserData.for_linux()
        user_data.add_commands(
            *render_user_data(
                region=self.aws.fleet.region,
                node_env=self.node_env,
                instance_types=INSTANCE_TYPES,
                agent_config_json='{"agent": {"run_as_user": "cwagent"}}',
                scripts=NodeScripts(bucket_name=BUCKET, object_key=KEY, examples_object_key=EXAMPLES_KEY),
                service_json=service_json,
            )
        )
        self.script.write_text(user_data.render())

    def run(self) -> tuple[subprocess.CompletedProcess[str], float]:
        started = time.monotonic()
        done = subprocess.run(
            ["bash", str(self.script)], env=self.node.env, capture_output=True, text=True, timeout=180, check=False
        )
        return done, time.monotonic() - started


@pytest.fixture
def boot(tmp_path: Path, aws_cli: Path) -> Iterator[Boot]:
    with mock_aws():
        fleet = LifecycleFleet()
        s3 = boto3.client("s3", region_name=fleet.region)
        s3.create_bucket(Bucket=BUCKET)
        s3.put_object(Bucket=BUCKET, Key=KEY, Body=scripts_zip())
        s3.put_object(Bucket=BUCKET, Key=EXAMPLES_KEY, Body=scripts_zip(EXAMPLES_DIR))
        with S3AndLifecycle(fleet) as aws, FakeImds() as imds:
            node = new_node(tmp_path, aws, imds)
            node_env = dict(line.split("=", 1) for line in node.path("NODE_ENV_FILE").read_text().splitlines())
            booted = Boot(node=node, aws=aws, script=tmp_path / "user-data.sh", node_env=node_env)
            booted.render()
            for name in ("NODE_ENV_FILE", "INSTANCE_TYPES_FILE", "CLOUDWATCH_AGENT_CONFIG"):
                node.path(name).unlink()  # the user data writes them
            node.env.update(
                GPU_PLATFORM_CONFIG_DIR=str(node.etc),
                GPU_PLATFORM_NODE_DIR=str(tmp_path / "opt" / "gpu-platform" / "node"),
                GPU_PLATFORM_EXAMPLES_DIR=str(tmp_path / "opt" / "gpu-platform" / "examples"),
                GPU_PLATFORM_LOG_DIR=str(node.path("BOOTSTRAP_LOG").parent),
                AWS_CLI=str(aws_cli),
                FETCH_BACKOFF_S="0",
                PATH=f"{Path(aws_cli).parent}{os.pathsep}{node.env['PATH']}",
            )
            yield booted
            stop_service(tmp_path)


def _settled(path: Path, needle: str) -> str:
    """The file once ``needle`` is in it (tee writes it asynchronously, moments after the script ends)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if path.exists() and needle in (text := path.read_text()):
            return text
        time.sleep(0.05)
    return path.read_text() if path.exists() else ""


@pytest.mark.slow
def test_a_download_that_keeps_failing_abandons_the_launch_at_once(boot: Boot) -> None:
    boot.aws.deny_reads = 100
    done, seconds = boot.run()
    assert done.returncode == 1, done.stderr
    assert [status for _, _, status in boot.aws.object_reads] == [403] * FETCH_ATTEMPTS  # bounded retries
    assert f"attempt {FETCH_ATTEMPTS - 1} of {FETCH_ATTEMPTS}" in done.stderr
    assert boot.aws.calls == [lifecycle_call(boot.node, "ABANDON")]  # instance id from IMDSv2
    assert boot.aws.fleet.state == "Terminating"
    assert seconds < 60  # not the hook's 45-minute heartbeat timeout
    # The failure is in the file the agent ships as the bootstrap log (and still on the console).
    shipped = Path(NODE_LOGS["bootstrap"])
    assert shipped.parent == Path(LOG_DIR)
    log = _settled(boot.node.path("GPU_PLATFORM_LOG_DIR") / shipped.name, "completing the launch hook with ABANDON")
    assert f"attempt {FETCH_ATTEMPTS - 1} of {FETCH_ATTEMPTS}" in log
    assert "bootstrap complete" not in log  # the bootstrap never started


@pytest.mark.slow
def test_a_download_that_fails_once_then_succeeds_goes_on_to_the_bootstrap(boot: Boot) -> None:
    boot.aws.deny_reads = 1
    boot.node.env["FETCH_BACKOFF_S"] = "1"
    done, _ = boot.run()
    assert done.returncode == 0, done.stderr
    assert f"attempt 1 of {FETCH_ATTEMPTS}); retrying in 1 s" in done.stderr
    heads = [
        (path.split("?")[0].rsplit("/", 1)[-1], status)
        for method, path, status in boot.aws.object_reads
        if method == "HEAD"
    ]
    assert heads == [(KEY, 403), (KEY, 200), (EXAMPLES_KEY, 200)]  # the scripts retried, then the examples
    assert boot.aws.calls == [lifecycle_call(boot.node, "CONTINUE")]  # by bootstrap.sh, after every step
    assert boot.aws.fleet.state == "InService"
    assert "bootstrap complete" in boot.node.path("BOOTSTRAP_LOG").read_text()
    assert "LAUNCH_HOOK_NAME=" in boot.node.path("NODE_ENV_FILE").read_text()


def test_any_other_failure_of_the_user_data_abandons_too(boot: Boot) -> None:
    boto3.client("s3", region_name=boot.aws.fleet.region).put_object(Bucket=BUCKET, Key=KEY, Body=b"not a zip")
    done, _ = boot.run()
    assert done.returncode != 0
    assert "completing the launch hook with ABANDON" in done.stderr
    assert "ABANDON" in _settled(boot.node.path("BOOTSTRAP_LOG"), "completing the launch hook with ABANDON")
    assert boot.aws.calls == [lifecycle_call(boot.node, "ABANDON")]
    assert boot.aws.fleet.state == "Terminating"


@pytest.mark.slow
def test_a_served_fleet_gets_its_service_file_and_the_examples_and_serves_before_it_continues(boot: Boot) -> None:
    examples = boot.node.path("GPU_PLATFORM_EXAMPLES_DIR")
    port = free_port()
    command = (
        f"{sys.executable} {STANDIN} --examples {examples} --mode slow --port {port} --health-path /health "
        "--host 127.0.0.1"
    )
    service = {"command": command, "health_check_path": "/health", "image": None, "port": port}
    boot.render(service_json=json.dumps(service | {"start_timeout_seconds": 30}))
    done, _ = boot.run()

    assert done.returncode == 0, done.stderr
    # The user data wrote the file the node reads, and unpacked the examples beside the node scripts.
    assert json.loads((boot.node.etc / "service.json").read_text())["port"] == port
    assert (examples / "serve.py").read_bytes() == (EXAMPLES_DIR / "serve.py").read_bytes()
    # The bootstrap served from the unpacked example and continued only once it answered.
    log = boot.node.path("BOOTSTRAP_LOG").read_text()
    assert f"http://127.0.0.1:{port}/health answered 200 after" in log
    assert f"stand-in: serving with {examples / 'serve.py'}" in boot.node.units.log(layout.SERVICE_LOG).read_text()
    assert boot.aws.calls == [lifecycle_call(boot.node, "CONTINUE")]
    assert boot.aws.fleet.state == "InService"


def test_a_fleet_without_a_service_gets_no_service_file(boot: Boot) -> None:
    script = boot.script.read_text()
    assert "service.json" not in script and "<<'SERVICE'" not in script
    assert f"fetch s3://{BUCKET}/{EXAMPLES_KEY} " in script  # the examples reach every node

"""What the health check's tests share: the recorded cases (tests/scripts/node/fixtures/), gpu_health.py's arguments
to replay one, and the moto fleet it acts on (the fixtures that make it, ``aws`` and ``fleet``: conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import boto3

from tests.scripts.node.helpers import FIXTURES

# isort: split
# Importable once tests.scripts.node.helpers has put scripts/node on sys.path.
from health.parse import SmiResult

REGION = "us-east-1"
NAMESPACE = "GpuPlatform/Test"


@dataclass(frozen=True)
class Case:
    smi: SmiResult
    kernel_log: str
    smi_path: Path
    kernel_path: Path


def load_case(name: str) -> Case:
    folder = FIXTURES / name
    smi_path, kernel_path = folder / "nvidia-smi.out", folder / "kernel.log"
    rc = int((folder / "nvidia-smi.rc").read_text())
    return Case(SmiResult(returncode=rc, stdout=smi_path.read_text()), kernel_path.read_text(), smi_path, kernel_path)


@dataclass(frozen=True)
class Fleet:
    asg_name: str
    instance_id: str


def health_of(instance_id: str) -> str:
    autoscaling = boto3.client("autoscaling", region_name=REGION)
    instances = autoscaling.describe_auto_scaling_instances(InstanceIds=[instance_id])["AutoScalingInstances"]
    return instances[0]["HealthStatus"].upper()


def replay_args(case: str) -> list[str]:
    loaded = load_case(case)
    rc = (FIXTURES / case / "nvidia-smi.rc").read_text().strip()
    return [
        "--expected-gpus", "8",
        "--nvidia-smi-output", str(loaded.smi_path),
        "--nvidia-smi-rc", rc,
        "--kernel-log-file", str(loaded.kernel_path),
        "--dcgm", "off",
        "--namespace", NAMESPACE,
    ]  # fmt: skip

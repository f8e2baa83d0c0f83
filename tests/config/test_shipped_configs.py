"""The shipped config/ is the user's: it loads, and changing it within the schema breaks no test.

Every other test reads the test configs (tests/fixtures/config/); the snapshot tests read config/
for the templates it gives. The second test shows the suite survives a user's own config: it
copies config/, adds one more valid training fleet and one more valid served fleet to dev (built
from dev's own zones and VPC range, named apart from its fleets), and runs the fleet and config
tests (``FLEET_TESTS`` and tests/config, those not marked slow) against the copy
(GPU_PLATFORM_TEST_CONFIG_DIR points the suite there).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from config import load_environment, load_platform
from config.loader import CONFIG_DIR

ROOT = Path(__file__).resolve().parents[2]
#: The tests of the fleets of the test dev config (GPU_PLATFORM_TEST_CONFIG_DIR) as the Fleets stack renders
#: them, and the flows that follow its groups (tests/flows/test_user_data_flow.py renders fleets of its own).
FLEET_TESTS = (
    "tests/stacks/test_fleet_stack.py",
    "tests/stacks/test_fleet_stack_scaling.py",
    "tests/stacks/test_fleet_stack_ami_rollout.py",
    "tests/flows/test_launch_flow.py",
    "tests/flows/test_zero_capacity_flow.py",
)

#: Fleets a user might add (their zones, VPC range and names come from the config they join).
EXTRA_TRAINING: dict[str, Any] = {
    "role": "training",
    "instance_types": ["g5.xlarge"],
    "capacity": {"min": 1, "max": 2, "desired": 1},
    "on_demand_base_capacity": 1,
    "on_demand_percentage_above_base": 100,
}
EXTRA_SERVED: dict[str, Any] = {
    **EXTRA_TRAINING,
    "role": "inference",
    "service": {
        "port": 8080,
        "health_check_path": "/health",
        "command": "python3 /opt/gpu-platform/examples/serve.py --port 8080",
    },
}


def _free_name(taken: set[str], stem: str) -> str:
    """``stem``, or ``stem-2``, ``stem-3``...: the first name no fleet of the config has."""
    return next(name for name in (stem, *(f"{stem}-{i}" for i in range(2, 100))) if name not in taken)


def extra_fleets(dev: dict[str, Any]) -> list[dict[str, Any]]:
    """One more training fleet, in the file system's zone, and one more served fleet behind an internal load
    balancer in two of dev's zones (a load balancer needs two): valid in any valid dev config that has two."""
    taken = {fleet["name"] for fleet in dev["fleets"]}
    zones = dev["availability_zones"]
    extras = [
        {
            "name": _free_name(taken, "extra-training"),
            **EXTRA_TRAINING,
            "availability_zones": [dev["storage"]["file_system"]["availability_zone"]],
        }
    ]
    if len(zones) >= 2:
        balancer = {"internal": True, "allowed_cidrs": [dev["network"]["vpc_cidr"]]}
        service = {**EXTRA_SERVED["service"], "load_balancer": balancer}
        served = {**EXTRA_SERVED, "availability_zones": zones[:2], "service": service}
        extras.append({"name": _free_name(taken, "extra-served"), **served})
    return extras


def test_the_shipped_configs_load_together() -> None:
    platform = load_platform()
    assert sorted(platform.environments) == ["dev", "prod", "staging"]
    for name, env in platform.environments.items():
        assert env.name == name and env.fleets, name


@pytest.mark.slow
def test_fleet_and_config_tests_pass_on_a_copy_of_config_with_more_fleets(tmp_path: Path) -> None:
    copy = tmp_path / "config"
    copy.mkdir()
    for path in CONFIG_DIR.glob("*.yaml"):
        shutil.copy(path, copy / path.name)
    dev = yaml.safe_load((copy / "dev.yaml").read_text(encoding="utf-8"))
    extras = extra_fleets(dev)
    dev["fleets"].extend(extras)
    (copy / "dev.yaml").write_text(yaml.safe_dump(dev, sort_keys=False), encoding="utf-8")
    loaded = [f.name for f in load_environment("dev", copy).fleets]  # valid, as a user would check
    assert loaded[-len(extras) :] == [fleet["name"] for fleet in extras]

    env = {**os.environ, "GPU_PLATFORM_TEST_CONFIG_DIR": str(copy)}
    env.pop("PYTEST_XDIST_WORKER", None)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:xdist",
            "-p",
            "no:randomly",
            "-m",
            "not slow",  # the slow ones (real AWS CLI runs, timers) exercise the node scripts, not the config
            *FLEET_TESTS,
            "tests/config",
            "--deselect",
            f"tests/config/{Path(__file__).name}",
            # These read no environment's config (config/qa.yaml's absence; the pipeline file): the copy cannot
            # change them.
            "--deselect",
            "tests/config/test_config_errors.py::test_app_exits_2_on_missing_environment",
            "--deselect",
            "tests/config/test_pipeline_schema.py",
            "--deselect",
            "tests/config/test_pipeline_app.py",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    progress = "".join(line.split(" [")[0] for line in run.stdout.splitlines() if line.rstrip().endswith("%]"))
    assert progress.count(".") > 100 and set(progress) <= {".", "s", " "}, run.stdout[-2000:]

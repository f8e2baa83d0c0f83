"""What the config tests share: the test dev config's data, writing an environment file, the one-line errors a load
or a run of app.py gives, the shipped pipeline config's data and writing one."""

from __future__ import annotations

import copy
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import config
from config.loader import CONFIG_DIR
from config.pipeline_schema import PIPELINE_FILE
from tests.synth import SLURM_DIR, TEST_CONFIG_DIR

Mutation = Callable[[dict[str, Any]], None]


def valid_dev() -> dict[str, Any]:
    """The data of the test dev config (tests/fixtures/config/dev.yaml), with ``name`` as the first key."""
    data = yaml.safe_load((TEST_CONFIG_DIR / "dev.yaml").read_text(encoding="utf-8"))
    return {"name": data.pop("name"), **data}


def first_served() -> int:
    """Index of the first served fleet of the test dev config; called at a module's top, it skips the module
    where none serves (a user's own config under the copy run of tests/config/test_shipped_configs.py)."""
    served = [i for i, fleet in enumerate(valid_dev()["fleets"]) if fleet.get("service") is not None]
    if not served:
        pytest.skip("the dev config serves nothing: no service to make a mistake in", allow_module_level=True)
    return served[0]


def dump(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False)


def write_env(folder: Path, stem: str, data: dict[str, Any]) -> Path:
    path = folder / f"{stem}.yaml"
    path.write_text(dump(data), encoding="utf-8")
    return path


def load_error(name: str, config_dir: Path) -> list[str]:
    with pytest.raises(config.ConfigError) as info:
        config.load_environment(name, config_dir=config_dir)
    return info.value.lines


def assert_config_failure(result: subprocess.CompletedProcess[str], expected: str) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert [line for line in result.stderr.splitlines() if line.strip()] == [expected], result.stderr
    assert result.returncode == 2, result.stderr


def fleet(**changes: Any) -> dict[str, Any]:
    """A valid EFA training fleet in dev's Lustre zone, with ``changes`` applied (None removes a key)."""
    base = {
        "name": "train",
        "role": "training",
        "instance_types": ["p4d.24xlarge"],
        "efa": True,
        "placement": "cluster",
        "availability_zones": ["us-east-1a"],
        "capacity": {"min": 0, "max": 2},
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


NIGHTS_OFF = {
    "name": "nights-off",
    "cron": "0 20 * * *",
    "time_zone": "America/New_York",
    "min": 0,
    "max": 4,
    "desired": 0,
}


def inference(**changes: Any) -> dict[str, Any]:
    """A valid non-EFA inference fleet of one node, with ``changes`` applied."""
    base = {
        "name": "serve",
        "role": "inference",
        "instance_types": ["g5.xlarge"],
        "availability_zones": ["us-east-1a"],
        "capacity": {"min": 1, "max": 4, "desired": 1},
    }
    base.update(changes)
    return base


def valid_pipeline() -> dict[str, Any]:
    """The data of the shipped pipeline config (config/pipeline/pipeline.yaml)."""
    return yaml.safe_load((CONFIG_DIR / PIPELINE_FILE).read_text(encoding="utf-8"))


def write_config(
    folder: Path, data: dict[str, Any] | str, environments: tuple[str, ...] = ("dev", "staging", "prod")
) -> Path:
    """``data`` as the pipeline file of ``folder``, beside an environment file for each of ``environments``."""
    for name in environments:
        (folder / f"{name}.yaml").write_text(f"name: {name}\n", encoding="utf-8")
    path = folder / PIPELINE_FILE
    path.parent.mkdir(exist_ok=True)
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def slurm_pair(*, builder_has_slurm: bool = True) -> dict[str, dict[str, Any]]:
    """The Slurm test environment (hpc) building its image for a copy of itself (hpc2: its own account and CIDR,
    ``build: false``); with ``builder_has_slurm`` false, hpc keeps its Auto Scaling fleet and its PCS pins only."""
    hpc = yaml.safe_load((SLURM_DIR / "hpc.yaml").read_text(encoding="utf-8"))
    hpc2 = copy.deepcopy(hpc)
    hpc2.update(name="hpc2", account="555555555555", image={"build": False})
    hpc2["tags"] = {**hpc2["tags"], "Environment": "hpc2"}
    hpc2["network"] = {**hpc2["network"], "vpc_cidr": "10.41.0.0/16"}
    hpc["image"]["share_with"] = ["hpc2"]
    if not builder_has_slurm:
        hpc["fleets"] = [f for f in hpc["fleets"] if f.get("scheduler") != "slurm"]
        del hpc["slurm"]
    return {"hpc": hpc, "hpc2": hpc2}

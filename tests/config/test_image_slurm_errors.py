"""The image versions of AWS PCS's agent and Slurm build: pinned where the environment has a ``slurm:`` section (its
image gets them), refused where it has none, and the Slurm build must be the cluster's; each mistake one exact line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from config import load_environment
from tests.config.helpers import load_error, valid_dev, write_env
from tests.synth import SLURM_DIR


def hpc(**versions: str | None) -> dict[str, Any]:
    """The Slurm test environment (26.05, slurm_version left out) with ``versions`` changed (None removes one)."""
    data = yaml.safe_load((SLURM_DIR / "hpc.yaml").read_text(encoding="utf-8"))
    data["image"]["versions"].update(versions)
    data["image"]["versions"] = {k: v for k, v in data["image"]["versions"].items() if v is not None}
    return data


def dev(**versions: Any) -> dict[str, Any]:
    data = valid_dev()
    data["image"]["versions"].update(versions)
    return data


CASES = [
    pytest.param(
        "hpc",
        hpc(PcsAgentVersion=None, PcsSlurmVersion=None),
        "hpc.yaml: image.versions: PcsAgentVersion, PcsSlurmVersion are missing, and slurm.slurm_version is '26.05': "
        "the image carries AWS PCS's agent and Slurm 26.05; fix: pin them beside the other versions, e.g. "
        "PcsAgentVersion: '1.3.1-1', PcsSlurmVersion: '26.05.N-R' (releases as AWS names its installers: "
        "aws-pcs-agent-v1.3.1-1.tar.gz, aws-pcs-slurm-26.05-installer-26.05.N-R.tar.gz)",
        id="slurm-without-pcs-pins",
    ),
    pytest.param(
        "hpc",
        hpc(PcsSlurmVersion="25.05.5-1"),
        "hpc.yaml: image.versions.PcsSlurmVersion: '25.05.5-1' is AWS PCS's Slurm 25.05 installer, but "
        "slurm.slurm_version is '26.05' and PCS nodes run their cluster's Slurm; fix: pin a release of "
        "aws-pcs-slurm-26.05-installer, or change slurm.slurm_version",
        id="another-slurm-than-the-clusters",
    ),
    pytest.param(
        "hpc",
        hpc(PcsAgentVersion="latest"),
        "hpc.yaml: image.versions.PcsAgentVersion: 'latest' is not an AWS PCS installer release; fix: pin a release "
        "AWS publishes, VERSION-RELEASE as its installer's file name writes it, e.g. PcsAgentVersion: '1.3.1-1'",
        id="agent-latest",
    ),
    pytest.param(
        "hpc",
        hpc(PcsSlurmVersion="26.05"),
        "hpc.yaml: image.versions.PcsSlurmVersion: '26.05' is not an AWS PCS installer release; fix: pin a release "
        "AWS publishes, VERSION-RELEASE as its installer's file name writes it, e.g. PcsSlurmVersion: '25.05.5-1'",
        id="slurm-version-not-a-release",
    ),
    pytest.param(
        "dev",
        dev(PcsRegion="us-east-1"),
        "dev.yaml: image.versions.PcsRegion: not a version; fix: remove it, PcsRegion is set by the image stack "
        "(the building environment's region: AWS's PCS installers are downloaded there)",
        id="region-is-not-a-version",
    ),
]


@pytest.mark.parametrize(("name", "data", "expected"), CASES)
def test_pcs_versions_give_exact_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, data: dict[str, Any], expected: str
) -> None:
    monkeypatch.chdir(tmp_path)
    write_env(tmp_path, name, data)
    assert load_error(name, tmp_path) == [expected]


def test_a_release_of_the_clusters_slurm_is_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    data = hpc(PcsSlurmVersion="25.05.5-1", PcsAgentVersion="1.5.0-1")
    data["slurm"]["slurm_version"] = "25.05"
    write_env(tmp_path, "hpc", data)
    env = load_environment("hpc", tmp_path)
    assert {k: env.image.versions[k] for k in ("PcsAgentVersion", "PcsSlurmVersion")} == {
        "PcsAgentVersion": "1.5.0-1",
        "PcsSlurmVersion": "25.05.5-1",
    }

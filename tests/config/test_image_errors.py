"""Image config mistakes: each gives its exact one-line error."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from config import load_environment
from config.image import DEFAULT_VERSIONS, SLURM_VERSION_PARAMETERS, VERSION_PARAMETERS
from tests.config.helpers import load_error, valid_dev, write_env

Change = Callable[[dict[str, Any]], None]
KNOWN_VERSIONS = ", ".join([*VERSION_PARAMETERS, *SLURM_VERSION_PARAMETERS])


def _version(name: str, value: Any) -> Change:
    def change(image: dict[str, Any]) -> None:
        image["versions"][name] = value

    return change


def _drop_versions(*names: str) -> Change:
    def change(image: dict[str, Any]) -> None:
        for name in names:
            del image["versions"][name]

    return change


def _set(field: str, value: Any) -> Change:
    def change(image: dict[str, Any]) -> None:
        image[field] = value

    return change


CASES = [
    pytest.param(
        _drop_versions("DcgmVersion"),
        ["dev.yaml: image.versions: DcgmVersion is missing; fix: pin every version here, e.g. DcgmVersion: 4.7.0"],
        id="missing-version",
    ),
    pytest.param(
        _drop_versions("CudaVersion", "DcgmVersion"),
        [
            "dev.yaml: image.versions: CudaVersion, DcgmVersion are missing; "
            "fix: pin every version here, e.g. CudaVersion: 13.0.3, DcgmVersion: 4.7.0"
        ],
        id="missing-versions",
    ),
    pytest.param(
        _version("CudaVerison", "13.0.3"),
        [
            "dev.yaml: image.versions.CudaVerison: unknown version parameter; "
            f"fix: did you mean 'CudaVersion'? remove it or use one of {KNOWN_VERSIONS}"
        ],
        id="unknown-version-with-hint",
    ),
    pytest.param(
        _version("GccVersion", "12"),
        [
            f"dev.yaml: image.versions.GccVersion: unknown version parameter; fix: remove it or use one of {KNOWN_VERSIONS}"
        ],
        id="unknown-version",
    ),
    pytest.param(
        _version("PipIndexUrl", "https://pypi.org/simple"),
        [
            "dev.yaml: image.versions.PipIndexUrl: not a version; fix: remove it, PipIndexUrl is set by image.pip_index_url"
        ],
        id="pip-index-is-not-a-version",
    ),
    pytest.param(
        _version("TorchVersion", ""),
        ["dev.yaml: image.versions.TorchVersion: the version is empty; fix: pin one, e.g. TorchVersion: 2.14.1"],
        id="empty-version",
    ),
    pytest.param(
        _version("TorchVersion", None),
        ["dev.yaml: image.versions.TorchVersion: the version is empty; fix: pin one, e.g. TorchVersion: 2.14.1"],
        id="null-version",
    ),
    pytest.param(
        _version("TorchvisionVersion", 0.3),
        [
            "dev.yaml: image.versions.TorchvisionVersion: 0.3 is not a string (YAML reads 2.10 as the number 2.1); "
            "fix: quote the version, e.g. TorchvisionVersion: '0.29.1'"
        ],
        id="unquoted-number",
    ),
    pytest.param(
        _version("NcclVersion", "2.30.7; curl x"),
        [
            "dev.yaml: image.versions.NcclVersion: '2.30.7; curl x' is not a version; "
            "fix: use digits, letters and . + ~ _ - only, starting with a digit, e.g. 2.30.7"
        ],
        id="shell-in-version",
    ),
    pytest.param(
        _set("builder_instance_type", "g5.2xlarg"),
        [
            "dev.yaml: image.builder_instance_type: g5.2xlarg is not in the GPU instance catalog; did you mean "
            "g5.2xlarge, g5.24xlarge or g5.12xlarge? (config/catalog/gpu_instances.csv); fix: use a GPU instance type of the catalog, e.g. g5.2xlarge"
        ],
        id="builder-typo",
    ),
    pytest.param(
        _set("builder_instance_type", "m5.large"),
        [
            "dev.yaml: image.builder_instance_type: m5.large is not in the GPU instance catalog; it lists the families "
            "p4d, p4de, p5, p5e, p5en, g4dn, g5, g6, g6e; to add a GPU family or size, run "
            "scripts/refresh_instance_catalog.py --families m5 (config/catalog/gpu_instances.csv); "
            "fix: use a GPU instance type of the catalog, e.g. g5.2xlarge"
        ],
        id="builder-without-gpu",
    ),
    pytest.param(
        _set("parent_image_parameter", "ami-0123456789abcdef0"),
        [
            "dev.yaml: image.parent_image_parameter: 'ami-0123456789abcdef0' is not a public AWS SSM parameter; "
            "fix: use a parameter path under /aws/service/, e.g. "
            "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id"
        ],
        id="parent-not-a-parameter",
    ),
    pytest.param(
        _set("schedule", "rate(7 days)"),
        [
            "dev.yaml: image.schedule: 'rate(7 days)' is not an Image Builder cron expression; "
            "fix: write cron(minutes hours day-of-month month day-of-week year), e.g. cron(0 3 ? * sun *)"
        ],
        id="schedule-not-cron",
    ),
    pytest.param(
        _set("pip_index_url", "http://pypi.org/simple"),
        [
            "dev.yaml: image.pip_index_url: 'http://pypi.org/simple' is not an https:// URL; "
            "fix: use a package index URL such as https://pypi.org/simple"
        ],
        id="pip-index-not-https",
    ),
    pytest.param(
        _set("root_volume_gib", 200),
        [
            "dev.yaml: image.root_volume_gib: 200 is invalid: Input should be less than or equal to 100; "
            "fix: use a value <= 100 (GiB; the parent's snapshot must fit, and a fleet root volume, at least 100 GiB, "
            "must hold the image)"
        ],
        id="root-volume-larger-than-fleets",
    ),
]


@pytest.mark.parametrize(("change", "expected"), CASES)
def test_invalid_image_gives_exact_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Change, expected: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    data = valid_dev()
    change(data["image"])
    write_env(tmp_path, "dev", data)
    assert load_error("dev", tmp_path) == expected


def test_shipped_configs_pin_every_version() -> None:
    """Each environment file names every version itself (the defaults only serve a file without image:)."""
    data = valid_dev()
    assert set(data["image"]["versions"]) == set(DEFAULT_VERSIONS)
    assert all(isinstance(v, str) and v for v in data["image"]["versions"].values())


# --- who builds: image.build and image.share_with (one file) ---------------------------------

DataChange = Callable[[dict[str, Any]], None]
DLAMI = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id"


def _isolated(data: dict[str, Any]) -> None:
    data["network"] = {**data["network"], "egress": "isolated", "nat_gateways": 0}


def _receiving_image(**fields: Any) -> DataChange:
    def change(data: dict[str, Any]) -> None:
        data["image"] = {"build": False, "bootstrap_ami_parameter": DLAMI, **fields}

    return change


def _share_with(*names: str) -> DataChange:
    def change(data: dict[str, Any]) -> None:
        data["image"]["share_with"] = list(names)

    return change


NOT_BUILT = (
    "set, but this environment does not build (build: false), so it would be ignored; "
    "fix: remove it, the AMI comes from the building environment that lists this one in image.share_with"
)

BUILD_CASES = [
    pytest.param(
        _isolated,
        [
            "dev.yaml: image.build: an environment with network.egress 'isolated' cannot build images (no route to "
            "apt, NVIDIA, PyPI or the EFA installer); fix: set image.build: false and add 'dev' to image.share_with "
            "of a building environment (network.egress: nat)"
        ],
        id="isolated-environment-builds",
    ),
    pytest.param(
        _share_with("staging", "dev"),
        [
            "dev.yaml: image.share_with[1]: 'dev' is this environment; "
            "fix: remove it, a building environment always receives its own AMIs"
        ],
        id="shares-with-itself",
    ),
    pytest.param(
        _share_with("staging", "prod", "staging"),
        [
            "dev.yaml: image.share_with[2]: 'staging' is already listed at share_with[0]; "
            "fix: list each environment once"
        ],
        id="shares-twice-with-one-environment",
    ),
    pytest.param(
        _share_with("Prod"),
        [
            "dev.yaml: image.share_with[0]: 'Prod' is not an environment name; "
            "fix: name an environment by its file, e.g. staging"
        ],
        id="share-with-not-a-name",
    ),
    pytest.param(
        _receiving_image(share_with=["staging"]),
        [
            "dev.yaml: image.share_with: ['staging'] but build is false: only a building environment shares its "
            "AMIs; fix: remove share_with, or set build: true (which needs network.egress: nat)"
        ],
        id="receiving-environment-shares",
    ),
    pytest.param(
        _receiving_image(versions=dict(DEFAULT_VERSIONS), schedule="cron(0 3 ? * sun *)"),
        [f"dev.yaml: image.versions: {NOT_BUILT}", f"dev.yaml: image.schedule: {NOT_BUILT}"],
        id="receiving-environment-pins-versions",
    ),
]


@pytest.mark.parametrize(("change", "expected"), BUILD_CASES)
def test_who_builds_gives_exact_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: DataChange, expected: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    data = valid_dev()
    change(data)
    write_env(tmp_path, "dev", data)
    assert load_error("dev", tmp_path) == expected


def test_an_isolated_environment_that_does_not_build_is_valid(tmp_path: Path) -> None:
    data = valid_dev()
    _isolated(data)
    _receiving_image()(data)
    write_env(tmp_path, "dev", data)
    env = load_environment("dev", tmp_path)
    assert env.image.build is False and env.image.share_with == []

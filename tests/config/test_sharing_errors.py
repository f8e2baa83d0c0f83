"""Rules between environments (who builds the AMI, who receives it): each mistake gives its exact lines.

Each case copies the shipped ``config/*.yaml`` into a temporary folder, changes one
thing and checks the complete ``ConfigError`` lines of ``load_platform``, which reads
every file of the folder.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import config
from config.loader import CONFIG_DIR
from config.sharing import AmiSource, AmiTarget, ImageSharing
from tests.app_runs import run_app
from tests.config.helpers import slurm_pair, write_env

Configs = dict[str, dict[str, Any]]
Change = Callable[[Configs], None]
DLAMI = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id"


def shipped() -> Configs:
    return {path.stem: yaml.safe_load(path.read_text(encoding="utf-8")) for path in sorted(CONFIG_DIR.glob("*.yaml"))}


def write_all(folder: Path, configs: Configs) -> None:
    for name, data in configs.items():
        write_env(folder, name, data)


def platform_error(folder: Path) -> list[str]:
    with pytest.raises(config.ConfigError) as info:
        config.load_platform(config_dir=folder)
    return info.value.lines


def _share(env: str, *names: str) -> Change:
    def change(configs: Configs) -> None:
        configs[env]["image"]["share_with"] = list(names)

    return change


def _with_nat_builder(env: str) -> Change:
    """``env`` gets internet egress and builds (with the default pins)."""

    def change(configs: Configs) -> None:
        configs[env]["network"] = {**configs[env]["network"], "egress": "nat", "nat_gateways": 1}
        configs[env]["image"] = {"build": True}

    return change


def _dev_does_not_build(configs: Configs) -> None:
    configs["dev"]["image"] = {"build": False, "bootstrap_ami_parameter": DLAMI}


def _second_builder_for_staging(configs: Configs) -> None:
    qa = yaml.safe_load(yaml.safe_dump(configs["dev"]))
    qa["name"], qa["account"] = "qa", "444444444444"
    qa["tags"]["Environment"] = "qa"
    qa["image"]["share_with"] = ["staging"]
    configs["qa"] = qa


def _account(env: str, account: str) -> Change:
    def change(configs: Configs) -> None:
        configs[env]["account"] = account

    return change


CASES = [
    pytest.param(
        _share("dev", "staging", "prod", "qa"),
        [
            "dev.yaml: image.share_with[2]: 'qa' has no config file (qa.yaml); fix: remove it or use one of prod, staging"
        ],
        id="shares-with-an-environment-without-a-file",
    ),
    pytest.param(
        _with_nat_builder("staging"),
        [
            "dev.yaml: image.share_with[0]: 'staging' builds its own AMIs (image.build is true in staging.yaml); "
            "fix: set image.build: false in staging.yaml, or remove 'staging' here"
        ],
        id="shares-with-a-building-environment",
    ),
    pytest.param(
        _share("dev", "staging"),
        [
            "prod.yaml: image.build: false, but no building environment lists 'prod' in image.share_with, so its "
            "fleets would keep the bootstrap AMI; fix: add 'prod' to image.share_with in dev.yaml"
        ],
        id="receiving-environment-nobody-shares-with",
    ),
    pytest.param(
        _dev_does_not_build,
        [
            f"{name}.yaml: image.build: false, but no building environment lists {name!r} in image.share_with, so "
            "its fleets would keep the bootstrap AMI; fix: set image.build: true in an environment with "
            f"network.egress: nat and add {name!r} to its image.share_with"
            for name in ("dev", "prod", "staging")
        ],
        id="no-environment-builds",
    ),
    pytest.param(
        _second_builder_for_staging,
        [
            "staging.yaml: image.build: false, and dev and qa each list 'staging' in image.share_with, so their "
            "builds would overwrite each other's AMI; fix: keep 'staging' in one image.share_with only"
        ],
        id="two-builders-share-with-one-environment",
    ),
    pytest.param(
        _account("prod", "222222222222"),
        [
            "staging.yaml: account: '222222222222' is also the account of 'prod' (prod.yaml), and both receive "
            "AMIs through the one EC2ImageBuilderDistributionCrossAccountRole an account can hold; "
            "fix: give each environment that receives AMIs its own account"
        ],
        id="two-receiving-environments-in-one-account",
    ),
]


@pytest.mark.parametrize(("change", "expected"), CASES)
def test_sharing_mistake_gives_exact_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Change, expected: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    configs = shipped()
    change(configs)
    write_all(tmp_path, configs)
    assert platform_error(tmp_path) == expected


def test_shipped_configs_dev_builds_for_staging_and_prod() -> None:
    platform = config.load_platform()
    dev, staging, prod = (platform.environments[n] for n in ("dev", "staging", "prod"))
    assert platform.sharing("dev") == ImageSharing(
        targets=(
            AmiTarget("staging", staging.account, staging.region, "/imagebuilder/gpu-platform/staging/ami/latest"),
            AmiTarget("prod", prod.account, prod.region, "/imagebuilder/gpu-platform/prod/ami/latest"),
        ),
        efa=True,  # staging's and prod's training fleets use EFA: dev's image carries their EFA software
    )
    for name in ("staging", "prod"):
        assert platform.sharing(name) == ImageSharing(source=AmiSource("dev", dev.account, dev.region))


def test_a_receiving_environment_may_share_its_builders_account(tmp_path: Path) -> None:
    """Same account: the AMI is already there, so there is no distribution role to clash."""
    configs = shipped()
    for name in ("staging", "prod"):
        configs[name]["account"] = configs["dev"]["account"]
    write_all(tmp_path, configs)
    platform = config.load_platform(config_dir=tmp_path)
    assert platform.sharing("prod").source == AmiSource("dev", configs["dev"]["account"], "us-east-1")


def test_the_image_serves_efa_fleets_only_where_a_fleet_launching_it_uses_efa(tmp_path: Path) -> None:
    """dev's image must carry the EFA software because staging's and prod's training fleets use EFA."""
    platform = config.load_platform()
    assert platform.sharing("dev").efa and not platform.sharing("staging").efa  # a receiver builds nothing
    configs = shipped()
    for name in ("staging", "prod"):
        for fleet in configs[name]["fleets"]:
            fleet["efa"] = False
    write_all(tmp_path, configs)
    assert config.load_platform(config_dir=tmp_path).sharing("dev").efa is False


def test_one_selected_environment_is_still_checked_against_the_others(tmp_path: Path) -> None:
    configs = shipped()
    _share("dev", "staging")(configs)
    write_all(tmp_path, configs)
    with pytest.raises(config.ConfigError) as info:
        config.load_platform(["staging"], config_dir=tmp_path)
    assert [line.split(": ", 2)[1] for line in info.value.lines] == ["image.build"]  # prod.yaml's line
    assert config.load_platform(["staging", "dev"], config_dir=CONFIG_DIR).selected == ("staging", "dev")


def test_app_exits_2_when_the_environments_it_shares_with_have_no_file(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    write_env(conf, "dev", shipped()["dev"])

    result = run_app({"env": "dev", "config_dir": str(conf)}, tmp_path / "out")

    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, result.stderr
    assert [line for line in result.stderr.splitlines() if line.strip()] == [
        f"{conf / 'dev.yaml'}: image.share_with[{i}]: {name!r} has no config file ({name}.yaml); "
        f"fix: remove it or add {name}.yaml"
        for i, name in enumerate(("staging", "prod"))
    ]


# --- a receiving environment with a PCS cluster -------------------------------------------------------------------


def test_a_slurm_environment_gets_an_ami_of_its_clusters_slurm(tmp_path: Path) -> None:
    folder, configs = tmp_path, slurm_pair()
    write_all(folder, configs)
    assert config.load_platform(config_dir=folder).sharing("hpc2").source is not None  # the same Slurm: valid
    configs["hpc2"]["slurm"]["slurm_version"] = "25.05"
    write_all(folder, configs)
    assert platform_error(folder) == [
        f"{folder / 'hpc.yaml'}: image: one image carries one Slurm build, and the environments it is for run Slurm "
        "hpc 26.05, hpc2 25.05; fix: give them the same slurm.slurm_version"
    ]


def test_a_builder_without_a_cluster_of_its_own_builds_pcs_software_for_its_slurm_receivers(tmp_path: Path) -> None:
    folder, configs = tmp_path, slurm_pair(builder_has_slurm=False)
    write_all(folder, configs)
    assert config.load_platform(config_dir=folder).environments["hpc"].image.versions["PcsSlurmVersion"]  # valid
    pins = configs["hpc"]["image"]["versions"]
    pins["PcsSlurmVersion"] = "25.05.5-1"
    write_all(folder, configs)
    assert platform_error(folder) == [
        f"{folder / 'hpc.yaml'}: image.versions.PcsSlurmVersion: '25.05.5-1' is AWS PCS's Slurm 25.05 installer, but "
        "hpc2 runs Slurm 26.05 on it and PCS nodes run their cluster's Slurm; fix: pin a release of "
        "aws-pcs-slurm-26.05-installer"
    ]
    for pin in ("PcsAgentVersion", "PcsSlurmVersion"):
        del pins[pin]
    write_all(folder, configs)
    assert platform_error(folder) == [
        f"{folder / 'hpc.yaml'}: image.versions: PcsAgentVersion, PcsSlurmVersion are missing, and hpc2 runs Slurm "
        "26.05 on it: the image carries AWS PCS's agent and Slurm 26.05; fix: pin them beside the other versions, e.g. "
        "PcsAgentVersion: '1.3.1-1', PcsSlurmVersion: '26.05.N-R' (releases as AWS names its installers: "
        "aws-pcs-agent-v1.3.1-1.tar.gz, aws-pcs-slurm-26.05-installer-26.05.N-R.tar.gz)"
    ]


def test_pcs_pins_where_no_environment_runs_slurm_are_refused(tmp_path: Path) -> None:
    configs = shipped()
    builder = next(n for n, c in configs.items() if c["image"].get("build"))
    configs[builder]["image"].setdefault("versions", {}).update(PcsAgentVersion="1.3.1-1")
    write_all(tmp_path, configs)
    assert platform_error(tmp_path) == [
        f"{tmp_path / f'{builder}.yaml'}: image.versions.PcsAgentVersion: set, but neither {builder!r} nor an "
        "environment it builds for has a slurm section, so its image carries no AWS PCS software; fix: remove it, "
        "or add the slurm section"
    ]


def test_a_builder_outside_pcs_regions_cannot_download_pcs_software(tmp_path: Path) -> None:
    folder, configs = tmp_path, slurm_pair(builder_has_slurm=False)
    builder = configs["hpc"]
    builder.update(region="ap-east-1", availability_zones=["ap-east-1a", "ap-east-1b"])
    builder["storage"]["file_system"]["availability_zone"] = "ap-east-1a"
    for fleet in builder["fleets"]:
        fleet["availability_zones"] = [z.replace("us-east-1", "ap-east-1") for z in fleet["availability_zones"]]
    write_all(folder, configs)
    lines = platform_error(folder)
    assert (
        f"{folder / 'hpc.yaml'}: region: ap-east-1 has no AWS PCS repository to download the agent and Slurm from, "
        "and hpc2 runs Slurm on the image it builds; fix: build their image in a region where PCS runs (e.g. "
        "us-east-1), or from an environment there" in lines
    )

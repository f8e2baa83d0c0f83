"""scripts/refresh_instance_catalog.py against moto's DescribeInstanceTypes (and a Stubber where moto cannot).

moto 5.2.5 answers DescribeInstanceTypes from a recording of the real API, GpuInfo and
EfaInfo included, so the script runs against it unchanged. moto returns one page and
never refuses a caller, so pagination and an access-denied answer use botocore's Stubber.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from botocore import UNSIGNED
from botocore.config import Config
from botocore.stub import Stubber
from moto import mock_aws

from config.catalog import CATALOG_PATH, read_catalog

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "scripts" / "refresh_instance_catalog.py"
ORIGINAL = CATALOG_PATH.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def refresh() -> ModuleType:
    spec = importlib.util.spec_from_file_location("refresh_instance_catalog", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    """A copy of the shipped catalog to refresh."""
    path = tmp_path / "gpu_instances.csv"
    path.write_text(ORIGINAL, encoding="utf-8")
    return path


def edit(path: Path, *replacements: tuple[str, str]) -> str:
    text = path.read_text(encoding="utf-8")
    for old, new in replacements:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path.write_text(text, encoding="utf-8")
    return text


def stub_client(region: str) -> Any:
    """An EC2 client for a Stubber: unsigned, so it looks for no credentials."""
    return boto3.client("ec2", region_name=region, config=Config(signature_version=UNSIGNED))


def run(refresh: ModuleType, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], list[str]]:
    code = refresh.main(list(args))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines()


# Two hardware cells and two hand-kept cells of p4d.24xlarge, edited in the copy.
P4D = "p4d.24xlarge,p4d,8,NVIDIA A100,40,96,1152,4,4,true,true,true,4x 100 Gigabit,21.957642"
P4D_EDITED = "p4d.24xlarge,p4d,8,NVIDIA A100,40,95,1152,4,4,true,false,true,400 Gigabit,19.5"
G5 = "g5.xlarge,g5,1,NVIDIA A10G,22.35,"
G5_EDITED = "g5.xlarge,g5,1,NVIDIA A10,24,"


def test_the_shipped_catalog_matches_describe_instance_types(
    refresh: ModuleType, capsys: pytest.CaptureFixture[str], aws: None, catalog: Path
) -> None:
    families = "g4dn,g5,g6,g6e,p4d,p4de,p5,p5e,p5en"
    code, out, err = run(refresh, capsys, "--catalog", str(catalog), "--families", families, "--dry-run")
    assert (code, err) == (0, [])
    assert out == ["0 cell(s) in 0 row(s) would change; 0 row(s) would be added", "dry run: nothing written"]


def test_refresh_rewrites_hardware_columns_and_keeps_prices_and_hand_kept_flags(
    refresh: ModuleType, capsys: pytest.CaptureFixture[str], aws: None, catalog: Path
) -> None:
    edit(catalog, (P4D, P4D_EDITED), (G5, G5_EDITED))
    catalog.chmod(0o644)
    code, out, err = run(refresh, capsys, "--catalog", str(catalog))
    assert (code, err) == (0, [])
    assert out == [
        "p4d.24xlarge: vcpus: '95' -> '96'",
        "p4d.24xlarge: network_performance: '400 Gigabit' -> '4x 100 Gigabit'",
        "g5.xlarge: gpu_model: 'NVIDIA A10' -> 'NVIDIA A10G'",
        "g5.xlarge: gpu_memory_gib: '24' -> '22.35'",
        "4 cell(s) in 2 row(s) changed; 0 row(s) added",
        f"wrote {catalog}",
    ]
    # Hardware back to the API's values; nvswitch=false and the 19.5 price survive.
    expected = ORIGINAL.replace(
        P4D, "p4d.24xlarge,p4d,8,NVIDIA A100,40,96,1152,4,4,true,false,true,4x 100 Gigabit,19.5"
    )
    assert catalog.read_text(encoding="utf-8") == expected
    assert read_catalog(catalog)["p4d.24xlarge"].on_demand_usd_per_hour == 19.5
    assert catalog.stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in catalog.parent.iterdir()) == ["gpu_instances.csv"]


def test_dry_run_prints_the_changes_and_writes_nothing(
    refresh: ModuleType, capsys: pytest.CaptureFixture[str], aws: None, catalog: Path
) -> None:
    edited = edit(catalog, (P4D, P4D_EDITED))
    before = catalog.stat().st_mtime_ns
    code, out, err = run(refresh, capsys, "--catalog", str(catalog), "--dry-run")
    assert (code, err) == (0, [])
    assert out[-2:] == ["2 cell(s) in 1 row(s) would change; 0 row(s) would be added", "dry run: nothing written"]
    assert "p4d.24xlarge: vcpus: '95' -> '96'" in out
    assert catalog.read_text(encoding="utf-8") == edited
    assert catalog.stat().st_mtime_ns == before
    assert sorted(p.name for p in catalog.parent.iterdir()) == ["gpu_instances.csv"]


def test_families_adds_missing_sizes_with_an_empty_price_in_size_order(
    refresh: ModuleType, capsys: pytest.CaptureFixture[str], aws: None, catalog: Path
) -> None:
    rows = {line.split(",", 1)[0]: line for line in ORIGINAL.splitlines()}
    edit(catalog, (rows["g6e.24xlarge"] + "\n", ""), (rows["g6e.48xlarge"] + "\n", ""))
    code, out, err = run(refresh, capsys, "--catalog", str(catalog), "--families", "g6e")
    assert (code, err) == (0, [])
    assert out[:3] == [
        "g6e.24xlarge: new row; fix by hand: on_demand_usd_per_hour, nvswitch, gpudirect_rdma",
        "g6e.48xlarge: new row; fix by hand: on_demand_usd_per_hour, nvswitch, gpudirect_rdma",
        "0 cell(s) in 0 row(s) changed; 2 row(s) added",
    ]
    unpriced = {n: rows[n].rsplit(",", 1)[0] + "," for n in ("g6e.24xlarge", "g6e.48xlarge")}
    expected = ORIGINAL
    for name, row in unpriced.items():
        expected = expected.replace(rows[name], row)
    assert catalog.read_text(encoding="utf-8") == expected
    assert read_catalog(catalog)["g6e.48xlarge"].on_demand_usd_per_hour is None


def test_families_refreshes_only_those_families(
    refresh: ModuleType, capsys: pytest.CaptureFixture[str], aws: None, catalog: Path
) -> None:
    edit(catalog, (P4D, P4D_EDITED), (G5, G5_EDITED))
    code, out, _ = run(refresh, capsys, "--catalog", str(catalog), "--families", "g5", "--dry-run")
    assert code == 0
    assert [line.split(":")[0] for line in out[:-2]] == ["g5.xlarge", "g5.xlarge"]


def test_pagination_is_followed(
    refresh: ModuleType, capsys: pytest.CaptureFixture[str], catalog: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = ["p4d.24xlarge", "g5.xlarge"]
    with mock_aws():
        infos = boto3.client("ec2", region_name="us-west-2").describe_instance_types(InstanceTypes=names)
    by_name = {i["InstanceType"]: i for i in infos["InstanceTypes"]}
    header, *lines = ORIGINAL.splitlines()
    catalog.write_text(
        "\n".join([header, *(row for row in lines if row.split(",")[0] in names)]) + "\n", encoding="utf-8"
    )
    edit(catalog, (P4D, P4D_EDITED))

    client = stub_client("us-west-2")
    with Stubber(client) as stub:
        stub.add_response(
            "describe_instance_types",
            {"InstanceTypes": [by_name["p4d.24xlarge"]], "NextToken": "page-2"},
            {"InstanceTypes": names},
        )
        stub.add_response(
            "describe_instance_types",
            {"InstanceTypes": [by_name["g5.xlarge"]]},
            {"InstanceTypes": names, "NextToken": "page-2"},
        )
        monkeypatch.setattr(refresh.boto3, "client", lambda *a, **k: client)
        code, out, err = run(refresh, capsys, "--catalog", str(catalog), "--dry-run")
        stub.assert_no_pending_responses()
    assert (code, err) == (0, [])
    assert out[-2] == "2 cell(s) in 1 row(s) would change; 0 row(s) would be added"


# --- errors: one line on stderr, exit 2, nothing written ---------------------------------


def assert_one_error_line(code: int, out: list[str], err: list[str], text: str) -> None:
    assert (code, out) == (2, [])
    assert err == [f"refresh_instance_catalog: error: {text}"]


def test_a_type_ec2_does_not_know(
    refresh: ModuleType, capsys: pytest.CaptureFixture[str], aws: None, catalog: Path
) -> None:
    edited = edit(catalog, ("g4dn.xlarge,", "g4dn.xlarg,"))
    code, out, err = run(refresh, capsys, "--catalog", str(catalog))
    assert_one_error_line(
        code,
        out,
        err,
        "EC2 in us-west-2 does not know a catalog type: The following supplied instance types do not exist: "
        "[g4dn.xlarg]; fix: pass --region where it is offered, or delete its row",
    )
    assert catalog.read_text(encoding="utf-8") == edited


@pytest.mark.parametrize(
    ("families", "text"),
    [
        ("g9", "--families: EC2 in us-west-2 has no instance types of family 'g9'"),
        ("m5", "m5.large has no GPU (no GpuInfo); fix: the catalog holds GPU instance types only"),
        ("G5", "--families: 'G5' is not an instance family; fix: give names such as g6e,p5"),
        (
            "g6f",
            "g6f.large has a fraction of a GPU (GpuPartitionSize 0.125); fix: the catalog holds whole-GPU types only, "
            "leave its family out of --families",
        ),
    ],
)
def test_a_family_that_cannot_be_added(
    refresh: ModuleType, capsys: pytest.CaptureFixture[str], aws: None, catalog: Path, families: str, text: str
) -> None:
    code, out, err = run(refresh, capsys, "--catalog", str(catalog), "--families", families)
    assert_one_error_line(code, out, err, text)
    assert catalog.read_text(encoding="utf-8") == ORIGINAL


def test_access_denied(
    refresh: ModuleType, capsys: pytest.CaptureFixture[str], catalog: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = stub_client("eu-west-1")
    with Stubber(client) as stub:
        stub.add_client_error(
            "describe_instance_types",
            service_error_code="UnauthorizedOperation",
            service_message="You are not authorized to perform this operation.",
        )
        monkeypatch.setattr(refresh.boto3, "client", lambda *a, **k: client)
        code, out, err = run(refresh, capsys, "--catalog", str(catalog), "--region", "eu-west-1")
    assert_one_error_line(
        code,
        out,
        err,
        "DescribeInstanceTypes in eu-west-1 failed: UnauthorizedOperation: You are not authorized to perform this operation.",
    )


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=60
    )


def _no_aws_env(tmp_path: Path) -> dict[str, str]:
    """An environment with no way to find credentials, and no metadata service to ask."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        HOME=str(tmp_path),
        AWS_CONFIG_FILE=str(tmp_path / "no-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-credentials"),
        AWS_EC2_METADATA_DISABLED="true",
    )
    return env


def test_no_credentials_from_the_command_line(tmp_path: Path, catalog: Path) -> None:
    result = _cli(["--catalog", str(catalog)], _no_aws_env(tmp_path))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [
        "refresh_instance_catalog: error: no AWS credentials found; fix: set AWS_PROFILE (or run 'aws sso login') "
        "for an account that may call ec2:DescribeInstanceTypes"
    ]


def test_missing_catalog_from_the_command_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope.csv"
    result = _cli(["--catalog", str(missing), "--dry-run"], _no_aws_env(tmp_path))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [
        f"refresh_instance_catalog: error: {missing}: file not found; fix: pass --catalog with the path of gpu_instances.csv"
    ]


def test_hardware_cells_formats_as_the_csv_does(refresh: ModuleType, aws: None) -> None:
    info: dict[str, Any] = boto3.client("ec2", region_name="us-west-2").describe_instance_types(
        InstanceTypes=["g6e.48xlarge"]
    )["InstanceTypes"][0]
    assert refresh.hardware_cells(info) == {
        "gpu_count": "8",
        "gpu_model": "NVIDIA L40S",
        "gpu_memory_gib": "44.7",
        "vcpus": "192",
        "memory_gib": "1536",
        "network_cards": "4",
        "max_efa_interfaces": "4",
        "efa_supported": "true",
        "network_performance": "400 Gigabit",
    }

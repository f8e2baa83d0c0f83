"""The GPU instance catalog: the facts fleets and config validation rely on, and its errors for people."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.catalog import (
    CATALOG_PATH,
    COLUMNS,
    CatalogError,
    InstanceType,
    UnknownInstanceType,
    efa_layout,
    efa_sizes,
    get_instance_type,
    load_catalog,
    read_catalog,
)

REQUIRED = ["p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5.4xlarge", "p5e.48xlarge", "p5en.48xlarge"]
G_SIZES = ["xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge"]
EVERY_SIZE = {
    "g4dn": [*G_SIZES, "metal"],
    "g5": [*G_SIZES, "24xlarge", "48xlarge"],
    "g6": [*G_SIZES, "24xlarge", "48xlarge"],
    "g6e": [*G_SIZES, "24xlarge", "48xlarge"],
}

#: DESIGN.md's public cross-check (eksctl's generated table, Aug 2026), plus g4dn.metal,
#: which eksctl leaves out with every other .metal type and DescribeInstanceTypes marks EFA.
EFA_CROSS_CHECK = {
    "g4dn": ["8xlarge", "12xlarge", "16xlarge", "metal"],
    "g5": ["8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge"],
    "g6": ["8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge"],
    "g6e": ["8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge"],
    "p4d": ["24xlarge"],
    "p4de": ["24xlarge"],
    "p5": ["4xlarge", "48xlarge"],
    "p5e": ["48xlarge"],
    "p5en": ["48xlarge"],
}

GPU_MODEL = {
    "g4dn": "NVIDIA T4",
    "g5": "NVIDIA A10G",
    "g6": "NVIDIA L4",
    "g6e": "NVIDIA L40S",
    "p4d": "NVIDIA A100",
    "p4de": "NVIDIA A100",
    "p5": "NVIDIA H100",
    "p5e": "NVIDIA H200",
    "p5en": "NVIDIA H200",
}

#: Types without a us-east-1 On-Demand price (see SOURCES.md); any other empty price is a mistake.
NO_US_EAST_1_PRICE = {"p5e.48xlarge"}


@pytest.fixture(scope="module")
def catalog() -> dict[str, InstanceType]:
    return load_catalog()


def test_the_shipped_catalog_loads_with_every_required_type(catalog: dict[str, InstanceType]) -> None:
    assert set(REQUIRED) <= set(catalog)


@pytest.mark.parametrize("family", sorted(EVERY_SIZE))
def test_every_size_of_the_g_families_is_listed_in_size_order(catalog: dict[str, InstanceType], family: str) -> None:
    assert [t.size for t in catalog.values() if t.family == family] == EVERY_SIZE[family]


def test_p4d_has_four_efa_interfaces_on_cards_0_to_3() -> None:
    p4d = get_instance_type("p4d.24xlarge")
    assert (p4d.gpu_count, p4d.gpu_model, p4d.gpu_memory_gib) == (8, "NVIDIA A100", 40)
    assert (p4d.vcpus, p4d.memory_gib, p4d.network_cards, p4d.max_efa_interfaces) == (96, 1152, 4, 4)
    assert efa_layout("p4d.24xlarge") == (0, 1, 2, 3)


def test_p5_48xlarge_has_32_efa_interfaces_one_per_card() -> None:
    p5 = get_instance_type("p5.48xlarge")
    assert (p5.gpu_count, p5.gpu_model, p5.gpu_memory_gib, p5.vcpus, p5.memory_gib) == (8, "NVIDIA H100", 80, 192, 2048)
    assert efa_layout("p5.48xlarge") == tuple(range(32))


def test_p5en_has_16_network_cards_and_h200() -> None:
    p5en = get_instance_type("p5en.48xlarge")
    assert (p5en.gpu_model, p5en.gpu_memory_gib, p5en.network_cards) == ("NVIDIA H200", 141, 16)
    assert efa_layout("p5en.48xlarge") == tuple(range(16))


def test_g4dn_12xlarge_has_one_efa_interface_and_xlarge_none() -> None:
    assert efa_layout("g4dn.12xlarge") == (0,)
    assert efa_layout("g4dn.xlarge") == ()
    assert not get_instance_type("g4dn.xlarge").efa_supported


@pytest.mark.parametrize("family", sorted(EFA_CROSS_CHECK))
def test_efa_sizes_agree_with_the_public_cross_check(family: str) -> None:
    assert efa_sizes(family) == EFA_CROSS_CHECK[family]


def test_efa_sizes_reads_as_the_design_error_message_needs() -> None:
    assert (
        f"EFA sizes of g4dn: {', '.join(efa_sizes('g4dn'))}" == "EFA sizes of g4dn: 8xlarge, 12xlarge, 16xlarge, metal"
    )


def test_gpu_models_per_family(catalog: dict[str, InstanceType]) -> None:
    assert {t.family: t.gpu_model for t in catalog.values()} == GPU_MODEL


def test_nvswitch_and_gpudirect_rdma_only_on_the_8_gpu_p_types(catalog: dict[str, InstanceType]) -> None:
    eight_gpu_p = {"p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge"}
    assert {n for n, t in catalog.items() if t.nvswitch} == eight_gpu_p
    assert {n for n, t in catalog.items() if t.gpudirect_rdma} == eight_gpu_p


def test_prices_are_positive_and_only_p5e_lacks_one(catalog: dict[str, InstanceType]) -> None:
    assert {n for n, t in catalog.items() if t.on_demand_usd_per_hour is None} == NO_US_EAST_1_PRICE
    assert all(t.on_demand_usd_per_hour > 0 for t in catalog.values() if t.on_demand_usd_per_hour is not None)


def test_unknown_type_message_names_it_and_suggests_the_close_ones() -> None:
    with pytest.raises(UnknownInstanceType) as info:
        get_instance_type("g4dn.xlarg")
    assert str(info.value) == (
        "g4dn.xlarg is not in the GPU instance catalog; did you mean g4dn.xlarge, g4dn.8xlarge or g4dn.4xlarge? (config/catalog/gpu_instances.csv)"
    )
    assert isinstance(info.value, ValueError)
    assert not isinstance(info.value, KeyError)


def test_unknown_type_without_a_close_match_lists_the_families() -> None:
    with pytest.raises(UnknownInstanceType) as info:
        get_instance_type("m5.large")
    assert str(info.value) == (
        "m5.large is not in the GPU instance catalog; it lists the families "
        "p4d, p4de, p5, p5e, p5en, g4dn, g5, g6, g6e; to add a GPU family or size, run "
        "scripts/refresh_instance_catalog.py --families m5 (config/catalog/gpu_instances.csv)"
    )


def test_unknown_family_in_efa_sizes() -> None:
    with pytest.raises(UnknownInstanceType, match=r"^family g4 is not in the GPU instance catalog; it lists"):
        efa_sizes("g4")


def test_load_catalog_is_cached_but_hands_out_copies() -> None:
    first = load_catalog()
    first.pop("p4d.24xlarge")
    assert "p4d.24xlarge" in load_catalog()
    assert load_catalog()["p5.48xlarge"] is load_catalog(CATALOG_PATH)["p5.48xlarge"]


def test_rows_are_frozen() -> None:
    with pytest.raises(ValueError, match="frozen"):
        get_instance_type("p4d.24xlarge").max_efa_interfaces = 1  # type: ignore[misc]


def _copy_with(tmp_path: Path, old: str, new: str) -> Path:
    text = CATALOG_PATH.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "gpu_instances.csv"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "p4d.24xlarge,p4d,8,NVIDIA A100,40,96,1152,4,4,true",
            "p4d.24xlarge,p4d,8,NVIDIA A100,40,96,1152,4,4,yes",
            "line 2: p4d.24xlarge: efa_supported: 'yes' is not a boolean; fix: write true or false",
        ),
        (
            "p4d.24xlarge,p4d,8,NVIDIA A100,40,96,1152,4,4,true",
            "p4d.24xlarge,p4d,8,NVIDIA A100,40,96,1152,4,0,true",
            "line 2: p4d.24xlarge: efa_supported is true but max_efa_interfaces is 0; "
            "fix: refresh the row from DescribeInstanceTypes",
        ),
        (
            "p4d.24xlarge,p4d,",
            "p4d.24xlarge,p4,",
            "line 2: p4d.24xlarge: family 'p4' does not match p4d.24xlarge; fix: set it to 'p4d'",
        ),
        (
            ",21.957642\n",
            ",-1\n",
            "line 2: p4d.24xlarge: on_demand_usd_per_hour: Input should be greater than 0",
        ),
        (
            "p4de.24xlarge,p4de,",
            "p4d.24xlarge,p4d,",
            "line 3: p4d.24xlarge is listed twice; fix: keep one row",
        ),
    ],
)
def test_a_broken_catalog_file_names_file_line_and_fix(tmp_path: Path, old: str, new: str, message: str) -> None:
    path = _copy_with(tmp_path, old, new)
    with pytest.raises(CatalogError) as info:
        read_catalog(path)
    assert str(info.value) == f"{path}: {message}"


def test_a_wrong_header_is_reported(tmp_path: Path) -> None:
    path = _copy_with(tmp_path, "gpu_count,", "gpus,")
    with pytest.raises(CatalogError, match=r": line 1: the header must be instance_type,family,gpu_count,"):
        read_catalog(path)
    assert COLUMNS[2] == "gpu_count"

"""The fabric floors table: every row a catalog EFA type with its source, every shipped training type
covered, bad rows refused in one line that names the file, the line, the field and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.catalog import CatalogError, get_instance_type
from config.catalog.fabric_floors import FLOORS_PATH, fabric_floor, read_floors
from config.fleets.fleet import FleetRole
from config.loader import CONFIG_DIR, available_environments, load_environment

SOURCES = FLOORS_PATH.with_name("SOURCES.md").read_text(encoding="utf-8")


def test_each_floor_is_an_efa_type_with_a_source_described_in_sources_md() -> None:
    floors = read_floors()
    assert {"p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge"} <= set(floors)
    section = SOURCES.split("## Fabric floors", 1)[1]
    for name, floor in floors.items():
        assert get_instance_type(name).efa_supported
        assert floor.min_busbw_gbps > 0 and floor.message_bytes == 2**30
        assert f"`{name}`" in section, f"SOURCES.md says nothing of the floor of {name}"


def test_every_shipped_training_fleet_has_a_floor() -> None:
    for env in available_environments(CONFIG_DIR):
        for fleet in load_environment(env, CONFIG_DIR).fleets:
            if fleet.role is FleetRole.TRAINING and fleet.efa:
                for name in fleet.instance_types:
                    assert fabric_floor(name) is not None, f"{env}/{fleet.name}: {name} has no fabric floor"


def test_a_type_without_a_row_has_no_floor() -> None:
    assert fabric_floor("g5.2xlarge") is None


HEADER = "instance_type,message_bytes,min_busbw_gbps,source\n"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("p4d.24xlarge,1073741824,26.0,x\np4d.24xlarge,1073741824,26.0,x\n", "line 3: p4d.24xlarge is listed twice"),
        ("p9.48xlarge,1073741824,26.0,x\n", "line 2: instance_type: p9.48xlarge is not in the GPU instance catalog"),
        ("p4d.24xlarge,1G,26.0,x\n", "line 2: message_bytes: '1G'; fix: write a positive number of bytes"),
        ("p4d.24xlarge,1073741824,fast,x\n", "line 2: min_busbw_gbps: 'fast'; fix: write a positive number of GB/s"),
        ("p4d.24xlarge,1073741824,26.0, \n", "line 2: source: empty; fix:"),
        ("p4d.24xlarge,1073741824,26.0\n", "line 2: expected 4 cells"),
    ],
)
def test_bad_rows_are_one_line_errors(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "fabric_floors.csv"
    path.write_text(HEADER + body, encoding="utf-8")
    with pytest.raises(CatalogError) as err:
        read_floors(path)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value)
    assert "\n" not in str(err.value)


def test_wrong_header_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "fabric_floors.csv"
    path.write_text("type,floor\n", encoding="utf-8")
    with pytest.raises(CatalogError, match="line 1: the header must be instance_type,message_bytes"):
        read_floors(path)
    with pytest.raises(CatalogError, match="file not found"):
        read_floors(tmp_path / "absent.csv")

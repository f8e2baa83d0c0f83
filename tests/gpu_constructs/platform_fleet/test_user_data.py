"""A fleet's boot script: the file system it reads named on its second line, people only on Slurm nodes."""

from __future__ import annotations

from config.catalog import get_instance_type
from config.identity import file_system_identity
from gpu_constructs.platform_fleet.user_data import fleet_user_data, reading_file_system
from stacks.platform_stage import PlatformStage


def _script(stage: PlatformStage, name: str) -> list[str]:
    site = stage.fleets.site
    fleet = next(f for f in site.env.fleets if f.name == name)
    catalog = [get_instance_type(t) for t in fleet.instance_types]
    return fleet_user_data(site, fleet, catalog).render().splitlines()


def test_the_file_system_identity_follows_the_first_line() -> None:
    assert reading_file_system("fs-1", ["set -euo pipefail", "a", "b"]) == [
        "set -euo pipefail",
        "# reads the Lustre file system fs-1",
        "a",
        "b",
    ]


def test_every_fleet_names_the_file_system_it_reads(stage: PlatformStage) -> None:
    identity = file_system_identity(stage.fleets.site.env)
    for fleet in stage.fleets.site.env.fleets:
        lines = _script(stage, fleet.name)
        assert lines[2] == f"# reads the Lustre file system {identity}", fleet.name  # after the shebang and set


def test_only_a_slurm_fleets_nodes_get_the_clusters_people(stage: PlatformStage) -> None:
    for fleet in stage.fleets.site.env.fleets:
        script = "\n".join(_script(stage, fleet.name))
        has_people = 'slurm_people.py" users' in script
        assert has_people == (fleet.scheduler.value == "slurm"), fleet.name

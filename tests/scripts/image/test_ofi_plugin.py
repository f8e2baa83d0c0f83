"""NCCL's OFI plugin is looked up by one piece of code, scripts/node/health/ofi_plugin.py: the node's EFA health
check imports it, and the golden image's checks (the efa component's validate phase, the gpu-validation test
component) embed its source. So a plugin the image finds, every node finds, wherever the EFA installer puts it
below its folder; and an image whose plugin the nodes would miss fails its own checks.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from config.image import DEFAULT_VERSIONS
from tests.scripts.image.documents import NODE_DIR, script_of
from tests.scripts.image.fake_system import FakeSystem, Parent

from health import efa, ofi_plugin  # isort: skip - scripts/node is on sys.path (tests/scripts/image/documents.py)

SOURCE = (NODE_DIR / "health" / "ofi_plugin.py").read_text()
PARAMETERS = {**DEFAULT_VERSIONS, "ExpectedGpuCount": "4", "ExpectEfa": "true"}
INSTALLED = "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so"  # where the fake EFA installer puts it


def test_the_image_checks_run_the_node_lookup_itself() -> None:
    for component, step in (("efa", "ValidateEfa"), ("gpu-validation", "CheckEfa")):
        assert SOURCE in script_of(component, step), f"{component} {step} does not embed health/ofi_plugin.py"
    assert efa.find_plugin is ofi_plugin.find_plugin
    assert efa.OFI_NCCL_ROOTS == ofi_plugin.OFI_NCCL_ROOTS


def _efa_image(tmp_path: Path) -> FakeSystem:
    pin = DEFAULT_VERSIONS["EfaInstallerVersion"]
    parent = Parent(installed={}, offered={}, efa=(pin, DEFAULT_VERSIONS["AwsOfiNcclVersion"] + "-1"))
    system = FakeSystem(tmp_path, parent)
    (built,) = [r for r in system.run("efa", ("build",), PARAMETERS) if r.where.endswith("/InstallEfa")]
    assert built.returncode == 0, built
    return system


@pytest.mark.parametrize("folder", ["opt/amazon/ofi-nccl/lib", "opt/amazon/ofi-nccl/lib/nccl", "opt/aws-ofi-nccl/lib"])
def test_a_plugin_the_image_finds_every_node_finds(tmp_path: Path, folder: str) -> None:
    """Also one level deeper than today's installer puts it: the image passes and the nodes find it."""
    system = _efa_image(tmp_path)
    moved = system.root / folder / "libnccl-net-ofi.so"
    moved.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(system.root / INSTALLED, moved)
    for component, phase in (("efa", "validate"), ("gpu-validation", "test")):
        (result,) = system.run(component, (phase,), PARAMETERS, ("ValidateEfa", "CheckEfa"))
        assert result.returncode == 0, result
        assert str(moved) in result.stdout
    roots = [str(system.root) + root for root in efa.OFI_NCCL_ROOTS]
    assert efa.find_ofi_nccl(roots) == str(moved)


def test_an_image_without_the_plugin_fails_where_the_nodes_would(tmp_path: Path) -> None:
    system = _efa_image(tmp_path)
    (system.root / INSTALLED).unlink()
    (result,) = system.run("gpu-validation", ("test",), PARAMETERS, ("CheckEfa",))
    assert result.returncode != 0
    assert result.stderr.splitlines() == [
        "NCCL's OFI plugin (libnccl-net*.so*) is not under /opt/amazon/ofi-nccl or /opt/aws-ofi-nccl",
        "ERROR: an EFA fleet launches this image (ExpectEfa) but NCCL's OFI plugin is missing (message above)",
    ]
    assert efa.find_ofi_nccl([str(system.root) + root for root in efa.OFI_NCCL_ROOTS]) is None


def test_without_efa_fleets_the_image_is_not_asked_for_efa_software(tmp_path: Path) -> None:
    system = FakeSystem(tmp_path, Parent(installed={}, offered={}))
    (result,) = system.run("gpu-validation", ("test",), {**PARAMETERS, "ExpectEfa": "false"}, ("CheckEfa",))
    assert result.returncode == 0, result
    assert "no EFA fleet launches this image" in result.stdout

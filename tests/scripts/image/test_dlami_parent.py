"""The image built on a parent laid out the way the Deep Learning Base OSS Nvidia Driver AMI (Ubuntu 24.04) is.

AWS's release notes of that AMI list several CUDA stacks side by side (``nvidia_cuda_stack``
/usr/local/cuda-12.8,-12.9,-13.0,-13.2) with ``default_cuda`` /usr/local/cuda-13.2/: toolkits that no dpkg package owns
(what each is, CUDA's own /usr/local/cuda-X.Y/version.json says), each with the NCCL the AMI builds into its lib/. Its
kernel is the -aws flavour, whose metapackages Ubuntu's unattended-upgrades moves to a newer kernel whenever its timer
fires. The fake parent (tests/scripts/image/fake_system.py ``Parent``) models each of these; the components' real steps run on
it. What must hold: nothing of the parent is moved back (no older toolkit over a newer default, no package over a
toolkit dpkg cannot see), the versions file records what programs really get, no step installs a kernel, the
persistence daemon runs where the driver shipped no unit, and one Fabric Manager package, not two.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.scripts.image.documents import versions
from tests.scripts.image.drift import (
    NCCL,
    PARAMETERS,
    REPOSITORY,
    downgrades,
    fail_message,
    offering,
    pins_below_installed,
)
from tests.scripts.image.fake_system import KERNEL, FakeSystem, Parent, StepResult

#: The components these tests can run on the fake parent (pytorch needs a real venv, gpu-validation a GPU).
RUNNABLE = tuple(name for name in versions.RECIPE_ORDER if name not in {"pytorch", "node-runtime", "gpu-validation"})
#: The components of the CUDA stack: the toolkit, then cuDNN and NCCL for it.
CUDA = ("cuda-toolkit", "cuda-libraries")
#: The driver, then its services (Fabric Manager, the persistence daemon) and the reboot into it.
DRIVER = ("nvidia-driver", "nvidia-services")
#: The Deep Learning AMI's toolkits (release notes: nvidia_cuda_stack) and what their version.json says.
DLAMI_CUDA = {"12.8": "12.8.1", "12.9": "12.9.1", "13.0": "13.0.2", "13.2": "13.2.1"}
#: The NCCL the AMI builds into each toolkit's lib/ (older than NcclVersion's 2.30.7).
DLAMI_NCCL = {"12.8": "2.27.7", "12.9": "2.27.7", "13.0": "2.28.9", "13.2": "2.28.9"}
#: The -aws kernel of the running image: its metapackages and the packages of the running kernel.
KERNEL_PACKAGES = {
    **dict.fromkeys(("linux-aws", "linux-image-aws", "linux-headers-aws"), "6.14.0.1017.17"),
    **dict.fromkeys((f"linux-image-{KERNEL}", f"linux-headers-{KERNEL}", f"linux-modules-{KERNEL}"), "6.14.0-1017.17"),
    "linux-firmware": "20240318.git3b128b60-0ubuntu2.9",
}
PENDING_KERNEL = "6.14.0-1018-aws"


def dlami(**changes: object) -> Parent:
    """The Deep Learning AMI: driver 595 with its Fabric Manager, DCGM, EFA, CUDA 12.8 to 13.2 (default 13.2)."""
    fields: dict[str, object] = {
        "installed": {
            **KERNEL_PACKAGES,
            "nvidia-fabricmanager-595": "595.91.07-1",
            "datacenter-gpu-manager-4-cuda13": "1:4.7.0-1",
            "datacenter-gpu-manager-4-core": "1:4.7.0-1",
            f"lustre-client-modules-{KERNEL}": "2.15.6-1fsx34",
        },
        "offered": REPOSITORY,
        "driver": "595.91.07",
        "efa": ("1.50.0", "1.21.1-1"),
        "cuda": DLAMI_CUDA,
        "cuda_default": "13.2",
        "toolkit_nccl": DLAMI_NCCL,
    }
    fields.update(changes)
    return Parent(**fields)  # type: ignore[arg-type]


def build(system: FakeSystem, names: tuple[str, ...] = RUNNABLE) -> Iterator[StepResult]:
    for name in names:
        yield from system.run(name, ("build", "validate"), PARAMETERS)


def succeeds(system: FakeSystem, names: tuple[str, ...] = RUNNABLE) -> list[StepResult]:
    results = list(build(system, names))
    for result in results:
        assert result.returncode == 0, fail_message(result)
    return results


def installs(system: FakeSystem, pattern: str) -> list[str]:
    return [f"{c['package']}={c['version']}" for c in system.snapshot()["log"] if c["package"].startswith(pattern)]


# --- CUDA: the parent's toolkits are what it carries, whether or not dpkg knows them ------------------------------


@pytest.fixture(scope="module")
def dlami_cuda(tmp_path_factory: pytest.TempPathFactory) -> tuple[FakeSystem, list[StepResult]]:
    """The CUDA stack built once on the Deep Learning AMI as it is, for the tests that read that build."""
    system = FakeSystem(tmp_path_factory.mktemp("dlami-cuda"), dlami())
    return system, succeeds(system, CUDA)


def test_a_newer_default_cuda_of_the_pins_major_is_kept_and_no_older_toolkit_is_installed(
    dlami_cuda: tuple[FakeSystem, list[StepResult]],
) -> None:
    system, results = dlami_cuda
    assert installs(system, "cuda-toolkit") == []
    assert (system.root / "usr/local/cuda").readlink() == Path("cuda-13.2")
    recorded = system.recorded()
    assert (recorded["CudaVersion"], recorded["CudaDefault"]) == ("13.2.1", "13.2.1")
    # cuDNN and NCCL follow the carried toolkit: its major, and NCCL's build for its minor.
    assert system.snapshot()["installed"]["libcudnn9-cuda-13"] == "9.24.0.43-1"
    assert {p: system.snapshot()["installed"][p] for p in NCCL} == dict.fromkeys(NCCL, "2.30.7-1+cuda13.2")
    assert recorded["NcclVersion"] == "2.30.7"
    # The toolkit's own NCCL is not what programs load by default: the build says where it is and what it is.
    assert "/usr/local/cuda-13.2/lib/libnccl.so.2.28.9" in "".join(r.stdout for r in results)
    assert downgrades(system.snapshot()) == [] and pins_below_installed(system.root, system.snapshot()) == []


def test_a_default_of_a_newer_cuda_major_stays_the_default_beside_the_pinned_toolkit(tmp_path: Path) -> None:
    system = FakeSystem(
        tmp_path, dlami(cuda={"13.0": "13.0.2", "14.0": "14.0.1"}, cuda_default="14.0", toolkit_nccl={})
    )
    succeeds(system, CUDA)
    assert installs(system, "cuda-toolkit") == ["cuda-toolkit-13-0=13.0.3-1"]  # 13.0.2 (runfile) -> 13.0.3: newer
    assert (system.root / "usr/local/cuda").readlink() == Path("cuda-14.0")
    recorded = system.recorded()
    assert (recorded["CudaVersion"], recorded["CudaDefault"]) == ("13.0.3", "14.0.1")


@pytest.mark.parametrize("version", ["13.0.5", "13.0.20251120"])  # a newer patch; a runfile's build-date third number
def test_a_toolkit_without_a_package_at_the_pins_minor_and_not_older_is_never_overwritten(
    tmp_path: Path, version: str
) -> None:
    system = FakeSystem(tmp_path, dlami(cuda={"13.0": version}, cuda_default="13.0", toolkit_nccl={}))
    succeeds(system, CUDA)
    assert installs(system, "cuda-toolkit") == []
    assert (system.recorded()["CudaVersion"], system.recorded()["CudaDefault"]) == (version, version)


# --- NCCL: the recorded one is the one programs load ---------------------------------------------------------------


def test_an_older_nccl_the_linker_finds_first_fails_the_build_naming_it(tmp_path: Path) -> None:
    system = FakeSystem(tmp_path, dlami(ld_conf=("/usr/local/cuda/lib",)))
    results = list(build(system, CUDA))
    failed = results[-1]
    assert failed.returncode != 0 and failed.where.startswith(CUDA[-1] + "/build/")
    assert failed.stderr.splitlines()[-1].startswith(
        "ERROR: programs load /usr/local/cuda-13.2/lib/libnccl.so.2.28.9 (NCCL 2.28.9), not libnccl2 2.30.7"
    )


def test_a_newer_nccl_the_linker_finds_first_is_what_the_image_records(tmp_path: Path) -> None:
    system = FakeSystem(tmp_path, dlami(ld_conf=("/usr/local/cuda/lib",), toolkit_nccl={"13.2": "2.31.2"}))
    succeeds(system, CUDA)
    assert system.recorded()["NcclVersion"] == "2.31.2"


def test_the_validate_phase_fails_when_programs_would_load_another_nccl_than_recorded(
    dlami_cuda: tuple[FakeSystem, list[StepResult]],
) -> None:
    system, _ = dlami_cuda
    (passed,) = system.run(CUDA[-1], ("validate",), PARAMETERS)  # the build as it is passes its validate phase
    assert passed.returncode == 0, fail_message(passed)
    conf = system.root / "etc/ld.so.conf.d/000_cuda.conf"
    conf.write_text("/usr/local/cuda/lib\n")  # a change after the build
    try:
        (failed,) = [r for r in system.run(CUDA[-1], ("validate",), PARAMETERS) if r.returncode]
    finally:
        conf.unlink()  # the validate phase reads and writes nothing else: the shared build is as it was
    assert "programs load /usr/local/cuda-13.2/lib/libnccl.so.2.28.9" in failed.stderr


# --- The kernel: nothing installs another one during the build, nor on the image ------------------------------------


@pytest.mark.slow
def test_a_pending_kernel_upgrade_is_never_installed_and_the_image_keeps_automatic_upgrades_off(tmp_path: Path) -> None:
    system = FakeSystem(tmp_path, dlami(pending_kernel=PENDING_KERNEL))
    succeeds(system)
    state = system.snapshot()
    assert state["kernels"] == [KERNEL]
    assert [c for c in state["log"] if c["tool"] == "unattended-upgrade"] == []
    assert {"apt-daily.timer", "apt-daily-upgrade.timer", "unattended-upgrades.service"} <= set(state["masked"])
    assert set(state["held"]) == set(KERNEL_PACKAGES) - {"linux-firmware"}
    assert system.recorded()["Kernel"] == KERNEL


def test_the_fake_parent_does_install_the_pending_kernel_when_nothing_stops_it(tmp_path: Path) -> None:
    """The model behind the test above: apt running with the timer live brings the kernel in."""
    system = FakeSystem(tmp_path, dlami(pending_kernel=PENDING_KERNEL))
    system.run("nvidia-driver", ("build",), PARAMETERS, ("ConfigureNvidiaRepository",))
    assert system.snapshot()["kernels"] == [KERNEL, PENDING_KERNEL]


# --- The driver's services: one Fabric Manager, persistence mode with or without a packaged unit -------------------


def test_an_installed_unversioned_fabric_manager_is_kept_and_no_second_one_installed(tmp_path: Path) -> None:
    installed = {k: v for k, v in dlami().installed.items() if k != "nvidia-fabricmanager-595"}
    parent = dlami(
        installed={**installed, "nvidia-fabricmanager": "595.91.07-1"},
        offered={**REPOSITORY, "nvidia-fabricmanager": ["595.91.07-1"]},
    )
    system = FakeSystem(tmp_path, parent)
    succeeds(system, DRIVER)
    assert installs(system, "nvidia-fabricmanager") == []
    assert "nvidia-fabricmanager-595" not in system.snapshot()["installed"]


@pytest.mark.parametrize("packaged", [True, False], ids=["packaged unit", "runfile driver without a unit"])
def test_the_persistence_daemon_runs_in_persistence_mode_with_or_without_a_packaged_unit(
    tmp_path: Path, packaged: bool
) -> None:
    system = FakeSystem(tmp_path, dlami(persistenced_unit=packaged))
    for name in DRIVER:
        for result in system.run(name, ("build", "validate", "test"), PARAMETERS):
            assert result.returncode == 0, fail_message(result)
    unit = system.root / "etc/systemd/system/nvidia-persistenced.service"
    assert unit.exists() is not packaged  # the packaged unit is kept, a missing one written
    if not packaged:
        text = unit.read_text()
        assert "\nType=forking\n" in text and "\nWantedBy=multi-user.target\n" in text
        (start,) = [line for line in text.splitlines() if line.startswith("ExecStart=")]
        assert (
            start.startswith(f"ExecStart={system.bin}/nvidia-persistenced ") and "--persistence-mode" in start.split()
        )
    assert (system.root / "etc/systemd/system/multi-user.target.wants/nvidia-persistenced.service").exists()


def test_nccl_for_the_parents_default_cuda_is_preferred_over_another_minors_build(tmp_path: Path) -> None:
    offered = ["2.30.7-1+cuda13.0", "2.30.7-1+cuda13.2"]
    system = FakeSystem(tmp_path, dlami(offered={**REPOSITORY, **offering(NCCL, offered)}))
    succeeds(system, CUDA)
    assert system.snapshot()["installed"]["libnccl2"] == "2.30.7-1+cuda13.2"

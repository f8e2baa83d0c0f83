"""The image pipeline survives its parent moving: the components' real steps, run on a faked parent image.

The parent is the Deep Learning AMI's ``latest`` parameter, and AWS moves what it carries (driver, DCGM, EFA...)
between two builds. Each component keeps what the parent has at its pin or newer, installs the pin where the
parent has less or nothing, records what the image carries in /opt/gpu-platform/image-versions.json, and its
validate and test phases check that record. Whatever the parent: no step asks apt for a downgrade, and no apt
pin holds a package below the version installed. A parent driver of an older branch than the pin's is refused
in one line. (tests/scripts/image/fake_system.py: the fake parent and how the steps run on it.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from config.image import COMPONENTS, DEFAULT_VERSIONS
from tests.scripts.image.documents import NODE_OS_RELEASE
from tests.scripts.image.drift import (
    CUDNN,
    LUSTRE,
    NCCL,
    PARAMETERS,
    REPOSITORY,
    downgrades,
    fail_message,
    offering,
    pins_below_installed,
)
from tests.scripts.image.fake_system import KERNEL, FakeSystem, Parent, StepResult

#: The components the fake parent can run: every one of the recipe but those that need the network (pytorch: pip),
#: the node runtime (nothing of the parent's it could downgrade) and the test-only GPU checks.
BUILT = tuple(name for name in COMPONENTS.RECIPE_ORDER if name not in ("pytorch", "node-runtime", "gpu-validation"))
TESTED = {"nvidia-services": (), "dcgm": (), "efa": (), "gpu-validation": ("CheckEfa",)}
DRIVER = ("nvidia-driver", "nvidia-services")
CUDA = ("cuda-toolkit", "cuda-libraries")
OTHER_LUSTRE = "lustre-client-modules-6.8.0-1010-aws"  # the modules of a kernel the parent booted before
DCGM = ("datacenter-gpu-manager-4-core", "datacenter-gpu-manager-4-cuda13")


#: Parents: name -> (the parent, what the image must record).
PARENTS = {
    "as pinned, beside newer packages of another CUDA major and an older kernel": (
        Parent(
            installed={
                "nvidia-fabricmanager-595": "595.91.07-1",
                **dict.fromkeys(DCGM, "1:4.7.0-1"),
                LUSTRE: "2.15.6-1fsx34",
                OTHER_LUSTRE: "2.15.7-1fsx36",
                "libcudnn9-cuda-12": "9.26.0.12-1",
            },
            offered={
                **REPOSITORY,
                **offering((OTHER_LUSTRE,), REPOSITORY[LUSTRE]),
                **offering(("libcudnn9-cuda-12",), REPOSITORY[CUDNN[0]]),
            },
            driver="595.91.07",
            efa=("1.50.0", "1.21.1-1"),
        ),
        {},
    ),
    "ahead of every pin": (
        Parent(
            installed={
                "nvidia-fabricmanager-600": "600.12.03-1",
                **dict.fromkeys(DCGM, "1:4.9.1-1"),
                "cuda-toolkit-13-0": "13.0.5-1",
                **dict.fromkeys(CUDNN, "9.26.0.12-1"),
                **dict.fromkeys(NCCL, "2.31.2-1+cuda13.0"),
                **dict.fromkeys((LUSTRE, "lustre-client-utils"), "2.15.7-1fsx36"),
                "amazon-cloudwatch-agent": "1.300080.0b1300-1",
            },
            offered=REPOSITORY,
            driver="600.12.03",
            efa=("1.52.0", "1.22.0-1"),
        ),
        {
            "NvidiaDriverVersion": "600.12.03",
            "DcgmVersion": "4.9.1",
            "CudaVersion": "13.0.5",
            "CudnnVersion": "9.26.0.12",
            "NcclVersion": "2.31.2",
            "EfaInstallerVersion": "1.52.0",
            "AwsOfiNcclVersion": "1.22.0",
            "LustreClientVersion": "2.15.7",
            "CloudWatchAgentVersion": "1.300080.0b1300",
        },
    ),
    "behind every pin, same driver branch": (
        Parent(
            installed={
                "nvidia-fabricmanager-595": "595.58.03-1",
                **dict.fromkeys(DCGM, "1:4.5.3-1"),
                "cuda-toolkit-13-0": "13.0.1-1",
                **dict.fromkeys(CUDNN, "9.20.0.1-1"),
                **dict.fromkeys(NCCL, "2.28.3-1+cuda13.0"),
                **dict.fromkeys((LUSTRE, "lustre-client-utils"), "2.15.5-1fsx30"),
                "amazon-cloudwatch-agent": "1.300060.0b1100-1",
            },
            offered={**REPOSITORY, **offering(NCCL, [*REPOSITORY["libnccl2"], "2.28.3-1+cuda13.0"])},
            driver="595.58.03",
            efa=("1.47.0", "1.18.0-1"),
        ),
        {"NvidiaDriverVersion": "595.58.03"},
    ),
}


def _run_all(system: FakeSystem) -> Iterator[StepResult]:
    for name in BUILT:
        yield from system.run(name, ("build", "validate"), PARAMETERS)
    for name, steps in TESTED.items():
        yield from system.run(name, ("test",), PARAMETERS, steps)


@pytest.mark.slow
@pytest.mark.parametrize("parent_name", sorted(PARENTS))
def test_every_step_succeeds_records_what_the_image_carries_and_never_downgrades(
    tmp_path: Path, parent_name: str
) -> None:
    parent, kept = PARENTS[parent_name]
    system = FakeSystem(tmp_path, parent)
    for result in _run_all(system):
        assert result.returncode == 0, fail_message(result)
    state = system.snapshot()
    assert downgrades(state) == []
    assert pins_below_installed(system.root, state) == []
    carried = {key: value for key, value in PARAMETERS.items() if key in system.recorded()}
    cuda = {**carried, **kept}["CudaVersion"]  # no parent here makes a newer toolkit the default
    assert system.recorded() == {**carried, **kept, "CudaDefault": cuda, "Kernel": KERNEL}
    assert set(system.recorded()) == {*DEFAULT_VERSIONS, "CudaDefault", "Kernel"} - {
        "TorchVersion",
        "TorchvisionVersion",
    }
    os_id, version, codename = NODE_OS_RELEASE  # the repositories of the image's OS (scripts/node/layout.py NODE_OS)
    lists = "".join(path.read_text() for path in (system.root / "etc/apt/sources.list.d").iterdir())
    assert f"/compute/cuda/repos/{os_id}{version.replace('.', '')}/x86_64/ /" in lists
    assert f"https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu {codename} main" in lists


def test_a_parent_without_a_driver_gets_the_pinned_driver_and_fabric_manager(tmp_path: Path) -> None:
    system = FakeSystem(tmp_path, Parent(installed={}, offered=REPOSITORY))
    for name in DRIVER:
        for result in system.run(name, ("build", "validate", "test"), PARAMETERS):
            assert result.returncode == 0, fail_message(result)
    installs = {(call["package"], call["version"]) for call in system.snapshot()["log"]}
    assert {("nvidia-driver-595-open", "595.91.07-1"), ("nvidia-fabricmanager-595", "595.91.07-1")} <= installs
    assert system.recorded() == {"NvidiaDriverVersion": "595.91.07"}
    assert (system.root / "etc/modprobe.d/gpu-platform-blacklist-nouveau.conf").exists()


def test_a_parent_driver_of_an_older_branch_is_refused_in_one_line(tmp_path: Path) -> None:
    parent = Parent(installed={"nvidia-fabricmanager-580": "580.105.08-1"}, offered=REPOSITORY, driver="580.105.08")
    system = FakeSystem(tmp_path, parent)
    *done, failed = system.run("nvidia-driver", ("build", "validate"), PARAMETERS)
    assert [r.returncode for r in done] == [0] and failed.where == "nvidia-driver/build/InstallNvidiaDriver"
    assert failed.stderr.splitlines() == [
        "ERROR: the parent image's NVIDIA driver 580.105.08 is older than branch 595 (NvidiaDriverVersion 595.91.07); "
        "fix: use a parent image with driver branch 595 or newer, or lower NvidiaDriverVersion"
    ]
    assert not [call for call in system.snapshot()["log"] if "nvidia" in call["package"]]


def test_a_parent_of_another_os_is_refused_before_anything_is_installed(tmp_path: Path) -> None:
    system = FakeSystem(tmp_path, Parent(installed={}, offered=REPOSITORY, os_release=("ubuntu", "22.04", "jammy")))
    (failed,) = system.run("dcgm", ("build",), PARAMETERS)
    assert failed.returncode != 0
    assert failed.stderr.splitlines() == [
        'ERROR: the parent image is not ubuntu 24.04 ("Ubuntu 22.04 LTS"); '
        "fix: set image.parent_image_parameter to an Ubuntu 24.04 x86_64 AMI"
    ]
    assert system.snapshot()["log"] == []


@pytest.mark.parametrize(
    ("offered", "expected"),
    [
        (REPOSITORY["libnccl2"], "2.30.7-1+cuda13.0"),  # the toolkit's own minor wins
        (["2.30.7-1+cuda13.2", "2.30.7-1+cuda12.9"], "2.30.7-1+cuda13.2"),  # else the newest of the same major
    ],
)
def test_nccl_is_taken_for_the_toolkits_cuda(tmp_path: Path, offered: list[str], expected: str) -> None:
    system = FakeSystem(tmp_path, Parent(installed={}, offered={**REPOSITORY, **offering(NCCL, offered)}))
    for name in CUDA:
        for result in system.run(name, ("build",), PARAMETERS):
            assert result.returncode == 0, fail_message(result)
    assert {p: system.snapshot()["installed"][p] for p in NCCL} == dict.fromkeys(NCCL, expected)


def test_nccl_for_another_cuda_major_is_refused(tmp_path: Path) -> None:
    system = FakeSystem(tmp_path, Parent(installed={}, offered={**REPOSITORY, **offering(NCCL, ["2.30.7-1+cuda12.9"])}))
    failed = [result for name in CUDA for result in system.run(name, ("build",), PARAMETERS)][-1]
    assert failed.returncode != 0
    assert "apt offers no libnccl2 2.30.7 built for CUDA 13" in failed.stderr
    assert "libnccl2" not in system.snapshot()["installed"]

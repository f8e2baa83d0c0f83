"""The real Slurm of tests/flows/slurm: started once per test process (each pytest-xdist worker that runs one of these
tests starts its own, on its own ports and folder), stopped after the last test, and on any failure."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.flows.slurm.cluster import SlurmCluster, Unavailable, start


def _unavailable(reason: str) -> None:
    """In CI (CI set) a Slurm that cannot run is a failure; on a laptop without it, a skip with the reason."""
    if os.environ.get("CI"):
        pytest.fail(f"real Slurm unavailable in CI: {reason}", pytrace=False)
    pytest.skip(f"real Slurm unavailable: {reason}")


@pytest.fixture(scope="session")
def slurm() -> Iterator[SlurmCluster]:
    if os.geteuid() != 0:
        _unavailable("the test cluster runs its daemons as root (SlurmUser=root); run the tests as root")
    try:
        cluster = start()
    except Unavailable as err:
        _unavailable(str(err))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def clean_slurm(slurm: SlurmCluster) -> Iterator[SlurmCluster]:
    """The cluster with both nodes in service before and after the test (a test may drain one)."""
    slurm.resume("a", "b")
    yield slurm
    slurm.run("scancel", "--full", "--user=root", check=False)
    for name in ("a", "b"):
        (slurm.path("health", name) / "args").unlink(missing_ok=True)
    slurm.resume("a", "b")

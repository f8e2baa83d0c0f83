"""AWS PCS's agent and Slurm build on the image of a Slurm environment: the pcs-slurm component's real steps, run on
faked parent images (tests/scripts/image/fake_system.py) against a faked AWS PCS repository (fake_downloads.py: tarballs whose
installer.sh leaves what AWS's does, signatures over their content, AWS PCS's key).

What a user relies on: the pinned releases are installed from AWS's regional bucket only once the key is AWS PCS's
and each signature verifies, else the build stops in one line naming what failed and nothing of it ran; a parent that
already has the agent or the cluster's Slurm at the pin or newer keeps it; the image records what it carries, and
the validate and test phases check the system against that record.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from config.image import DEFAULT_VERSIONS
from tests.scripts.image.fake_system import FakeSystem, Parent, StepResult
from tests.scripts.image.fake_tools import compare

#: AWS PCS's signing key, as the AWS PCS User Guide publishes its fingerprint (spaces left out).
PCS_KEY = "1C2432C1862F64D1F90A239A7EEF030EDDF5C21C"
AGENT, SLURM = "1.3.1-1", "26.05.1-1"
PARAMETERS = {**DEFAULT_VERSIONS, "PcsAgentVersion": AGENT, "PcsSlurmVersion": SLURM, "PcsRegion": "us-east-1"}
AGENT_TARBALL = f"aws-pcs-agent-v{AGENT}.tar.gz"
SLURM_TARBALL = f"aws-pcs-slurm-26.05-installer-{SLURM}.tar.gz"
PHASES = ("build", "validate", "test")


def _system(tmp_path: Path, *, agent: str | None = None, slurm: str | None = None, **repository: Any) -> FakeSystem:
    """A parent with the given PCS software (VERSION-RELEASE, None: none), and a repository changed by
    ``repository`` (fake_downloads.py: pcs_unpublished, pcs_tampered, pcs_key, pcs_extra_keys, pcs_signer,
    pcs_key_file)."""
    system = FakeSystem(tmp_path, Parent(installed={}, offered={}, pcs_agent=agent, pcs_slurm=slurm))
    state = json.loads(system.state.read_text())
    state.update(repository, log=[])  # the parent's own installs are not the build's
    system.state.write_text(json.dumps(state))
    return system


def _run(system: FakeSystem, phases: tuple[str, ...] = PHASES) -> list[StepResult]:
    return system.run("pcs-slurm", phases, PARAMETERS)


def _installs(system: FakeSystem) -> list[tuple[str, str, str | None]]:
    return [(c["package"], c["version"], c["before"]) for c in system.snapshot()["log"] if c["tool"] == "pcs installer"]


def test_a_parent_without_pcs_gets_the_pinned_agent_and_slurm_of_the_cluster(tmp_path: Path) -> None:
    system = _system(tmp_path)
    for result in _run(system):
        assert result.returncode == 0, result
    assert _installs(system) == [("aws-pcs-agent", AGENT, None), ("aws-pcs-slurm-26.05", SLURM, None)]
    assert system.recorded() == {"PcsAgentVersion": AGENT, "PcsSlurmVersion": SLURM}
    pcs = system.root / "opt/aws/pcs"
    assert "AGENT_VERSION='1.3.1'" in (pcs / "version").read_text()
    assert "SLURM_VERSION='26.05.1'" in (pcs / "scheduler/slurm-26.05/version").read_text()
    assert (system.root / "etc/systemd/system/slurmd-26.05.service").is_file()
    assert not (system.root / "var/tmp/gpu-platform-pcs").exists(), "the downloads are not left on the image"


@pytest.mark.parametrize(
    ("agent", "slurm"),
    [("1.5.0-1", "26.05.3-1"), (AGENT, SLURM), (AGENT, "26.05.1-2")],
    ids=["newer", "as-pinned", "newer-pcs-release"],
)
def test_a_parent_at_the_pins_or_newer_keeps_its_pcs_software(tmp_path: Path, agent: str, slurm: str) -> None:
    system = _system(tmp_path, agent=agent, slurm=slurm, pcs_unpublished=[AGENT_TARBALL, SLURM_TARBALL])
    for result in _run(system):
        assert result.returncode == 0, result
    assert _installs(system) == []
    assert system.recorded() == {"PcsAgentVersion": agent, "PcsSlurmVersion": slurm}


def test_a_parent_behind_the_pins_is_brought_to_them(tmp_path: Path) -> None:
    system = _system(tmp_path, agent="1.2.2-1", slurm="26.05.0-1")
    for result in _run(system):
        assert result.returncode == 0, result
    installs = _installs(system)
    assert installs == [("aws-pcs-agent", AGENT, "1.2.2-1"), ("aws-pcs-slurm-26.05", SLURM, "26.05.0-1")]
    assert all(before is None or compare(version, before) > 0 for _, version, before in installs)
    assert system.recorded() == {"PcsAgentVersion": AGENT, "PcsSlurmVersion": SLURM}


def test_another_slurm_of_the_parent_stays_beside_the_clusters(tmp_path: Path) -> None:
    """The agent starts the cluster's Slurm; a parent's build of another version neither counts nor goes."""
    system = _system(tmp_path, agent=AGENT, slurm="25.05.5-1")
    for result in _run(system):
        assert result.returncode == 0, result
    assert _installs(system) == [("aws-pcs-slurm-26.05", SLURM, None)]
    assert (system.root / "opt/aws/pcs/scheduler/slurm-25.05/version").is_file()
    assert system.recorded()["PcsSlurmVersion"] == SLURM


def _one_line_failure(system: FakeSystem) -> str:
    """The build step's one stderr line; nothing of AWS's tarballs ran."""
    (failed,) = _run(system, ("build",))
    assert failed.returncode != 0 and failed.where == "pcs-slurm/build/InstallPcsSoftware"
    (line,) = failed.stderr.splitlines()
    assert _installs(system) == [] and not (system.root / "opt/aws/pcs/version").exists()
    assert not (system.root / "opt/gpu-platform/image-versions.json").exists()
    return line


@pytest.mark.parametrize("tampered", [SLURM_TARBALL, AGENT_TARBALL])
def test_a_signature_that_does_not_verify_stops_the_build_before_any_installer_runs(
    tmp_path: Path, tampered: str
) -> None:
    assert _one_line_failure(_system(tmp_path, pcs_tampered=[tampered])) == (
        f"ERROR: the signature of {tampered} does not verify against AWS PCS's signing key {PCS_KEY}; "
        "nothing of it was run"
    )


def test_a_key_that_is_not_aws_pcss_stops_the_build(tmp_path: Path) -> None:
    other = "0" * 24 + "7EEF030EDDF5C21C"  # the same short id, another key
    assert _one_line_failure(_system(tmp_path, pcs_key=other)) == (
        f"ERROR: the key file at aws-pcs-repo-public-keys-us-east-1 holds 1 key(s) ({other}), not AWS PCS's signing "
        f"key {PCS_KEY} alone; nothing was installed"
    )


def test_a_key_file_that_is_no_key_stops_the_build_in_one_line(tmp_path: Path) -> None:
    system = _system(tmp_path, pcs_key_file="<Error><Code>AccessDenied</Code></Error>")
    assert _one_line_failure(system) == (
        "ERROR: the key file at aws-pcs-repo-public-keys-us-east-1 is not an OpenPGP key; nothing was installed"
    )


def test_a_key_file_with_another_key_beside_aws_pcss_stops_the_build(tmp_path: Path) -> None:
    """gpgv trusts every key of its keyring: tarballs signed by a key appended to AWS PCS's would verify."""
    extra = "F" * 40
    system = _system(tmp_path, pcs_extra_keys=[extra], pcs_signer=extra)
    assert _one_line_failure(system) == (
        f"ERROR: the key file at aws-pcs-repo-public-keys-us-east-1 holds 2 key(s) ({PCS_KEY},{extra}), not AWS PCS's "
        f"signing key {PCS_KEY} alone; nothing was installed"
    )


def test_a_release_aws_does_not_publish_stops_the_build_naming_it(tmp_path: Path) -> None:
    url = f"https://aws-pcs-repo-us-east-1.s3.us-east-1.amazonaws.com/aws-pcs-slurm/{SLURM_TARBALL}"
    assert _one_line_failure(_system(tmp_path, pcs_unpublished=[SLURM_TARBALL])) == (
        f"ERROR: could not download {url} (curl: (22) The requested URL returned error: 404); fix: pin a release AWS "
        "publishes (PcsAgentVersion, PcsSlurmVersion) and let the build reach S3"
    )


@pytest.mark.parametrize(
    ("parameter", "value", "expected"),
    [
        ("PcsAgentVersion", "latest", "PcsAgentVersion 'latest' is not an AWS PCS agent release (VERSION-RELEASE)"),
        ("PcsSlurmVersion", "26.05", "PcsSlurmVersion '26.05' is not an AWS PCS Slurm installer release"),
        ("PcsRegion", "us-east-1; curl x", "PcsRegion 'us-east-1; curl x' is not an AWS Region"),
    ],
)
def test_a_bad_parameter_is_refused_before_anything_is_downloaded(
    tmp_path: Path, parameter: str, value: str, expected: str
) -> None:
    system = _system(tmp_path)
    (failed,) = system.run("pcs-slurm", ("build",), {**PARAMETERS, parameter: value})
    assert failed.returncode != 0 and expected in failed.stderr
    assert len(failed.stderr.splitlines()) == 1 and system.snapshot()["log"] == []


def test_validation_catches_software_that_is_not_what_the_image_records(tmp_path: Path) -> None:
    system = _system(tmp_path)
    for result in _run(system, ("build",)):
        assert result.returncode == 0, result
    sinfo = system.root / "opt/aws/pcs/scheduler/slurm-26.05/bin/sinfo"
    sinfo.write_text("#!/bin/sh\necho 'slurm 25.05.5'\n")
    (failed,) = _run(system, ("validate",))
    assert failed.stderr.splitlines() == [
        "ERROR: /opt/aws/pcs/scheduler/slurm-26.05/bin/sinfo --version says 'slurm 25.05.5', "
        f"the image records PCS Slurm {SLURM}"
    ]


def test_the_fake_slurm_installer_asks_before_it_builds_as_aws_does(tmp_path: Path) -> None:
    """The component runs installer.sh -y: without it the (fake) installer stops at its question."""
    system = _system(tmp_path)
    with pytest.raises(subprocess.CalledProcessError):
        system._tool("fake-pcs-install", "slurm", "26.05.1", "1")


def test_a_login_shell_finds_the_clusters_slurm_commands(tmp_path: Path) -> None:
    system = _system(tmp_path)
    for result in _run(system, ("build", "validate")):
        assert result.returncode == 0, result
    profile = system.root / "etc/profile.d/gpu-platform-slurm.sh"
    prefix = "/opt/aws/pcs/scheduler/slurm-26.05/bin"
    shown = subprocess.run(
        ["bash", "-c", f'PATH=/usr/bin:/bin; . "{profile}"; . "{profile}"; echo "$PATH"'],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert shown == f"{prefix}:/usr/bin:/bin"  # first, and once however often a shell reads it

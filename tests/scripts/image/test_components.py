"""The Image Builder component documents under scripts/image/components/.

What a user relies on: each document is one Image Builder accepts (schema 1.0, real action
modules, the phases its kind needs), every version reaches it as a parameter from the config
(none is written in a body, none has a default), the scripts it runs are strict and pass
shellcheck, and the test component really performs each GPU check.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_constructs.image.component import MAX_INLINE_DATA, strip_leading_comments
from tests.scripts.image.documents import (
    ACTION_MODULES,
    DOCUMENTS,
    NODE_OS_RELEASE,
    bash_scripts,
    body_text,
    created_shell_files,
    declared_parameters,
    load,
    steps,
    versions,
)

SHELLCHECK = Path(sys.executable).with_name("shellcheck")

# Windows-only modules have no place in an Ubuntu image.
WINDOWS_ONLY = frozenset({"ExecutePowerShell", "InstallMSI", "UninstallMSI", "SetRegistry"})

# "To qualify as a test component, the component document must include only one phase, named
# test" (EC2 Image Builder user guide, "Create a YAML component document").
TEST_COMPONENTS = frozenset({"gpu-validation"})

# AWSTOE parameter names: 3-128 characters of [A-Za-z0-9_-] (user guide, "Use variables in your
# custom component document"); this project also wants PascalCase.
PARAMETER_NAME = re.compile(r"^[A-Z][A-Za-z0-9]{2,127}$")
# Image Builder's API pattern for a component name.
COMPONENT_NAME = re.compile(r"^[-_A-Za-z-0-9][-_A-Za-z0-9 ]{1,126}[-_A-Za-z-0-9]$")
STEP_NAME = re.compile(r"^[A-Z][A-Za-z0-9]+$")
REFERENCE = re.compile(r"\{\{\s*([^{}]+?)\s*\}\}")

# Things that are version numbers when they appear in a body: x.y.z, Debian/CUDA package
# suffixes like -12-8, PyTorch's cu128, pins like ==2.1 or =2.1. Allowed literals: the target
# Ubuntu release only.
LITERAL_VERSION = re.compile(r"\d+\.\d+\.\d+|-\d+-\d+\b|\bcu\d{3}\b|==?\s*\d+\.\d+")
ALLOWED_LITERALS = (NODE_OS_RELEASE[1],)

# What each parameter looks like when the stack fills it in; unknown names get a version.
SAMPLE_VALUES = {
    "PipIndexUrl": "https://example.invalid/whl/cuda",
    "ExpectedGpuCount": "8",
    "ExpectEfa": "true",
    "CudnnVersion": "9.1.2.3",
}
SAMPLE_VERSION = "1.2.3"

# The checks the test component must perform, each as text that has to appear in it.
REQUIRED_TEST_CHECKS = {
    "GPU count via nvidia-smi": "nvidia-smi --query-gpu",
    "torch sees CUDA": "torch.cuda.is_available()",
    "matmul on the GPU": "a.to(device) @ b.to(device)",
    "matmul compared with the CPU": "torch.allclose(result, reference",
    "EFA software: the installer's libfabric": "/opt/amazon/efa/lib*/libfabric.so",
    "EFA software: rdma-core's EFA library": "libefa\\.so\\.1",
    "EFA software: NCCL's OFI plugin, looked up as the nodes do": "def find_plugin(",
    "EFA only when an EFA fleet launches the image": "{{ ExpectEfa }}",
    "every carried version recorded": 'recorded "${key}"',
    "DCGM level-1 diagnostic": "dcgmi diag -r 1",
    "NCCL all-reduce launched across local GPUs": "torchrun --standalone",
    "all-reduce over NCCL": 'init_process_group(backend="nccl")',
    "all-reduce result values checked": "tensor != expected",
}


def substitute(text: str) -> str:
    return REFERENCE.sub(lambda match: SAMPLE_VALUES.get(match.group(1), SAMPLE_VERSION), text)


def shellcheck(path: Path, shell: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SHELLCHECK), "-s", shell, "-f", "gcc", str(path)], capture_output=True, text=True, check=False
    )


ALL = sorted(DOCUMENTS)
BUILD_COMPONENTS = sorted(set(DOCUMENTS) - TEST_COMPONENTS)


def test_every_component_of_versions_py_has_a_document_and_back() -> None:
    assert set(DOCUMENTS) == set(versions.VERSION_PARAMETERS) == set(versions.OTHER_PARAMETERS)
    assert sorted(versions.component_names()) == ALL
    assert set(versions.RECIPE_ORDER) == set(ALL) - set(versions.SLURM_COMPONENTS)
    assert set(versions.SLURM_COMPONENTS.values()) <= set(versions.RECIPE_ORDER)
    for order in (versions.recipe_order(slurm=False), versions.recipe_order(slurm=True)):
        assert order[0] == "os-updates", "automatic updates stop before any component runs apt"
        assert order[1:3] == ("nvidia-driver", "nvidia-services"), "the driver (and its reboot) next"
        assert order[-1] == "gpu-validation"
        # "Recipes ... can have a maximum of 20 build and test components" (Image Builder API reference, ImageRecipe).
        assert len(order) <= 20
    assert versions.recipe_order(slurm=False) == versions.RECIPE_ORDER
    for name in ALL:
        assert versions.component_path(name) == DOCUMENTS[name]


@pytest.mark.parametrize("name", ALL)
def test_document_has_the_top_level_fields_image_builder_needs(name: str) -> None:
    document = load(name)
    assert str(document["schemaVersion"]) == "1.0"
    assert COMPONENT_NAME.match(document["name"]), document["name"]
    assert isinstance(document["description"], str) and 20 <= len(document["description"]) <= 1024
    assert set(document) <= {"name", "description", "schemaVersion", "parameters", "phases", "constants"}


@pytest.mark.parametrize("name", BUILD_COMPONENTS)
def test_build_component_has_build_then_validate_and_optional_test(name: str) -> None:
    phases = [phase["name"] for phase in load(name)["phases"]]
    assert phases in (["build", "validate"], ["build", "validate", "test"]), phases


@pytest.mark.parametrize("name", sorted(TEST_COMPONENTS))
def test_test_component_has_exactly_one_phase_named_test(name: str) -> None:
    assert [phase["name"] for phase in load(name)["phases"]] == ["test"]


@pytest.mark.parametrize("name", ALL)
def test_every_step_uses_a_real_linux_action_module_and_is_uniquely_named(name: str) -> None:
    for phase in load(name)["phases"]:
        names = [step["name"] for step in phase["steps"]]
        assert names, f"{phase['name']} has no steps"
        assert len(names) == len(set(names)), f"{phase['name']}: duplicate step names {names}"
        for step in phase["steps"]:
            assert STEP_NAME.match(step["name"]), step["name"]
            assert step["action"] in ACTION_MODULES, f"{step['name']}: {step['action']} is not an AWSTOE action module"
            assert step["action"] not in WINDOWS_ONLY, f"{step['name']}: {step['action']} is Windows-only"
            assert "inputs" in step, f"{step['name']} has no inputs"


def test_the_driver_is_rebooted_into_after_its_install_and_its_services_and_before_anything_else() -> None:
    """Build phases run in recipe order, then the validate phases: one reboot, the last build step of the driver's
    services, which come right after the driver; no other component reboots."""

    def build_actions(name: str) -> list[str]:
        phase = next((phase for phase in load(name)["phases"] if phase["name"] == "build"), {"steps": []})
        return [step["action"] for step in phase["steps"]]

    rebooting = [name for name in versions.component_names() if "Reboot" in build_actions(name)]
    assert rebooting == ["nvidia-services"] and build_actions("nvidia-services")[-1] == "Reboot"
    order = versions.component_names()
    assert order.index("nvidia-services") == order.index("nvidia-driver") + 1


@pytest.mark.parametrize("name", ALL)
def test_every_document_fits_the_inline_limit_the_stack_enforces_at_synth(name: str) -> None:
    """CloudFormation holds AWS::ImageBuilder::Component Data to 16,000 characters: the document as the image stack
    sends it (includes expanded, the opening comments left out) must fit, with room for the next edit."""
    data = strip_leading_comments(versions.document(name))
    assert len(data) <= MAX_INLINE_DATA, f"{name}: {len(data)} characters; move logic to another component"


@pytest.mark.parametrize("name", ALL)
def test_parameters_are_strings_without_defaults_and_named_like_the_config_table(name: str) -> None:
    declared = declared_parameters(load(name))
    for parameter, spec in declared.items():
        assert PARAMETER_NAME.match(parameter), parameter
        assert spec.get("type") == "string", f"{parameter}: type must be string"
        assert "default" not in spec, f"{parameter}: no defaults; the stack passes every value from the config"
        assert spec.get("description"), f"{parameter}: describe it"
    assert tuple(declared) == versions.parameters(name), "image_components.py and the document's parameters differ"


@pytest.mark.parametrize("name", ALL)
def test_every_reference_is_declared_and_every_parameter_is_used(name: str) -> None:
    document = load(name)
    declared = set(declared_parameters(document))
    used = set(REFERENCE.findall(body_text(document)))
    assert used <= declared, f"used but not declared: {sorted(used - declared)}"
    assert declared <= used, f"declared but never used: {sorted(declared - used)}"


@pytest.mark.parametrize("name", ALL)
def test_no_literal_version_numbers_in_bodies(name: str) -> None:
    text = body_text(load(name))
    for allowed in ALLOWED_LITERALS:
        text = text.replace(allowed, "")
    found = sorted(set(LITERAL_VERSION.findall(text)))
    assert not found, f"versions must come from parameters, found literals: {found}"


def test_the_version_pattern_catches_what_it_is_meant_to() -> None:
    for literal in ("535.104.05", "cuda-toolkit-12-8", "cu128", "torch==2.4", "libnccl2=2.21"):
        assert LITERAL_VERSION.search(literal), literal
    for harmless in (
        f"Ubuntu {ALLOWED_LITERALS[0]}",
        "rtol=1e-3",
        "head -n 1",
        "16 * 1024 * 1024",
        "{{ CudaVersion }}",
    ):
        assert not LITERAL_VERSION.search(harmless.replace(ALLOWED_LITERALS[0], "")), harmless


@pytest.mark.parametrize("name", ALL)
def test_every_bash_script_is_strict(name: str) -> None:
    for where, script in bash_scripts(load(name)):
        first = next(line for line in script.splitlines() if line.strip() and not line.startswith("#"))
        assert first == "set -euo pipefail", f"{where}: must start with set -euo pipefail, starts with {first!r}"


@pytest.mark.skipif(not SHELLCHECK.exists() and not shutil.which("shellcheck"), reason="shellcheck is not installed")
@pytest.mark.parametrize("name", ALL)
def test_embedded_scripts_pass_shellcheck(name: str, tmp_path: Path) -> None:
    document = load(name)
    problems = []
    for index, (where, script) in enumerate(bash_scripts(document)):
        path = tmp_path / f"{index:02d}-{where.replace('/', '-')}.sh"
        path.write_text("#!/usr/bin/env bash\n" + substitute(script) + "\n")
        result = shellcheck(path, "bash")
        if result.returncode:
            problems.append(f"{where}:\n{result.stdout}{result.stderr}")
    for index, (target, shell, content) in enumerate(created_shell_files(document)):
        path = tmp_path / f"created-{index:02d}.sh"
        path.write_text(content if content.startswith("#!") else f"#!/bin/{shell}\n{content}")
        result = shellcheck(path, shell)
        if result.returncode:
            problems.append(f"CreateFile {target}:\n{result.stdout}{result.stderr}")
    assert not problems, "\n".join(problems)


def test_shellcheck_would_catch_a_bad_script(tmp_path: Path) -> None:
    """The shellcheck test is only worth something if a sloppy script fails it."""
    path = tmp_path / "bad.sh"
    path.write_text("#!/usr/bin/env bash\nset -euo pipefail\nrm -rf $1/*\n")
    assert shellcheck(path, "bash").returncode != 0


@pytest.mark.parametrize(("check", "needle"), sorted(REQUIRED_TEST_CHECKS.items()))
def test_gpu_validation_performs_each_required_check(check: str, needle: str) -> None:
    text = "\n".join(script for _, script in bash_scripts(load("gpu-validation")))
    assert needle in text, f"gpu-validation lacks the check: {check}"


def test_gpu_validation_checks_run_in_the_test_phase_and_fail_loudly() -> None:
    for where, script in bash_scripts(load("gpu-validation")):
        assert where.startswith("test/")
        assert "fail " in script or "sys.exit(" in script, f"{where} never fails"


def test_efa_installs_fully_for_nccl() -> None:
    """NCCL over EFA needs libfabric and the plugin: --minimal would drop them, and the
    container flags would drop the host's kernel module and memlock limits."""
    text = "\n".join(script for _, script in bash_scripts(load("efa")))
    command = next(line for line in text.splitlines() if "./efa_installer.sh" in line)
    for flag in ("--minimal", "--skip-kmod", "--skip-limit-conf", "-m ", "-k ", "-l "):
        assert flag not in command, f"efa_installer.sh must not run with {flag}: {command}"
    assert "-y" in command


def test_efa_leaves_device_rdma_to_the_node_bootstrap() -> None:
    efa = load("efa")
    created = {
        entry["path"]: entry["content"]
        for _, step in steps(efa)
        if step["action"] == "CreateFile"
        for entry in step["inputs"]
    }
    assert "FI_PROVIDER=efa" in created["/etc/gpu-platform/efa.env"].splitlines()
    assert not any(
        line.startswith("FI_EFA_USE_DEVICE_RDMA") for content in created.values() for line in content.splitlines()
    )


def test_cloudwatch_agent_is_installed_but_never_started() -> None:
    text = "\n".join(script for _, script in bash_scripts(load("cloudwatch-agent")))
    assert "systemctl disable amazon-cloudwatch-agent" in text
    assert "systemctl start amazon-cloudwatch-agent" not in text
    assert "enable --now" not in text and "fetch-config" not in text


def test_node_runtime_provides_boto3_and_bakes_in_no_node_script() -> None:
    """The scripts arrive at launch (user data); the image only gives them boto3 on the system Python."""
    text = "\n".join(script for _, script in bash_scripts(load("node-runtime")))
    assert "install -y --no-install-recommends python3-boto3" in text
    assert "/usr/bin/python3 -c 'import boto3'" in text
    assert "/opt/gpu-platform/node" not in text and "systemctl" not in text

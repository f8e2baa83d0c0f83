"""The Image Builder component documents under scripts/image/components/.

What a user relies on: each document is one Image Builder accepts (schema 1.0, real action
modules, the phases its kind needs), every version reaches it as a parameter from the config
(none is written in a body, none has a default), the scripts it runs are strict and pass
shellcheck, and the test component really performs each GPU check.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
IMAGE_DIR = ROOT / "scripts" / "image"
COMPONENTS_DIR = IMAGE_DIR / "components"
SHELLCHECK = Path(sys.executable).with_name("shellcheck")


def _load_versions_module() -> Any:
    # scripts/ is not a package; load the module from its file, as the stack may.
    spec = importlib.util.spec_from_file_location("gpu_platform_image_versions", IMAGE_DIR / "versions.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


versions = _load_versions_module()

DOCUMENTS = {path.stem: path for path in sorted(COMPONENTS_DIR.glob("*.yaml"))}

# AWSTOE action modules. Source: the CDK construct library's ComponentAction enum
# (aws/aws-cdk, packages/@aws-cdk/aws-imagebuilder-alpha/lib/component.ts; AWS CDK Python
# reference aws_cdk.aws_imagebuilder_alpha.ComponentAction), which mirrors the EC2 Image
# Builder user guide page "Action modules supported by AWSTOE component manager".
ACTION_MODULES = frozenset(
    {
        "Assert",
        "AppendFile",
        "CopyFile",
        "CopyFolder",
        "CreateFile",
        "CreateFolder",
        "CreateSymlink",
        "DeleteFile",
        "DeleteFolder",
        "ExecuteBash",
        "ExecuteBinary",
        "ExecuteDocument",
        "ExecutePowerShell",
        "InstallMSI",
        "ListFiles",
        "MoveFile",
        "MoveFolder",
        "ReadFile",
        "Reboot",
        "S3Download",
        "S3Upload",
        "SetFileEncoding",
        "SetFileOwner",
        "SetFilePermissions",
        "SetFolderOwner",
        "SetFolderPermissions",
        "SetRegistry",
        "UninstallMSI",
        "UpdateOS",
        "WebDownload",
    }
)
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
ALLOWED_LITERALS = ("22.04",)

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
    "EFA via fi_info": "fi_info -p efa",
    "EFA only when expected": "{{ ExpectEfa }}",
    "DCGM level-1 diagnostic": "dcgmi diag -r 1",
    "NCCL all-reduce launched across local GPUs": "torchrun --standalone",
    "all-reduce over NCCL": 'init_process_group(backend="nccl")',
    "all-reduce result values checked": "tensor != expected",
}


def load(name: str) -> dict[str, Any]:
    """The document as Image Builder receives it (its ``# include:`` lines expanded)."""
    return yaml.safe_load(versions.document(name))


def declared_parameters(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """`parameters:` is a list of one-key maps (AWSTOE syntax); flatten it."""
    result: dict[str, dict[str, Any]] = {}
    for entry in document.get("parameters") or []:
        assert isinstance(entry, dict) and len(entry) == 1, f"a parameters entry must be a one-key map, got {entry!r}"
        ((name, spec),) = entry.items()
        result[name] = spec
    return result


def steps(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(phase["name"], step) for phase in document["phases"] for step in phase["steps"]]


def bash_scripts(document: dict[str, Any]) -> list[tuple[str, str]]:
    """(phase/step, script) of every ExecuteBash step; AWSTOE joins the commands into one file."""
    scripts = []
    for phase, step in steps(document):
        if step["action"] == "ExecuteBash":
            commands = step["inputs"]["commands"]
            assert isinstance(commands, list) and commands, f"{phase}/{step['name']}: commands must be a non-empty list"
            scripts.append((f"{phase}/{step['name']}", "\n".join(commands)))
    return scripts


def created_shell_files(document: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(path, shell, content) of the shell files a document writes with CreateFile."""
    files = []
    for _, step in steps(document):
        if step["action"] != "CreateFile":
            continue
        for entry in step["inputs"]:
            content = entry.get("content", "")
            if entry["path"].endswith(".sh"):
                files.append((entry["path"], "sh", content))
            elif content.startswith("#!"):
                shell = "bash" if "bash" in content.splitlines()[0] else "sh"
                files.append((entry["path"], shell, content))
    return files


def body_text(document: dict[str, Any]) -> str:
    """Everything Image Builder runs or writes: the phases, without the parameters block."""
    return yaml.safe_dump(document["phases"], width=10_000)


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
    assert sorted(versions.RECIPE_ORDER) == ALL
    assert versions.RECIPE_ORDER[0] == "nvidia-driver", "the driver (and its reboot) comes first"
    assert versions.RECIPE_ORDER[-1] == "gpu-validation"
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


def test_the_driver_component_reboots_after_installing_and_before_validating() -> None:
    build = next(phase for phase in load("nvidia-driver")["phases"] if phase["name"] == "build")
    actions = [step["action"] for step in build["steps"]]
    assert actions[-1] == "Reboot"
    assert actions.index("Reboot") > [step["name"] for step in build["steps"]].index("InstallNvidiaDriver")


@pytest.mark.parametrize("name", ALL)
def test_parameters_are_strings_without_defaults_and_named_like_the_config_table(name: str) -> None:
    declared = declared_parameters(load(name))
    for parameter, spec in declared.items():
        assert PARAMETER_NAME.match(parameter), parameter
        assert spec.get("type") == "string", f"{parameter}: type must be string"
        assert "default" not in spec, f"{parameter}: no defaults; the stack passes every value from the config"
        assert spec.get("description"), f"{parameter}: describe it"
    assert tuple(declared) == versions.parameters(name), "versions.py and the document's parameters differ"


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
    for harmless in ("Ubuntu 22.04", "rtol=1e-3", "head -n 1", "16 * 1024 * 1024", "{{ CudaVersion }}"):
        assert not LITERAL_VERSION.search(harmless.replace("22.04", "")), harmless


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


# --- The version lookups the scripts do, run against a stubbed apt ---------------------------

RESOLVE_FUNCTION = re.compile(r"^resolve\(\) \{\n.*?^\}\n", re.MULTILINE | re.DOTALL)


def script_of(name: str, step_name: str) -> str:
    return next(script for where, script in bash_scripts(load(name)) if where.endswith(f"/{step_name}"))


RESOLVE_HELPER = IMAGE_DIR / "lib" / "resolve.sh"


def resolve_helper() -> str:
    """The one definition of resolve(), run as written in the repository."""
    return RESOLVE_HELPER.read_text()


def fake_apt(tmp_path: Path, madison: dict[str, list[str]]) -> dict[str, str]:
    """A PATH where apt-cache answers `madison PKG` from `madison`, and apt-get/ldconfig only log."""
    bin_dir = tmp_path / "bin"
    data = tmp_path / "madison"
    bin_dir.mkdir()
    data.mkdir()
    for package, versions_offered in madison.items():
        lines = [
            f" {package} | {version} | https://developer.download.nvidia.com/x86_64  Packages"
            for version in versions_offered
        ]
        (data / package).write_text("".join(line + "\n" for line in lines))
    (bin_dir / "apt-cache").write_text(f'#!/bin/sh\n[ "$1" = madison ] && cat "{data}/$2" 2>/dev/null\nexit 0\n')
    (bin_dir / "apt-get").write_text(f'#!/bin/sh\necho "$@" >> "{tmp_path}/apt-get.log"\n')
    (bin_dir / "ldconfig").write_text("#!/bin/sh\nexit 0\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}


def run_bash(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, check=False)


def test_resolve_is_written_once_and_every_script_that_calls_it_gets_it() -> None:
    """No document defines resolve() itself; each step that calls it says ``# include: lib/resolve.sh``,
    and the document Image Builder receives carries the helper's function, defined before its first call."""
    helper = RESOLVE_FUNCTION.search(resolve_helper())
    assert helper
    callers = 0
    for name, path in DOCUMENTS.items():
        assert "resolve() {" not in path.read_text(), f"{name} defines resolve() itself"
        for where, script in bash_scripts(load(name)):
            if "$(resolve " not in script:
                continue
            callers += 1
            assert helper.group(0) in textwrap.dedent(script), f"{name}:{where} calls resolve without including it"
            assert script.index("resolve() {") < script.index("$(resolve "), f"{name}:{where}"
    assert callers >= 6


def test_an_include_of_a_missing_helper_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "components").mkdir()
    (tmp_path / "components" / "efa.yaml").write_text("steps:\n  # include: lib/absent.sh\n")
    monkeypatch.setattr(versions, "IMAGE_DIR", tmp_path)
    monkeypatch.setattr(versions, "COMPONENTS_DIR", tmp_path / "components")
    with pytest.raises(FileNotFoundError, match=r"lib/absent.sh is included by a component"):
        versions.document("efa")


@pytest.mark.parametrize(
    ("offered", "upstream", "expected"),
    [
        (["1:4.8.0-1", "1:4.7.0-2", "1:4.7.0-1"], "4.7.0", "1:4.7.0-2"),  # newest revision, epoch kept
        (["595.91.07-1", "595.91.07-0ubuntu1", "595.58.03-1"], "595.91.07", "595.91.07-1"),
        (["2.15.60-1fsx1", "2.15.6-1fsx34"], "2.15.6", "2.15.6-1fsx34"),  # 2.15.6 is not a prefix of 2.15.60
    ],
)
def test_resolve_finds_the_debian_version_of_an_upstream_version(
    tmp_path: Path, offered: list[str], upstream: str, expected: str
) -> None:
    env = fake_apt(tmp_path, {"pkg": offered})
    helper = resolve_helper()
    result = run_bash(
        f'set -euo pipefail\nfail() {{ echo "ERROR: $*" >&2; exit 1; }}\n{helper}resolve pkg {upstream}\n', env
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


def test_resolve_fails_with_what_apt_offers(tmp_path: Path) -> None:
    env = fake_apt(tmp_path, {"pkg": ["1.0.1-1", "1.0.0-1"]})
    helper = resolve_helper()
    script = (
        f'set -euo pipefail\nfail() {{ echo "ERROR: $*" >&2; exit 1; }}\n{helper}v="$(resolve pkg 9.9.9)"\necho "$v"\n'
    )
    result = run_bash(script, env)
    assert result.returncode != 0
    assert "apt offers no pkg at version 9.9.9" in result.stderr
    assert "1.0.1-1" in result.stderr


NCCL_OFFERED = ["2.30.7-1+cuda13.2", "2.30.7-1+cuda13.0", "2.30.7-1+cuda12.9", "2.29.1-1+cuda13.0"]


@pytest.mark.parametrize(
    ("offered", "expected"),
    [
        (NCCL_OFFERED, "2.30.7-1+cuda13.0"),  # the toolkit's own minor wins
        (["2.30.7-1+cuda13.2", "2.30.7-1+cuda12.9"], "2.30.7-1+cuda13.2"),  # else the newest of the same major
    ],
)
def test_nccl_is_taken_for_the_toolkits_cuda(tmp_path: Path, offered: list[str], expected: str) -> None:
    env = fake_apt(tmp_path, {"libnccl2": offered})
    script = script_of("cuda-toolkit", "InstallNccl")
    script = script.replace("{{ CudaVersion }}", "13.0.3").replace("{{ NcclVersion }}", "2.30.7")
    result = run_bash(script, env)
    assert result.returncode == 0, result.stderr
    log = (tmp_path / "apt-get.log").read_text()
    assert f"libnccl2={expected} libnccl-dev={expected}" in log


def test_nccl_for_another_cuda_major_is_refused(tmp_path: Path) -> None:
    env = fake_apt(tmp_path, {"libnccl2": ["2.30.7-1+cuda12.9"]})
    script = script_of("cuda-toolkit", "InstallNccl")
    script = script.replace("{{ CudaVersion }}", "13.0.3").replace("{{ NcclVersion }}", "2.30.7")
    result = run_bash(script, env)
    assert result.returncode != 0
    assert "no libnccl2 2.30.7 built for CUDA 13" in result.stderr
    assert not (tmp_path / "apt-get.log").exists()


def test_bad_parameter_values_are_refused_before_anything_is_installed(tmp_path: Path) -> None:
    env = fake_apt(tmp_path, {})
    script = script_of("pytorch", "InstallPyTorch")
    script = script.replace("{{ TorchVersion }}", "2.4.0+cu124").replace("{{ TorchvisionVersion }}", "0.19.0")
    script = script.replace("{{ PipIndexUrl }}", "https://example.invalid/whl")
    result = run_bash(script, env)
    assert result.returncode != 0
    assert "TorchVersion '2.4.0+cu124' is not MAJOR.MINOR.PATCH" in result.stderr

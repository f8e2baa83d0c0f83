"""The helpers of scripts/image/lib/ and what they hold once for every component: the image's OS (one fact with
scripts/node/layout.py NODE_OS), the file of the versions the image carries, the version lookups.

Each helper is written once and reaches a step through ``# include:``; the tests here run them as written.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.scripts.image.documents import (
    DOCUMENTS,
    LIB_DIR,
    NODE_OS_RELEASE,
    UBUNTU_CODENAMES,
    bash_scripts,
    load,
    script_of,
    versions,
)

DEFINITION = re.compile(r"^(?P<name>[a-z_]+)\(\) \{$", re.MULTILINE)
#: Components that install from apt repositories named by the OS: each checks the OS first.
OS_CHECKED = {"nvidia-driver", "cuda-toolkit", "cuda-libraries", "efa", "dcgm", "lustre-client", "pcs-slurm"}


def helper_functions() -> dict[str, str]:
    """Each function of lib/ -> the helper's text as a document carries it (its opening comments left out)."""
    found = {}
    for path in sorted(LIB_DIR.glob("*.sh")):
        text = versions._helper(f"lib/{path.name}")
        found.update(dict.fromkeys(DEFINITION.findall(text), text))
    return found


def calls(script: str, function: str) -> list[int]:
    """Where ``script`` calls ``function`` (not where it defines it)."""
    return [m.start() for m in re.finditer(rf"(?<![\w-]){function}(?=[ \n\"])", script)]


def test_every_step_gets_the_helpers_it_calls_before_it_calls_them() -> None:
    functions = helper_functions()
    assert {
        "resolve",
        "require_node_os",
        "configure_nvidia_repo",
        "record",
        "recorded",
        "adopted",
        "install_at",
        "toolkit_version",
        "loaded_library",
        "kernel_packages",
        "pcs_release",
    } <= set(functions)
    for name, path in DOCUMENTS.items():
        raw = path.read_text()
        for function, helper in functions.items():
            assert f"{function}() {{" not in raw, f"{name} defines {function}() itself"
            for where, script in bash_scripts(load(name)):
                if not calls(script, function):
                    continue
                assert helper in script, f"{name}:{where} calls {function} without including its helper"
                assert script.index(f"{function}() {{") < min(calls(script, function)), f"{name}:{where}: {function}"


def test_an_include_of_a_missing_helper_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "components").mkdir()
    (tmp_path / "components" / "efa.yaml").write_text("steps:\n  # include: lib/absent.sh\n")
    monkeypatch.setattr(versions, "IMAGE_DIR", tmp_path)
    monkeypatch.setattr(versions, "COMPONENTS_DIR", tmp_path / "components")
    with pytest.raises(FileNotFoundError, match=r"lib/absent.sh is included by a component"):
        versions.document("efa")


# --- The OS: one fact, scripts/node/layout.py NODE_OS ----------------------------------------------------------


def test_the_image_os_is_the_node_os() -> None:
    values = dict(re.findall(r'^node_os_(\w+)="([^"]*)"$', (LIB_DIR / "node-os.sh").read_text(), re.MULTILINE))
    assert (values["id"], values["version"], values["codename"]) == NODE_OS_RELEASE


def test_components_check_the_os_only_through_the_one_helper_and_name_no_other_release() -> None:
    checking = {name for name in DOCUMENTS if any(calls(s, "require_node_os") for _, s in bash_scripts(load(name)))}
    assert checking == OS_CHECKED
    others = [v for v in UBUNTU_CODENAMES if v != NODE_OS_RELEASE[1]]
    for name, path in DOCUMENTS.items():
        text = versions.document(name)
        assert "VERSION_ID" not in path.read_text() and "os-release" not in path.read_text(), name
        for version in others:
            for literal in (version, f"ubuntu{version.replace('.', '')}", UBUNTU_CODENAMES[version]):
                assert literal not in text, f"{name} names Ubuntu {version} ({literal})"


# --- What the image carries: one file ----------------------------------------------------------------------------


def test_the_build_steps_record_every_version_in_the_one_file() -> None:
    recorded = {
        key
        for name in DOCUMENTS
        for _, script in bash_scripts(load(name))
        for key in re.findall(r"^\s*record (\w+) ", script, re.MULTILINE)
    }
    assert recorded == {*versions.RECORDED_VERSIONS, *versions.SLURM_RECORDED_VERSIONS}
    for helper in ("record.sh", "recorded.sh"):
        assert f'"${{GPU_PLATFORM_ROOT:-}}{versions.IMAGE_VERSIONS_FILE}"' in (LIB_DIR / helper).read_text()


def test_the_test_component_checks_every_recorded_version() -> None:
    script = script_of("gpu-validation", "CheckImageVersions")
    listed = re.search(r"for key in (.*?); do", script, re.DOTALL)
    assert listed and listed.group(1).replace("\\\n", " ").split() == list(versions.RECORDED_VERSIONS)


# --- The version lookups, run against a stubbed apt --------------------------------------------------------------


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


def with_resolve(body: str) -> str:
    return (
        f'set -euo pipefail\nfail() {{ echo "ERROR: $*" >&2; exit 1; }}\n{(LIB_DIR / "resolve.sh").read_text()}{body}\n'
    )


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
    result = run_bash(with_resolve(f"resolve pkg {upstream}"), fake_apt(tmp_path, {"pkg": offered}))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


def test_resolve_fails_with_what_apt_offers(tmp_path: Path) -> None:
    result = run_bash(
        with_resolve('v="$(resolve pkg 9.9.9)"\necho "$v"'), fake_apt(tmp_path, {"pkg": ["1.0.1-1", "1.0.0-1"]})
    )
    assert result.returncode != 0
    assert "apt offers no pkg at version 9.9.9" in result.stderr
    assert "1.0.1-1" in result.stderr


def test_bad_parameter_values_are_refused_before_anything_is_installed(tmp_path: Path) -> None:
    script = script_of("pytorch", "InstallPyTorch")
    script = script.replace("{{ TorchVersion }}", "2.4.0+cu124").replace("{{ TorchvisionVersion }}", "0.19.0")
    script = script.replace("{{ PipIndexUrl }}", "https://example.invalid/whl")
    result = run_bash(script, fake_apt(tmp_path, {}))
    assert result.returncode != 0
    assert "TorchVersion '2.4.0+cu124' is not MAJOR.MINOR.PATCH" in result.stderr

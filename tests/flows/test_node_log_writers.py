"""Every node log the CloudWatch agent ships has a writer, and every writer's file is shipped.

The agent reads files (its config's ``logs_collected.files.collect_list``), not the journal. The
writers: bootstrap.sh writes bootstrap.log itself; each service appends its stdout and stderr to
its ``StandardOutput=append:`` file. The config is taken from the fleets' synthesized user data,
the writers from bootstrap.sh and the unit files, and the real gpu_health.py is run the way its
unit runs it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from gpu_constructs.fleet.render.node_logs import NODE_LOG_DIR, NODE_LOGS
from gpu_constructs.fleet.render.user_data import NodeScripts, render_user_data
from tests.fleet_synth import fleets_stack
from tests.scripts.node.helpers import FIXTURES, NODE_DIR, UNIT_DIR, read_unit, unit_output_file
from tests.synth import Synth

# isort: split
# Importable once tests.scripts.node.helpers has put scripts/node on sys.path.
import layout

SERVICES = sorted(UNIT_DIR.glob("*.service"))


def _heredoc(script: str, marker: str) -> str:
    return script.split(f"<<'{marker}'\n", 1)[1].split(f"\n{marker}\n", 1)[0]


def fleet_user_data(synth: Synth) -> dict[str, str]:
    """Each fleet launch template's user data (tokens as ``<token>``), by env/logical id."""
    scripts = {}
    for env in synth.environments:
        for logical_id, resource in fleets_stack(synth, env).resources("AWS::EC2::LaunchTemplate").items():
            parts = resource["Properties"]["LaunchTemplateData"]["UserData"]["Fn::Base64"]
            text = (
                parts
                if isinstance(parts, str)
                else "".join(p if isinstance(p, str) else "<token>" for p in parts["Fn::Join"][1])
            )
            scripts[f"{env}/{logical_id}"] = text
    return scripts


def unit_writers() -> dict[str, str]:
    """file -> the unit that appends to it."""
    writers: dict[str, str] = {}
    for unit in SERVICES:
        output = unit_output_file(unit)
        if output is None:
            continue
        service = read_unit(unit)["Service"]
        assert service.get("StandardError", ["inherit"]) == ["inherit"], f"{unit.name}: stderr must go to the file too"
        assert output not in writers, f"{unit.name} and {writers[output]} append to the same {output}"
        writers[output] = unit.name
    return writers


def bootstrap_log() -> str:
    text = (NODE_DIR / "bootstrap.sh").read_text()
    match = re.search(r'^readonly BOOTSTRAP_LOG="\$\{BOOTSTRAP_LOG:-([^}]*)\}"$', text, flags=re.M)
    assert match, "bootstrap.sh writes no BOOTSTRAP_LOG"
    return match[1]


def test_each_shipped_file_of_every_fleet_has_a_writer_and_each_writer_is_shipped(synth: Synth) -> None:
    writers = {**unit_writers(), bootstrap_log(): "bootstrap.sh"}
    scripts = fleet_user_data(synth)
    assert scripts
    for where, script in scripts.items():
        config = json.loads(_heredoc(script, "AGENT_CONFIG"))
        collect = config["logs"]["logs_collected"]["files"]["collect_list"]
        shipped = {entry["file_path"]: entry["log_group_name"] for entry in collect}
        assert set(shipped) == set(writers), f"{where}: shipped {sorted(shipped)}, written {sorted(writers)}"
        # Each file goes to the group named after the writer, under the environment's prefix.
        env = where.split("/", 1)[0]
        for name, path in NODE_LOGS.items():
            assert shipped[path].endswith(f"/{name}") and f"/{env}/" in shipped[path], (where, shipped[path])
        # The directory of every file exists before anything writes: the user data creates it.
        assert log_dir_made_before_bootstrap(script.splitlines()), where
        assert {str(Path(p).parent) for p in shipped} == {NODE_LOG_DIR}


def test_every_fleet_hands_the_checkpoint_hook_the_paths_its_units_prepare(synth: Synth) -> None:
    hook = (NODE_DIR / "checkpoint-hook.sh").read_text()
    defaults = dict(re.findall(r'^readonly (\w+)="\$\{\w+:-([^}]*)\}"$', hook, flags=re.M))
    units = [read_unit(UNIT_DIR / n)["Service"] for n in ("spot-watcher.service", "lifecycle-watcher.service")]
    for where, script in fleet_user_data(synth).items():
        node_env = dict(line.split("=", 1) for line in _heredoc(script, "NODE_ENV").splitlines())
        for key in ("TRAINING_PID_DIR", "CHECKPOINT_DIR"):
            assert node_env[key] == defaults[key], (where, key)
        for service in units:  # the pid directory the fleet names is the one the units create
            assert f"+/usr/bin/install -d -m 1777 {node_env['TRAINING_PID_DIR']}" in service["ExecStartPre"]
            assert service["EnvironmentFile"][0].lstrip("-") == layout.ENV_FILE


def test_each_service_that_logs_writes_a_file_named_after_it() -> None:
    writers = unit_writers()
    assert {unit: path for path, unit in writers.items()} == {
        f"{name}.service": path for name, path in NODE_LOGS.items() if name != "bootstrap"
    }
    assert bootstrap_log() == layout.BOOTSTRAP_LOG == NODE_LOGS["bootstrap"]
    # lustre-mount.service is the one service left to the journal: systemctl status in bootstrap.log shows it.
    assert {u.name for u in SERVICES} - set(writers.values()) == {layout.LUSTRE_UNIT}


def log_dir_made_before_bootstrap(lines: list[str]) -> bool:
    """The user data names the node log directory (overridable only for its own test) and creates it
    before it hands over to the bootstrap."""
    named = any(f'logs="${{GPU_PLATFORM_LOG_DIR:-{NODE_LOG_DIR}}}"' in line.split() for line in lines)
    made = [i for i, line in enumerate(lines) if line.startswith("install -d") and '"$logs"' in line.split()]
    handover = [i for i, line in enumerate(lines) if line.startswith("exec ") and "bootstrap.sh" in line]
    return named and bool(made) and bool(handover) and made[0] < handover[0]


def test_user_data_creates_the_log_directory_before_the_bootstrap() -> None:
    lines = render_user_data(
        region="us-east-1",
        node_env={"GPU_PLATFORM_ENV": "dev", "ASG_NAME": "g", "LAUNCH_HOOK_NAME": "g-launch"},
        instance_types={},
        agent_config_json="{}",
        scripts=NodeScripts(bucket_name="b", object_key="k"),
    )
    assert log_dir_made_before_bootstrap(lines)


def test_gpu_health_as_its_unit_runs_it_writes_its_shipped_file(tmp_path: Path) -> None:
    unit = UNIT_DIR / "gpu-health.service"
    (command,) = read_unit(unit)["Service"]["ExecStart"]
    env = {"EXPECTED_GPUS": "8", "METRIC_NAMESPACE": "GpuPlatform/dev"}
    argv = [re.sub(r"\$\{(\w+)\}", lambda m: env[m[1]], word) for word in shlex.split(command)]
    argv = [sys.executable, argv[1].replace(layout.INSTALL_PREFIX, str(NODE_DIR)), *argv[2:]]
    case = FIXTURES / "p4d_healthy"
    replay = ["--no-metric", "--no-set-health", "--dcgm", "off", "--nvidia-smi-rc", "0"]
    replay += ["--nvidia-smi-output", str(case / "nvidia-smi.out"), "--kernel-log-file", str(case / "kernel.log")]
    log = tmp_path / unit_output_file(unit).lstrip("/")  # type: ignore[union-attr]
    log.parent.mkdir(parents=True)
    child_env = {k: v for k, v in os.environ.items() if k != "JOURNAL_STREAM"}  # not set for a file
    for _ in range(2):  # append: a second run adds to the first
        with open(log, "ab") as out:
            subprocess.run(
                [*argv, *replay], stdout=out, stderr=subprocess.STDOUT, env=child_env, timeout=60, check=True
            )
    lines = log.read_text().splitlines()
    assert lines.count("gpu-health: INFO healthy") == 2, lines
    assert all(line.startswith("gpu-health: ") for line in lines), lines
    assert str(log).endswith(NODE_LOGS["gpu-health"])


def test_the_size_cap_truncates_only_oversized_node_logs(tmp_path: Path) -> None:
    (cap,) = read_unit(UNIT_DIR / "gpu-health.service")["Service"]["ExecStartPre"]
    assert cap.startswith("+")  # outside the read-only sandbox
    log_dir = tmp_path / "gpu-platform"
    log_dir.mkdir()
    big, small, other = log_dir / "spot-watcher.log", log_dir / "bootstrap.log", log_dir / "notes.txt"
    for path, size in ((big, 64 * 2**20 + 1), (small, 1000), (other, 65 * 2**20)):
        with open(path, "wb") as out:
            out.truncate(size)
    argv = [word.replace(NODE_LOG_DIR, str(log_dir)) for word in shlex.split(cap.removeprefix("+"))]
    subprocess.run(argv, check=True, timeout=30)
    assert [big.stat().st_size, small.stat().st_size, other.stat().st_size] == [0, 1000, 65 * 2**20]

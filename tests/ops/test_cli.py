"""The gpu-platform command as a whole: --help with an example, exit codes, no traceback; the make targets
that wrap it; --help on every script of scripts/."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ops import cli
from ops.cli import NO_CREDENTIALS
from tests.ops.helpers import config_dir, run_cli
from tests.synth import TEST_CONFIG_DIR

ROOT = Path(__file__).resolve().parents[2]
SUBCOMMANDS = ("validate", "preflight", "cost", "status")


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_subcommand_has_help_with_an_example_and_json(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, command, "--help")
    assert code == 0
    assert f"Example: gpu-platform {command}" in out
    assert "--json" in out


def test_a_usage_error_exits_2_in_one_message(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "cost", "--no-such-flag")
    assert code == 2 and out == "" and "No such option" in err and "Traceback" not in err
    code, _, err = run_cli(capsys, "cost")  # --env is required
    assert code == 2 and "Missing option '--env'" in err


@pytest.mark.parametrize("command", ["preflight", "status"])
def test_account_commands_without_credentials_say_what_to_set(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    code, out, err = run_cli(capsys, command, "--env", "dev", "--config-dir", str(TEST_CONFIG_DIR))
    assert (code, out, err) == (2, "", NO_CREDENTIALS + "\n")


def test_an_unexpected_error_is_one_line_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object) -> int:
        raise KeyError("boom")

    monkeypatch.setattr("ops.cost.command.cost_command", broken)
    code, _, err = run_cli(capsys, "cost", "--env", "dev", "--config-dir", str(config_dir(tmp_path)))
    assert code == 2 and err.count("\n") == 1 and "unexpected KeyError" in err and "GPU_PLATFORM_DEBUG" in err


def test_the_entry_point_is_declared() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'gpu-platform = "ops.cli:main"' in text
    assert callable(cli.main)


# --------------------------------------------------------------------------- make


def _make(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", *args], cwd=ROOT, capture_output=True, text=True, check=False, env=env
    )


def test_bare_make_lists_every_target_with_one_line() -> None:
    run = _make()  # help is the default goal and needs no setup
    assert run.returncode == 0, run.stderr
    listed = dict(re.findall(r"^  (\S+)\s+(.+)$", run.stdout, re.MULTILINE))
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, re.MULTILINE)) - {"venv-too-old"}
    assert targets <= set(listed), f"targets without a '## target: text' line: {targets - set(listed)}"
    for target in ("validate", "preflight", "cost", "status", "synth", "test", "help"):
        assert listed[target]


@pytest.mark.parametrize("target", ["preflight", "cost", "status"])
def test_targets_that_need_an_environment_ask_for_it(target: str) -> None:
    run = _make("-n", target)
    assert f"{os.path.join('.venv', 'bin', 'gpu-platform')} {target} --env" in run.stdout
    assert f"usage: make {target} ENV=<dev|staging|prod>" in run.stdout


def test_a_venv_of_an_older_python_is_rebuilt_with_a_message(tmp_path: Path) -> None:
    venv = tmp_path / "old-venv"
    (venv / "bin").mkdir(parents=True)
    fake = venv / "bin" / "python"
    fake.write_text('#!/bin/sh\n[ "$1" = --version ] && echo "Python 3.9.18" && exit 0\necho True\n')
    fake.chmod(0o755)
    run = _make("-n", f"VENV={venv}", f"{venv}/.installed")  # -n: print the recipes, run none
    assert "this project needs 3.11+: rebuilding it" in run.stdout
    assert f"rm -rf {venv}" in run.stdout
    assert run.stdout.index(f"rm -rf {venv}") < run.stdout.index("-m venv")
    fake.write_text("#!/bin/sh\necho False\n")
    assert "rebuilding" not in _make("-n", f"VENV={venv}", f"{venv}/.installed").stdout


def test_a_failed_synth_keeps_the_previous_cdk_out() -> None:
    recipe = _make("-n", "synth").stdout
    synth = next(line for line in recipe.splitlines() if " synth --quiet" in line)
    assert "--output cdk.out.new" in synth and "the previous cdk.out/ is kept" in synth and "exit 1" in synth
    assert "rm -rf cdk.out && mv cdk.out.new cdk.out" in recipe
    assert recipe.index("synth --quiet") < recipe.index("rm -rf cdk.out && mv")


# --------------------------------------------------------------------------- scripts --help

SCRIPTS = sorted(
    p
    for p in (ROOT / "scripts").rglob("*")
    if p.is_file() and (os.access(p, os.X_OK) or (p.suffix == ".py" and "__main__" in p.read_text(encoding="utf-8")))
)


def test_the_scripts_are_found() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in SCRIPTS}
    assert {"scripts/ci/snapshot_diff.sh", "scripts/refresh_instance_catalog.py", "scripts/node/bootstrap.sh"} <= names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_help_prints_usage_and_runs_nothing(script: Path, tmp_path: Path) -> None:
    trap = tmp_path / "bin"
    trap.mkdir()
    ran = tmp_path / "ran"
    tools = (
        "make",
        "git",
        "npm",
        "npx",
        "cdk",
        "aws",
        "pytest",
        "systemctl",
        "systemd-run",
        "mount",
        "mkfs.xfs",
        "curl",
    )
    for tool in tools:
        (trap / tool).write_text(f'#!/bin/sh\necho {tool} "$@" >> {ran}\n')
        (trap / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{trap}{os.pathsep}{os.environ['PATH']}"}
    command = [sys.executable, str(script)] if script.suffix == ".py" else ["bash", str(script)]
    if (script.parent / "__init__.py").exists():  # a node package's module: run as the node runs it
        env["PYTHONPATH"] = str(script.parent.parent)
        command = [sys.executable, "-m", f"{script.parent.name}.{script.stem}"]
    run = subprocess.run([*command, "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip(), "no usage printed"
    assert not ran.exists(), f"--help ran: {ran.read_text()}"

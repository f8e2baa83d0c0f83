"""scripts/environment_target.py: what make bootstrap hands cdk bootstrap, from the config."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from config.loader import CONFIG_DIR, load_environment

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "environment_target.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False)


def test_it_prints_the_environment_s_account_and_region() -> None:
    env = load_environment("prod", CONFIG_DIR)
    run = _run("prod")
    assert (run.returncode, run.stdout) == (0, f"aws://{env.account}/{env.region}\n")


def test_an_unknown_environment_is_one_line_and_exit_2() -> None:
    run = _run("nope")
    assert run.returncode == 2 and run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1 and "fix:" in run.stderr and "Traceback" not in run.stderr

"""What the tests of scripts/ci/ share: executable stand-ins, the scripts' environment without AWS credentials,
what a script's ``check_python`` installs, and a stand-in Python for the fabric check's runs."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from tests.synth import ROOT

#: The golden AMI the stand-in fabric-test reports its fleets ran on.
AMI_NAME = "gpu-platform-dev-gpu-node-2026-03-01T12-00-00Z"


def executable(path: Path, text: str) -> Path:
    """``text`` written to ``path``, made executable."""
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def script_env(**extra: str) -> dict[str, str]:
    """This process's environment without AWS credentials or a check role, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "CHECK_ROLE_ARN"}
    env.update(extra)
    return env


def installed_by(script: str, tmp_path: Path) -> list[str]:
    """The requirement lines ``script``'s ``check_python`` call installs (scripts/ci/role_env.sh), read from
    a stand-in pip that python3 -m venv leaves behind; the real requirements.txt is grepped."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(
        "#!/bin/sh\n# python3 -m venv DIR: a venv whose pip copies what it is asked to install\n"
        'mkdir -p "$3/bin"\nprintf \'#!/bin/sh\\ncp "$5" %s\\n\' "$3/../installed" > "$3/bin/pip"\n'
        'chmod +x "$3/bin/pip"\n'
    )
    (bin_dir / "python3").chmod(0o755)
    (call,) = [line for line in (ROOT / script).read_text().splitlines() if "check_python " in line]
    packages = call.split('"$work"', 1)[1].rstrip(')"').split()
    work = tmp_path / "work"
    work.mkdir()
    run = subprocess.run(
        ["bash", "-c", 'source scripts/ci/role_env.sh && check_python "$0" "$@"', str(work), *packages],
        cwd=ROOT,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == f"{work}/venv/bin/python"
    return (work / "installed").read_text().splitlines()


def fake_fabric_python(
    tmp_path: Path, statuses: dict[str, int], amis: dict[str, str | None] | None = None
) -> tuple[Path, Path]:
    """Plays ``python -m ops.cli job fabric-test``: records each run's arguments and AWS profile, prints the fleet's
    JSON report (none for a fleet whose AMI is None: fewer than two nodes) and exits with the fleet's status. Any
    other command (scripts/ci/ami_gate.py) runs on this Python."""
    record, reports = tmp_path / "record", tmp_path / "reports"
    reports.mkdir()
    for fleet in statuses:
        name = (amis or {}).get(fleet, AMI_NAME)
        if name is not None:
            report = {"fleet": fleet, "ami": {"id": f"ami-0{len(name):016x}", "name": name}, "exit_code": 0}
            (reports / f"{fleet}.json").write_text(json.dumps(report) + "\n")
    cases = " ".join(f"{fleet}) exit {code} ;;" for fleet, code in statuses.items())
    fake = executable(
        tmp_path / "python",
        "#!/bin/bash\n"
        f'if [[ "${{1:-}}" != -m ]]; then exec "{sys.executable}" "$@"; fi\n'
        f'{{ echo "args: $*"; echo "profile: $AWS_PROFILE"; grep role_ "$AWS_CONFIG_FILE"; '
        f'echo "key: ${{AWS_ACCESS_KEY_ID:-none}}"; }} >>"{record}"\n'
        'fleet=""; while (($#)); do [[ $1 == --fleet ]] && fleet=$2; shift; done\n'
        f'if [[ -f "{reports}/$fleet.json" ]]; then cat "{reports}/$fleet.json"; fi\n'
        f'case "$fleet" in {cases} esac\n',
    )
    return fake, record

"""``gpu-platform job`` on a Slurm fleet (ops/job/slurm.py) against the real Slurm of tests/flows/slurm: the scripts the
commands send to the login node run here in bash instead (same lines, Run Command left out), as root, whose
associations are the teams'. The parsers read what this Slurm printed, and the outputs the unit tests read
(tests/ops/job/fixtures/slurm/) must come from the command lines the module builds now: when a command line
changes, this test fails until the fixtures are recorded again (``GPU_PLATFORM_RECORD_SLURM=1``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from config.slurm import User
from ops.job import slurm
from tests.flows.slurm import jobs
from tests.flows.slurm.cluster import SlurmCluster
from tests.flows.slurm.config import ROOT_DIR

pytestmark = pytest.mark.slow  # a real Slurm: seconds per job (make test-fast leaves them out)

FIXTURES = Path(__file__).resolve().parents[2] / "ops" / "job" / "fixtures" / "slurm"
ROOT_USER = User.model_construct(name="root", uid=0, team="vision")  # the test cluster's jobs run as root
CONTEXT: Any = SimpleNamespace(environment=SimpleNamespace(name="hpc", slurm=SimpleNamespace(accounting=True)))


class LocalLogin:
    """Runs each script as the login node would (bash, ``set -euo pipefail``), with the cluster's environment and
    the template's paths moved into its folder; keeps each (lines, output) for the fixtures."""

    def __init__(self, cluster: SlurmCluster):
        self.cluster = cluster
        self.ran: list[tuple[list[str], str]] = []

    def __call__(self, _context: Any, node: str, lines: Sequence[str], what: str, timeout_s: float = 180) -> str:
        assert node == "login"
        script = "\n".join(["set -euo pipefail", *lines])
        env = {**self.cluster.env, **jobs.training_env(self.cluster)}
        done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=timeout_s)
        assert done.returncode == 0, f"{what}: {done.stderr}"
        self.ran.append((list(lines), done.stdout))
        return done.stdout


@pytest.fixture
def login(clean_slurm: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> LocalLogin:
    local = LocalLogin(clean_slurm)
    monkeypatch.setattr(slurm, "run_script", local)
    monkeypatch.setattr(slurm, "login_node", lambda _context: "login")
    monkeypatch.setattr(slurm, "TEMPLATE", str(jobs.TEMPLATE))
    return local


def _record_or_compare(name: str, lines: list[str], stdout: str, cluster: SlurmCluster) -> None:
    """The fixture ``name``: written when recording; else its command lines must be today's (paths aside)."""

    def shown(text: str) -> str:
        return text.replace(str(cluster.root), "<cluster>").replace(str(ROOT_DIR), "<repo>")

    path = FIXTURES / f"{name}.json"
    if os.environ.get("GPU_PLATFORM_RECORD_SLURM"):
        FIXTURES.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"lines": list(map(shown, lines)), "stdout": shown(stdout)}, indent=2) + "\n")
    recorded = json.loads(path.read_text())
    assert _jobless(recorded["lines"]) == _jobless(list(map(shown, lines))), (
        f"{path.name}: record it again (GPU_PLATFORM_RECORD_SLURM=1)"
    )


def _jobless(lines: list[str]) -> list[str]:
    """The lines with the numbers left out (job ids change with every run)."""
    return [re.sub(r"\b\d+\b", "<n>", line) for line in lines]


def test_run_status_list_logs_and_cancel_through_the_commands_scripts(login: LocalLogin) -> None:
    cluster = login.cluster
    workdir = str(cluster.path("jobs", "gp-live"))
    fleet: Any = SimpleNamespace(name="training")
    train = ("--steps", "20", "--checkpoint-every", "10", *jobs.SMALL)
    job = slurm.submit(
        CONTEXT, fleet, ROOT_USER, (str(jobs.TRAIN), list(train)), nodes=2, name="gp-live", workdir=workdir
    )
    assert job.isdigit()
    _record_or_compare("sbatch", *login.ran[-1], cluster)

    cluster.wait_job(job, {"COMPLETED", "FAILED", "CANCELLED"}, timeout_s=120)
    assert cluster.wait_accounted(job) == "COMPLETED"
    found = slurm.job_state(CONTEXT, ROOT_USER, job)
    _record_or_compare("sacct_status", *login.ran[-1], cluster)
    assert (found.job_id, found.name, found.user, found.account, found.partition) == (
        job, "gp-live", "root", "vision", "training",
    )  # fmt: skip
    assert (found.state, found.exit_code, found.nodes, found.node_list, found.gpus) == ("COMPLETED", "0:0", 2, "a,b", 0)
    assert found.elapsed_s >= 0 and found.started_at is not None and found.workdir == workdir
    assert not slurm.failed(found, "status") and slurm.report(found)["result"] == "success"

    listed = slurm.launches(CONTEXT, ROOT_USER)
    _record_or_compare("sacct_list", *login.ran[-1], cluster)
    assert listed[job][0].parameters["Account"] == "vision" and listed[job][0].status == "COMPLETED"

    lines = list(slurm.output(CONTEXT, ROOT_USER, job))
    _record_or_compare("read_output", *login.ran[-1], cluster)
    assert "job gp-live-" + job + ": done at step 20" in lines, lines
    assert any(line.startswith("node a: 1 process(es)") for line in lines), lines


def test_cancel_ends_a_running_job_and_status_says_so(login: LocalLogin) -> None:
    cluster = login.cluster
    job = cluster.sbatch("--account=nlp", f"--chdir={cluster.path('jobs')}", "--job-name=held", "--wrap=sleep 300")
    cluster.wait_job(job, {"RUNNING"})
    assert slurm.job_state(CONTEXT, ROOT_USER, job).active
    cancelled = slurm.job_state(CONTEXT, ROOT_USER, job, "stop")
    _record_or_compare("scancel", *login.ran[-1], cluster)
    assert (cancelled.state, cancelled.account, slurm.failed(cancelled, "stop")) == ("CANCELLED", "nlp", False)
    assert slurm.report(cancelled)["result"] in ("cancelled", "signal 15")

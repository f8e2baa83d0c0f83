"""Queues, teams and priorities on the real Slurm (tests/flows/slurm/cluster.py), and the sbatch template's training
run across its two nodes, accounted under the team that submitted it."""

from __future__ import annotations

import time

import pytest

from tests.flows.slurm import jobs
from tests.flows.slurm.cluster import SlurmCluster
from tests.flows.slurm.config import CLUSTER, TEAMS

pytestmark = pytest.mark.slow  # a real Slurm: seconds per job (make test-fast leaves them out)


def test_teams_are_accounts_with_fair_share_and_root_may_use_urgent(slurm: SlurmCluster) -> None:
    rows = slurm.run(
        "sacctmgr", "--noheader", "--parsable2", "show", "assoc", "format=cluster,account,user,fairshare,qos"
    )
    seen = {tuple(line.split("|")[:4]): line.split("|")[4] for line in rows.splitlines()}
    for team, shares in TEAMS.items():
        assert (CLUSTER, team, "", str(shares)) in seen
        assert set(seen[(CLUSTER, team, "root", "1")].split(",")) == {"normal", "urgent"}
    config = slurm.run("scontrol", "show", "config")
    assert "priority/multifactor" in config and "accounting_storage/slurmdbd" in config


def test_urgent_qos_goes_ahead_of_fair_share(clean_slurm: SlurmCluster) -> None:
    slurm = clean_slurm
    blocker = slurm.sbatch("--nodes=2", "--exclusive", "--output=/dev/null", "--wrap=sleep 60")
    slurm.wait_job(blocker, {"RUNNING"})
    normal = slurm.sbatch("--account=vision", "--output=/dev/null", "--wrap=true")
    urgent = slurm.sbatch("--account=nlp", "--qos=urgent", "--output=/dev/null", "--wrap=true")
    priority = {job: int(slurm.job_field(job, "Priority")) for job in (normal, urgent)}
    assert priority[urgent] > priority[normal] > 0
    assert slurm.job_field(urgent, "QOS") == "urgent" and slurm.job_field(normal, "QOS") == "normal"


def test_the_template_trains_across_both_nodes_and_accounting_shows_it_under_the_team(
    clean_slurm: SlurmCluster,
) -> None:
    slurm = clean_slurm
    job = jobs.submit(slurm, "--account=vision", train=("--steps", "60", "--checkpoint-every", "20"))
    slurm.wait_job(job, {"COMPLETED", "FAILED", "CANCELLED"}, timeout_s=120)
    out = jobs.output(slurm, job)
    assert slurm.wait_accounted(job) == "COMPLETED", out
    assert "node a: 1 process(es)" in out and "node b: 1 process(es)" in out, out
    assert f"job train-ddp-{job}: 2 processes, 2048 samples, fresh start" in out, out
    assert f"job train-ddp-{job}: done at step 60" in out, out
    assert jobs.checkpoints(slurm, job) == [f"step-0000000{step}.pt" for step in (20, 40, 60)]

    row = slurm.run(
        "sacct", "-X", "-j", job, "--noheader", "--parsable2", "--format=Account,User,NNodes,NodeList,State"
    )
    assert row.strip() == "vision|root|2|a,b|COMPLETED"
    assert int(slurm.run("sacct", "-X", "-j", job, "--noheader", "--format=CPUTimeRAW").strip()) > 0
    assert team_usage(slurm, "vision") > 0  # fair share counts it against the team


def team_usage(slurm: SlurmCluster, team: str, timeout_s: float = 20.0) -> int:
    """The team's RawUsage in sshare (CPU-seconds, decayed), once slurmctld has counted the ended job."""
    deadline = time.monotonic() + timeout_s
    while True:
        rows = slurm.run("sshare", "--noheader", "--parsable2", f"--accounts={team}", "--format=Account,User,RawUsage")
        usage = sum(int(line.split("|")[2]) for line in rows.splitlines() if line.split("|")[1] == "")
        if usage > 0 or time.monotonic() >= deadline:
            return usage
        time.sleep(0.5)

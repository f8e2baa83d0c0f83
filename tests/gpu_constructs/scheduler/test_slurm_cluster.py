"""The environment's PCS cluster: the configured Slurm version (the newest PCS offers by default), PCS's Slurm
accounting, the idle time before a node stops, one subnet, no fixed name."""

from __future__ import annotations

from tests.gpu_constructs.scheduler.helpers import ENV
from tests.synth import StackTemplate, Synth


def test_the_cluster_runs_the_configured_slurm_with_accounting(slurm_synth: Synth, fleets: StackTemplate) -> None:
    slurm = slurm_synth.environments[ENV].slurm
    assert slurm is not None
    ((_, cluster),) = fleets.resources("AWS::PCS::Cluster").items()
    props = cluster["Properties"]
    assert props["Scheduler"] == {"Type": "SLURM", "Version": slurm.slurm_version}
    assert slurm.slurm_version == "26.05"  # left out in the config: the newest PCS offers
    assert props["SlurmConfiguration"]["Accounting"] == {"Mode": "STANDARD"}
    assert props["SlurmConfiguration"]["ScaleDownIdleTimeInSeconds"] == slurm.scale_down_idle_seconds == 900
    assert props["Size"] == "SMALL"
    assert len(props["Networking"]["SubnetIds"]) == 1  # PCS takes one subnet for the controller
    assert "Name" not in props  # create-only: a replacement must not collide with the cluster it replaces


def test_the_cluster_carries_the_platforms_priority_and_accounting_policy(
    slurm_synth: Synth, fleets: StackTemplate
) -> None:
    ((_, cluster),) = fleets.resources("AWS::PCS::Cluster").items()
    settings = cluster["Properties"]["SlurmConfiguration"]["SlurmCustomSettings"]
    assert {s["ParameterName"]: s["ParameterValue"] for s in settings} == {
        "PriorityWeightFairshare": "10000",
        "PriorityWeightQOS": "100000",  # the urgent QoS ahead of any team's fair share
        "PriorityWeightAge": "100",
        "AccountingStorageEnforce": "associations,limits,qos,safe",
    }

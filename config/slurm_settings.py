"""The Slurm settings of the environment's PCS cluster that are the platform's policy, not PCS's defaults: one
place that the cluster's ``SlurmCustomSettings`` (gpu_constructs/scheduler/slurm_cluster.py) and the real Slurm
of the tests (tests/slurm/config.py, its slurm.conf) both read, so what the tests prove is what PCS is given.

- Priority (Slurm's multifactor plugin, https://slurm.schedmd.com/priority_multifactor.html): every weight is 0
  by default, which orders jobs by submission alone. Fair share between the teams' accounts is weighted, the QoS
  ten times above it (the urgent QoS, config/slurm.py ``URGENT_PRIORITY``, the highest, goes first whatever the
  team's usage), and a little age so that no job waits for ever.
- Accounting enforcement (with ``accounting``): ``associations,limits,safe``, the value AWS's PCS recipes offer
  (aws-hpc-recipes, recipes/pcs/getting_started/assets/cluster.yaml ``AccountingPolicyEnforcement``); the PCS
  user guide ("Slurm accounting in AWS PCS") accepts a subset of Slurm's options. A job runs only under an
  account the people sync created (scripts/node/slurm_people.py), within its limits.
"""

from __future__ import annotations

from config.slurm import Slurm

#: The multifactor plugin's weights: QoS above fair share above age.
PRIORITY_SETTINGS: dict[str, str] = {
    "PriorityType": "priority/multifactor",
    "PriorityWeightFairshare": "10000",
    "PriorityWeightQOS": "100000",
    "PriorityWeightAge": "100",
}

#: ``AccountingStorageEnforce`` where the cluster keeps accounting.
ACCOUNTING_ENFORCE = "associations,limits,safe"


def cluster_settings(slurm: Slurm) -> dict[str, str]:
    """The custom Slurm settings of ``slurm``'s cluster, by parameter name, in a fixed order."""
    settings = dict(PRIORITY_SETTINGS)
    if slurm.accounting:
        settings["AccountingStorageEnforce"] = ACCOUNTING_ENFORCE
    return settings

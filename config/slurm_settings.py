"""The Slurm settings of the environment's PCS cluster that are the platform's policy, not PCS's defaults: one
place that the cluster's ``SlurmCustomSettings`` (gpu_constructs/scheduler/slurm_cluster.py) and the real Slurm
of the tests (tests/flows/slurm/config.py, its slurm.conf) both read, so what the tests prove is what PCS is given.

- Priority: Slurm's multifactor plugin is its default ``PriorityType`` (https://slurm.schedmd.com/
  priority_multifactor.html), which PCS does not take as a custom setting; its weights are all 0 by default, which
  orders jobs by submission alone. PCS takes the weights at the cluster level (AWS PCS User Guide, "Custom Slurm
  settings for AWS PCS clusters"): fair share between the teams' accounts, the QoS ten times above it (the urgent
  QoS, config/slurm.py ``URGENT_PRIORITY``, the highest, goes first whatever the team's usage), and a little age so
  that no job waits for ever.
- Accounting enforcement (with ``accounting``): ``associations,limits,qos,safe``, options PCS takes ("Slurm
  accounting in AWS PCS"): a job runs only under an account the people sync created (scripts/node/slurm_people.py),
  within its limits, with a QoS its account may use (every team's account lists ``normal`` and ``urgent``).
"""

from __future__ import annotations

from config.slurm import Slurm

#: Cluster-level settings PCS takes (it refuses any other: an allow-list), those of them this project has had reason
#: to read: AWS PCS User Guide, "Custom Slurm settings for AWS PCS clusters"; SrunPortRange from aws-hpc-recipes
#: recipes/pcs/isolated_pcs. A setting added below must be one of them.
PCS_CLUSTER_SETTINGS = frozenset(
    {
        "AccountingStorageEnforce",
        "Epilog",
        "PriorityDecayHalfLife",
        "PriorityWeightAge",
        "PriorityWeightFairshare",
        "PriorityWeightQOS",
        "Prolog",
        "SelectTypeParameters",
        "SrunPortRange",
    }
)

#: The multifactor plugin's weights: QoS above fair share above age.
PRIORITY_SETTINGS: dict[str, str] = {
    "PriorityWeightFairshare": "10000",
    "PriorityWeightQOS": "100000",
    "PriorityWeightAge": "100",
}

#: ``AccountingStorageEnforce`` where the cluster keeps accounting.
ACCOUNTING_ENFORCE = "associations,limits,qos,safe"


def cluster_settings(slurm: Slurm) -> dict[str, str]:
    """The custom Slurm settings of ``slurm``'s cluster, by parameter name, in a fixed order."""
    settings = dict(PRIORITY_SETTINGS)
    if slurm.accounting:
        settings["AccountingStorageEnforce"] = ACCOUNTING_ENFORCE
    return settings

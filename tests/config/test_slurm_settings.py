"""The PCS cluster's policy settings (config/slurm_settings.py), which the real Slurm of tests/flows/slurm runs with."""

from __future__ import annotations

from config.slurm import Slurm
from config.slurm_settings import ACCOUNTING_ENFORCE, PCS_CLUSTER_SETTINGS, PRIORITY_SETTINGS, cluster_settings
from tests.flows.slurm.config import pcs_policy_lines


def test_qos_outweighs_fair_share_which_outweighs_age() -> None:
    weights = {k: int(v) for k, v in PRIORITY_SETTINGS.items() if k.startswith("PriorityWeight")}
    assert weights["PriorityWeightQOS"] > weights["PriorityWeightFairshare"] > weights["PriorityWeightAge"] > 0
    assert "PriorityType" not in PRIORITY_SETTINGS  # not a setting PCS takes: multifactor is Slurm's default


def test_accounting_enforcement_only_where_the_cluster_keeps_accounting() -> None:
    assert cluster_settings(Slurm())["AccountingStorageEnforce"] == ACCOUNTING_ENFORCE
    assert "AccountingStorageEnforce" not in cluster_settings(Slurm(accounting=False))
    assert set(cluster_settings(Slurm(accounting=False))) == set(PRIORITY_SETTINGS)


def test_the_test_clusters_slurm_conf_carries_the_same_lines() -> None:
    assert pcs_policy_lines().splitlines() == [f"{k}={v}" for k, v in cluster_settings(Slurm()).items()]


def test_every_setting_is_one_pcs_takes_at_the_cluster_level() -> None:
    assert set(cluster_settings(Slurm())) <= PCS_CLUSTER_SETTINGS

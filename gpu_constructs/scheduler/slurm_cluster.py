"""The environment's one AWS PCS cluster: managed Slurm (controller and accounting database run by PCS)."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_pcs as pcs
from constructs import Construct

from config.slurm import Slurm
from config.slurm_settings import cluster_settings


class SlurmCluster(Construct):
    """An AWS::PCS::Cluster of ``slurm.cluster_size`` running ``slurm.slurm_version``, with PCS's Slurm accounting
    (``Accounting.Mode`` STANDARD: jobs' usage per user and account, what fair share and ``sacct`` read) unless
    ``slurm.accounting`` is false, and idle nodes stopped after ``slurm.scale_down_idle_seconds``. Its custom Slurm
    settings are the platform's priority and accounting policy (config/slurm_settings.py): fair share between
    teams, the urgent QoS first; SlurmConfiguration is updatable in place (registry schema: not create-only).

    PCS puts the controller's network interface in one subnet (the registry schema: "AWS PCS currently supports
    only 1 subnet"), with ``security_group``. The cluster has no fixed name: Name, Size and Networking are
    create-only, and a replacement must not collide with the cluster it replaces.

    Attributes:
        cluster (the L1 resource), cluster_id.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, slurm: Slurm, subnet_id: str, security_group: ec2.ISecurityGroup
    ) -> None:
        super().__init__(scope, construct_id)
        self.cluster = pcs.CfnCluster(
            self,
            "Cluster",
            size=slurm.cluster_size.value.upper(),
            scheduler=pcs.CfnCluster.SchedulerProperty(type="SLURM", version=slurm.slurm_version),
            networking=pcs.CfnCluster.NetworkingProperty(
                subnet_ids=[subnet_id], security_group_ids=[security_group.security_group_id]
            ),
            slurm_configuration=pcs.CfnCluster.SlurmConfigurationProperty(
                scale_down_idle_time_in_seconds=slurm.scale_down_idle_seconds,
                accounting=pcs.CfnCluster.AccountingProperty(mode="STANDARD" if slurm.accounting else "NONE"),
                slurm_custom_settings=[
                    pcs.CfnCluster.SlurmCustomSettingProperty(parameter_name=name, parameter_value=value)
                    for name, value in cluster_settings(slurm).items()
                ],
            ),
        )
        self.cluster_id = self.cluster.attr_id

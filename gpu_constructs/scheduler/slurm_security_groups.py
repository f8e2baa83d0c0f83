"""The two security groups of Slurm on PCS: the cluster's (PCS puts its controller's network interface in the VPC
with it) and the Slurm nodes' (login and compute nodes carry it next to the platform's own groups).

The ports are Slurm's defaults, which PCS uses (AWS PCS User Guide, "Security group requirements and
considerations"; SchedMD, "Network Configuration Guide"; aws-hpc-recipes ``recipes/pcs/isolated_pcs``):

- slurmctld listens on TCP 6817 and slurmdbd (accounting) on 6819, on the controller: nodes connect to both;
- slurmd listens on TCP 6818 on every node: the controller connects to it, and so do the other nodes (slurmd's
  message fan-out, ``srun`` from a login node);
- ``srun`` and the job steps it starts talk back on TCP 60001-63000 (PCS's ``SrunPortRange``), login node to
  compute node and between compute nodes.

Nothing else: a node's calls to AWS (PCS's registration API among them) leave through the node group's HTTPS
rules, and a job's own traffic through the training and EFA groups.
"""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from gpu_constructs.network.security_groups import keep_default_egress_closed, members_only

SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
SLURMDBD_PORT = 6819
SRUN_PORTS = (60001, 63000)


class SlurmSecurityGroups(Construct):
    """Attributes: ``cluster`` (the PCS controller's interface), ``nodes`` (every Slurm node, login and compute)."""

    def __init__(self, scope: Construct, construct_id: str, *, vpc: ec2.IVpc) -> None:
        super().__init__(scope, construct_id)
        self.cluster = ec2.SecurityGroup(
            self,
            "Cluster",
            vpc=vpc,
            description="Slurm on PCS, controller: slurmctld and slurmdbd from the Slurm nodes, slurmd to them",
            allow_all_outbound=False,
        )
        self.nodes = ec2.SecurityGroup(
            self,
            "Nodes",
            vpc=vpc,
            description="Slurm on PCS, nodes: slurmd from the controller and the nodes, srun between the nodes",
            allow_all_outbound=False,
        )
        for port, daemon in ((SLURMCTLD_PORT, "slurmctld"), (SLURMDBD_PORT, "slurmdbd")):
            self.cluster.add_ingress_rule(self.nodes, ec2.Port.tcp(port), f"{daemon} from the Slurm nodes")
            self.nodes.add_egress_rule(self.cluster, ec2.Port.tcp(port), f"{daemon} on the PCS controller")
        self.cluster.add_egress_rule(self.nodes, ec2.Port.tcp(SLURMD_PORT), "slurmd on the Slurm nodes")
        self.nodes.add_ingress_rule(self.cluster, ec2.Port.tcp(SLURMD_PORT), "slurmd from the PCS controller")
        members_only(
            self.nodes,
            ec2.Port.tcp(SLURMD_PORT),
            ingress="slurmd from the other Slurm nodes",
            egress="slurmd on the other Slurm nodes",
        )
        members_only(
            self.nodes,
            ec2.Port.tcp_range(*SRUN_PORTS),
            ingress="srun and job steps from the other Slurm nodes",
            egress="srun and job steps to the other Slurm nodes",
        )
        keep_default_egress_closed(self.cluster)

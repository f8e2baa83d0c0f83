"""The training security group: TCP on the unprivileged ports between the nodes of the training fleets only."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from gpu_constructs.network.security_groups import members_only

#: TCP between the nodes of a training job: torchrun's c10d rendezvous (``jobs.rendezvous_port``, 1024 or
#: above), the MASTER_PORT torchrun gives its workers, and the connections of NCCL's and gloo's bootstrap and
#: socket transport, which listen on ports the kernel picks (``ip_local_port_range``, which an image may
#: retune); privileged ports (SSH among them) stay closed.
TRAINING_TCP_PORTS = (1024, 65535)


class TrainingSecurityGroup(Construct):
    """Admits and sends TCP 1024-65535 between its own members, nothing else.

    Every training fleet carries it on each interface that carries the node group, EFA fleets too: a job's
    TCP (rendezvous, NCCL bootstrap) then passes by one rule whatever the fabric, and the EFA group's
    all-traffic rule stays what EFA itself needs. Inference nodes do not carry it, so they cannot reach a
    training node's rendezvous store (unauthenticated) and training nodes cannot reach a served port.

    Attributes:
        security_group: the group.
    """

    def __init__(self, scope: Construct, construct_id: str, *, vpc: ec2.IVpc) -> None:
        super().__init__(scope, construct_id)
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="Training nodes: TCP 1024-65535 between members of this group only",
            allow_all_outbound=False,
        )
        members_only(
            self.security_group,
            ec2.Port.tcp_range(*TRAINING_TCP_PORTS),
            ingress="Training jobs: rendezvous and NCCL from other training nodes",
            egress="Training jobs: rendezvous and NCCL to other training nodes",
        )

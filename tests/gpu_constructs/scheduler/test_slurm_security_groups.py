"""Slurm's ports between the PCS controller and the nodes, and nothing else."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Template

from gpu_constructs.scheduler.slurm_security_groups import SlurmSecurityGroups
from tests.gpu_constructs.helpers import bare_stack, group_id, sg_rules, template, vpc


@pytest.fixture(scope="module")
def groups() -> Template:
    stack = bare_stack()
    SlurmSecurityGroups(stack, "Slurm", vpc=vpc(stack))
    return template(stack)


def test_the_controller_takes_slurmctld_and_slurmdbd_from_the_nodes_and_reaches_their_slurmd(groups: Template) -> None:
    cluster, nodes = group_id(groups, "SlurmCluster"), group_id(groups, "SlurmNodes")
    assert sg_rules(groups, cluster, "Ingress") == {(nodes, "tcp", 6817, 6817), (nodes, "tcp", 6819, 6819)}
    assert sg_rules(groups, cluster, "Egress") == {(nodes, "tcp", 6818, 6818)}


def test_the_nodes_take_slurmd_and_srun_from_the_controller_and_each_other_only(groups: Template) -> None:
    cluster, nodes = group_id(groups, "SlurmCluster"), group_id(groups, "SlurmNodes")
    assert sg_rules(groups, nodes, "Ingress") == {
        (cluster, "tcp", 6818, 6818),
        (nodes, "tcp", 6818, 6818),
        (nodes, "tcp", 60001, 63000),
    }
    assert sg_rules(groups, nodes, "Egress") == {
        (cluster, "tcp", 6817, 6817),
        (cluster, "tcp", 6819, 6819),
        (nodes, "tcp", 6818, 6818),
        (nodes, "tcp", 60001, 63000),
    }

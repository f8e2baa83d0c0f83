"""TrainingSecurityGroup: TCP on the unprivileged ports between its members, nothing else, no default egress."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Template

from gpu_constructs.network.security_groups import NO_TRAFFIC_EGRESS
from gpu_constructs.network.training_security_group import TRAINING_TCP_PORTS, TrainingSecurityGroup
from tests.gpu_constructs.helpers import bare_stack, only, sg_rules, template, vpc


@pytest.fixture(scope="module")
def tmpl() -> Template:
    stack = bare_stack()
    TrainingSecurityGroup(stack, "Training", vpc=vpc(stack))
    return template(stack)


def test_members_reach_each_other_on_unprivileged_tcp_only(tmpl: Template) -> None:
    group_id, group = only(tmpl, "AWS::EC2::SecurityGroup")
    between_members = {(group_id, "tcp", *TRAINING_TCP_PORTS)}
    assert sg_rules(tmpl, group_id, "Ingress") == between_members
    assert sg_rules(tmpl, group_id, "Egress") == between_members
    # The self rules are separate resources: without the inline placeholder EC2 would add allow-all egress.
    assert group["Properties"]["SecurityGroupEgress"] == [NO_TRAFFIC_EGRESS]
    assert "SecurityGroupIngress" not in group["Properties"]

"""EfaSecurityGroup: every protocol between members of the group, nothing from or to anywhere else."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match, Template

from gpu_constructs.network.efa_security_group import EfaSecurityGroup
from gpu_constructs.network.security_groups import NO_TRAFFIC_EGRESS
from tests.gpu_constructs.helpers import bare_stack, only, template, vpc


@pytest.fixture(scope="module")
def tmpl() -> Template:
    stack = bare_stack()
    EfaSecurityGroup(stack, "Efa", vpc=vpc(stack))
    return template(stack)


def test_members_reach_each_other_on_every_protocol(tmpl: Template) -> None:
    group_id, group = only(tmpl, "AWS::EC2::SecurityGroup")
    self_ref = {"Fn::GetAtt": [group_id, "GroupId"]}
    tmpl.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {"IpProtocol": "-1", "GroupId": self_ref, "SourceSecurityGroupId": self_ref},
    )
    tmpl.has_resource_properties(
        "AWS::EC2::SecurityGroupEgress",
        {"IpProtocol": "-1", "GroupId": self_ref, "DestinationSecurityGroupId": self_ref},
    )
    # Nothing else: no CIDR source or destination, and EC2's default allow-all egress stays off.
    assert len(tmpl.find_resources("AWS::EC2::SecurityGroupIngress")) == 1
    assert len(tmpl.find_resources("AWS::EC2::SecurityGroupEgress")) == 1
    assert "SecurityGroupIngress" not in group["Properties"]
    assert group["Properties"]["SecurityGroupEgress"] == [NO_TRAFFIC_EGRESS]


def test_no_cidr_rule_anywhere(tmpl: Template) -> None:
    for kind in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress"):
        assert not tmpl.find_resources(kind, {"Properties": {"CidrIp": Match.any_value()}})

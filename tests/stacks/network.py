"""The Network stack's subnets and route tables as a synthesized template gives them: read by its tests
(tests/stacks/test_network_stack.py) and by the node-route flow (tests/flows/test_node_routes.py)."""

from __future__ import annotations

from tests.synth import StackTemplate


def ref(value) -> str | None:
    """The logical id a ``Ref`` or ``Fn::GetAtt`` names; None for anything else."""
    if isinstance(value, dict):
        if "Ref" in value:
            return value["Ref"]
        if "Fn::GetAtt" in value:
            return value["Fn::GetAtt"][0]
    return None


def gpu_subnets(stack: StackTemplate) -> dict[str, dict]:
    """The GPU nodes' subnets, by logical id."""
    return {
        k: v
        for k, v in stack.resources("AWS::EC2::Subnet").items()
        if {"Key": "aws-cdk:subnet-name", "Value": "gpu"} in v["Properties"]["Tags"]
    }


def route_tables_of(stack: StackTemplate, subnet_ids: set[str]) -> set[str]:
    """The route tables associated with any of ``subnet_ids``."""
    return {
        ref(a["Properties"]["RouteTableId"])
        for a in stack.resources("AWS::EC2::SubnetRouteTableAssociation").values()
        if ref(a["Properties"]["SubnetId"]) in subnet_ids
    }

"""Every PCS node group launches with an instance profile whose role PCS accepts: path /aws-pcs/ (or a name
starting AWSPCS) and the right to register with a PCS cluster."""

from __future__ import annotations

from tests.gpu_constructs.scheduler.helpers import logical_id, referenced
from tests.synth import StackTemplate, Synth


def test_node_groups_launch_with_an_instance_profile_whose_role_pcs_accepts(
    slurm_synth: Synth, fleets: StackTemplate
) -> None:
    """The role's name starts with AWSPCS or its path is /aws-pcs/, and it may register with a PCS cluster."""
    for lid, group in fleets.resources("AWS::PCS::ComputeNodeGroup").items():
        stack, arn = referenced(slurm_synth, fleets, group["Properties"]["IamInstanceProfileArn"])
        assert arn["Fn::GetAtt"][1] == "Arn"
        profile = stack.json["Resources"][logical_id(arn)]
        assert profile["Type"] == "AWS::IAM::InstanceProfile"
        (role_ref,) = profile["Properties"]["Roles"]
        role_id = logical_id(role_ref)
        role = stack.json["Resources"][role_id]["Properties"]
        assert role.get("Path") == "/aws-pcs/" or role.get("RoleName", "").startswith("AWSPCS"), lid
        actions = [
            statement["Action"]
            for policy in stack.resources("AWS::IAM::ManagedPolicy").values()
            if {"Ref": role_id} in policy["Properties"].get("Roles", [])
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        ]
        assert "pcs:RegisterComputeNodeGroupInstance" in actions, lid
